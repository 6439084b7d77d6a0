// REQUIRES: ptxas
// The attention families of issue 14 on the GPU: each either lowers to the four CUDA
// kernels or is refused with a diagnostic naming the feature the GPU lowering lacks,
// before any kernel is built. --emit=mlir stops before ptxas (but needs the toolkit, for
// libdevice); attn-compile-cuda-examples assembles the normalizers. The refusals'
// wording is tested on small IR in lower-to-gpu-invalid.mlir, the regions' batch and
// head indices in lower-to-gpu.mlir.
// Grouped-query attention is refused by the runtime, with GPU tensors only.
//
// Index-only masks and score mods lower: the causal mask, the sliding window (i, j),
// softcapping, ALiBi with one slope, relative-position buckets over i and j; and the
// normalizers softmax1 (a constant epsilon) and softplus (a bounded form).
// RUN: attn-compile %examples/families/causal.mlir -o - --emit=mlir --cuda-targets=sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32 | FileCheck %s --check-prefix=LOWERED
// RUN: attn-compile %examples/families/sliding_window.mlir -o - --emit=mlir --cuda-targets=sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32 | FileCheck %s --check-prefix=LOWERED
// RUN: attn-compile %examples/families/softcap.mlir -o - --emit=mlir --cuda-targets=sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32 | FileCheck %s --check-prefix=LOWERED
// RUN: attn-compile %examples/families/alibi.mlir -o - --emit=mlir --cuda-targets=sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32 | FileCheck %s --check-prefix=LOWERED
// RUN: attn-compile %examples/families/relative_bias.mlir -o - --emit=mlir --cuda-targets=sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32 | FileCheck %s --check-prefix=LOWERED
// RUN: attn-compile %examples/normalizers/softmax1.mlir -o - --emit=mlir --cuda-targets=sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32 | FileCheck %s --check-prefix=LOWERED
// RUN: attn-compile %examples/normalizers/softplus.mlir -o - --emit=mlir --cuda-targets=sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32 | FileCheck %s --check-prefix=LOWERED
//
// LOWERED: gpu.module @attn_cuda
// LOWERED-DAG: gpu.func @attn_forward_bf16_d64(
// LOWERED-DAG: gpu.func @attn_backward_prep_bf16_d64(
// LOWERED-DAG: gpu.func @attn_backward_dkdv_bf16_d64(
// LOWERED-DAG: gpu.func @attn_backward_dq_bf16_d64(
//
// Tensor inputs (per-head ALiBi slopes, T5 bucket tables, document ids, the prefix
// length, Luong's predicted positions), row offset regions (sinks) and the additive
// contraction (location-sensitive attention) are refused, naming what they use.
// RUN: not attn-compile %examples/families/alibi_heads.mlir -o %t.so --cuda-targets=sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32 2>&1 | FileCheck %s --check-prefix=SLOPES
// RUN: not attn-compile %examples/families/t5_bias.mlir -o %t.so --cuda-targets=sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32 2>&1 | FileCheck %s --check-prefix=T5
// RUN: not attn-compile %examples/families/document_mask.mlir -o %t.so --cuda-targets=sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32 2>&1 | FileCheck %s --check-prefix=DOC
// RUN: not attn-compile %examples/families/prefix_lm.mlir -o %t.so --cuda-targets=sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32 2>&1 | FileCheck %s --check-prefix=PREFIX
// RUN: not attn-compile %examples/families/luong_local_post.mlir -o %t.so --cuda-targets=sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32 2>&1 | FileCheck %s --check-prefix=LOCAL
// RUN: not attn-compile %examples/families/sliding_window_sinks.mlir -o %t.so --cuda-targets=sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32 2>&1 | FileCheck %s --check-prefix=SINKS
// RUN: not attn-compile %examples/families/location_sensitive.mlir -o %t.so --cuda-targets=sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32 2>&1 | FileCheck %s --check-prefix=ADDITIVE
// RUN: not ls %t.so
//
// SLOPES: error: 'attn.kernel' op reads tensor input @slopes (attn.input), which the GPU lowering does not support yet; compile it for the CPU
// T5: error: 'attn.kernel' op reads tensor input @bias (attn.input), which the GPU lowering does not support yet
// DOC: error: 'attn.kernel' op reads tensor input @doc (attn.input), which the GPU lowering does not support yet
// PREFIX: error: 'attn.kernel' op reads tensor input @prefix (attn.input), which the GPU lowering does not support yet
// LOCAL: error: 'attn.kernel' op reads tensor input @p (attn.input), which the GPU lowering does not support yet
// SINKS: error: 'attn.kernel' op has a row offset region (the offset of normalizer @softmax_sinks), which the GPU lowering does not support yet (a constant epsilon it does)
// ADDITIVE: error: 'attn.kernel' op uses contract additive (score @location_sensitive), which the GPU lowering does not support yet; supported: dot, scaled_dot
