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
// The examples are split between this file and attn-compile-cuda-examples-2.mlir so
// that lit's two workers assemble them side by side.
// RUN: attn-compile %examples/normalizers/expressive.mlir -o %t.expressive.ptx --emit=ptx --cuda-targets=sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128
// RUN: FileCheck %s < %t.expressive.ptx
// RUN: %ptxas -arch=sm_90 %t.expressive.ptx -o %t.expressive.cubin
// RUN: attn-compile %examples/normalizers/linear.mlir -o %t.linear.ptx --emit=ptx --cuda-targets=sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128
// RUN: FileCheck %s < %t.linear.ptx
// RUN: %ptxas -arch=sm_90 %t.linear.ptx -o %t.linear.cubin
// RUN: attn-compile %examples/normalizers/multimax.mlir -o %t.multimax.ptx --emit=ptx --cuda-targets=sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128
// RUN: FileCheck %s < %t.multimax.ptx
// RUN: %ptxas -arch=sm_90 %t.multimax.ptx -o %t.multimax.cubin
// RUN: attn-compile %examples/normalizers/relu.mlir -o %t.relu.ptx --emit=ptx --cuda-targets=sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128
// RUN: FileCheck %s < %t.relu.ptx
// RUN: %ptxas -arch=sm_90 %t.relu.ptx -o %t.relu.cubin
// RUN: attn-compile %examples/normalizers/sigmoid.mlir -o %t.sigmoid.ptx --emit=ptx --cuda-targets=sm_90 --cuda-dtypes=bf16,f32 --cuda-head-dims=128
// RUN: FileCheck %s < %t.sigmoid.ptx
// RUN: %ptxas -arch=sm_90 %t.sigmoid.ptx -o %t.sigmoid.cubin

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
