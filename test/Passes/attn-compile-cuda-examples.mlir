// REQUIRES: ptxas
// Every example normalizer compiles for sm_80 and sm_90 (ptxas assembles each
// cubin), and the artifact exports both cubins. bf16 (always on tensor cores) and
// f32 (SIMT) cover both kernel families; f16 differs from bf16 only in the mma op
// (attn-compile-cuda.mlir) and would add a minute of CI. Head dim 128 only: the
// head dim sets loop bounds and tile extents, while what differs between the
// normalizers (their scalar functions) is the same code at every head dim; 128 has
// the largest tiles and register pressure, and attn-compile-cuda.mlir assembles
// all three head dims for every dtype.
// The examples are split between this file and attn-compile-cuda-examples-2.mlir so
// that lit's two workers assemble them side by side.
// RUN: attn-compile %examples/normalizers/expressive.mlir -o %t.expressive.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.expressive.so | FileCheck %s
// RUN: attn-compile %examples/normalizers/linear.mlir -o %t.linear.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.linear.so | FileCheck %s
// RUN: attn-compile %examples/normalizers/multimax.mlir -o %t.multimax.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.multimax.so | FileCheck %s
// RUN: attn-compile %examples/normalizers/relu.mlir -o %t.relu.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.relu.so | FileCheck %s
// RUN: attn-compile %examples/normalizers/sigmoid.mlir -o %t.sigmoid.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.sigmoid.so | FileCheck %s

// CHECK-DAG: {{0*[1-9a-f][0-9a-f]*}} R attn_cuda_cubin_sm_80{{$}}
// CHECK-DAG: {{0*[1-9a-f][0-9a-f]*}} R attn_cuda_cubin_sm_90{{$}}
// CHECK-DAG: {{0*[1-9a-f][0-9a-f]*}} R attn_cuda_ptx{{$}}
