// REQUIRES: ptxas
// Every example normalizer compiles for sm_80 and sm_90 (every head dim; ptxas
// assembles each cubin), and the artifact exports both cubins. bf16 (always on
// tensor cores) and f32 (SIMT) cover both kernel families; f16 differs from bf16
// only in the mma op (attn-compile-cuda.mlir) and would add a minute of CI.
// The examples are split between this file and attn-compile-cuda-examples.mlir so
// that lit's two workers assemble them side by side.
// RUN: attn-compile %examples/normalizers/softmax.mlir -o %t.softmax.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.softmax.so | FileCheck %s
// RUN: attn-compile %examples/normalizers/softplus.mlir -o %t.softplus.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.softplus.so | FileCheck %s
// RUN: attn-compile %examples/normalizers/softmax1.mlir -o %t.softmax1.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.softmax1.so | FileCheck %s
// RUN: attn-compile %examples/normalizers/tanhmax.mlir -o %t.tanhmax.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.tanhmax.so | FileCheck %s
// RUN: attn-compile %examples/normalizers/sigsoftmax.mlir -o %t.sigsoftmax.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f32 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.sigsoftmax.so | FileCheck %s

// CHECK-DAG: {{0*[1-9a-f][0-9a-f]*}} R attn_cuda_cubin_sm_80{{$}}
// CHECK-DAG: {{0*[1-9a-f][0-9a-f]*}} R attn_cuda_cubin_sm_90{{$}}
// CHECK-DAG: {{0*[1-9a-f][0-9a-f]*}} R attn_cuda_ptx{{$}}
