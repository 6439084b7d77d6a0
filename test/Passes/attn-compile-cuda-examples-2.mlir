// REQUIRES: ptxas
// Every example normalizer compiles for sm_80 and sm_90 (ptxas assembles each
// cubin), and the artifact exports both cubins. bf16 (always on tensor cores) and
// f32 (SIMT) cover both kernel families; f16 differs from bf16 only in the mma op
// (attn-compile-cuda.mlir) and would add a minute of CI. Head dim 128 only: the
// head dim sets loop bounds and tile extents, while what differs between the
// normalizers (their scalar functions) is the same code at every head dim; 128 has
// the largest tiles and register pressure, and attn-compile-cuda.mlir assembles
// all three head dims for every dtype.
// The examples are split between this file and attn-compile-cuda-examples.mlir so
// that lit's two workers assemble them side by side.
// RUN: attn-compile %examples/normalizers/softmax.mlir -o %t.softmax.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.softmax.so | FileCheck %s
// RUN: attn-compile %examples/normalizers/softplus.mlir -o %t.softplus.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.softplus.so | FileCheck %s
// RUN: attn-compile %examples/normalizers/softmax1.mlir -o %t.softmax1.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.softmax1.so | FileCheck %s
// RUN: attn-compile %examples/normalizers/tanhmax.mlir -o %t.tanhmax.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.tanhmax.so | FileCheck %s
// RUN: attn-compile %examples/normalizers/sigsoftmax.mlir -o %t.sigsoftmax.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.sigsoftmax.so | FileCheck %s

// CHECK-DAG: {{0*[1-9a-f][0-9a-f]*}} R attn_cuda_cubin_sm_80{{$}}
// CHECK-DAG: {{0*[1-9a-f][0-9a-f]*}} R attn_cuda_cubin_sm_90{{$}}
// CHECK-DAG: {{0*[1-9a-f][0-9a-f]*}} R attn_cuda_ptx{{$}}
