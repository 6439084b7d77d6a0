// REQUIRES: ptxas
// Every example normalizer lowers to the CUDA kernels and ptxas assembles them. bf16
// (always on tensor cores) and f32 (SIMT) cover both kernel families; f16 differs from
// bf16 only in the mma op (attn-compile-cuda.mlir). Head dim 128 only: the head dim sets
// loop bounds and tile extents, while what differs between the normalizers (their scalar
// functions) is the same code at every head dim; 128 has the largest tiles and register
// pressure. One chip: what differs between chips is ptxas's work on the same PTX, and
// attn-compile-cuda.mlir assembles for sm_80 and sm_90 and checks the artifact's cubins;
// the artifact's CPU half is every other test's. So this file stops at the PTX, which
// saves about a third of each compile in CI.
// The examples are split between this file and attn-compile-cuda-examples.mlir so
// that lit's two workers assemble them side by side.
// RUN: attn-compile %examples/normalizers/softmax.mlir -o %t.softmax.ptx --emit=ptx --cuda-targets=sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128
// RUN: FileCheck %s < %t.softmax.ptx
// RUN: %ptxas -arch=sm_90 %t.softmax.ptx -o %t.softmax.cubin
// RUN: attn-compile %examples/normalizers/softplus.mlir -o %t.softplus.ptx --emit=ptx --cuda-targets=sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128
// RUN: FileCheck %s < %t.softplus.ptx
// RUN: %ptxas -arch=sm_90 %t.softplus.ptx -o %t.softplus.cubin
// RUN: attn-compile %examples/normalizers/softmax1.mlir -o %t.softmax1.ptx --emit=ptx --cuda-targets=sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128
// RUN: FileCheck %s < %t.softmax1.ptx
// RUN: %ptxas -arch=sm_90 %t.softmax1.ptx -o %t.softmax1.cubin
// RUN: attn-compile %examples/normalizers/tanhmax.mlir -o %t.tanhmax.ptx --emit=ptx --cuda-targets=sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128
// RUN: FileCheck %s < %t.tanhmax.ptx
// RUN: %ptxas -arch=sm_90 %t.tanhmax.ptx -o %t.tanhmax.cubin
// RUN: attn-compile %examples/normalizers/sigsoftmax.mlir -o %t.sigsoftmax.ptx --emit=ptx --cuda-targets=sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128
// RUN: FileCheck %s < %t.sigsoftmax.ptx
// RUN: %ptxas -arch=sm_90 %t.sigsoftmax.ptx -o %t.sigsoftmax.cubin

// CHECK: .target sm_90
// CHECK-DAG: .visible .entry attn_forward_bf16_d128(
// CHECK-DAG: .visible .entry attn_backward_prep_bf16_d128(
// CHECK-DAG: .visible .entry attn_backward_dkdv_bf16_d128(
// CHECK-DAG: .visible .entry attn_backward_dq_bf16_d128(
// CHECK-DAG: .visible .entry attn_forward_f32_d128(
// CHECK-DAG: .visible .entry attn_backward_prep_f32_d128(
// CHECK-DAG: .visible .entry attn_backward_dkdv_f32_d128(
// CHECK-DAG: .visible .entry attn_backward_dq_f32_d128(
// CHECK-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
