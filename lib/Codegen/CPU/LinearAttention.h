//===- LinearAttention.h - the O(N·d·dv) kernelised form ----------*- C++ -*-===//
//
// Forward and backward of a kernelised kernel (lib/KernelisedAnalysis.h) with the
// ABI of runtime/include/attn/abi.h, in the linear-time form:
//   u_i = scale·c·φ(q_i)   (cosformer: [u cos A_i, u sin A_i])
//   w_j = φ(k_j)           (cosformer: [w cos B_j, −w sin B_j])
//   O_i = a·u_iᵀ S_i / C_i,  S_i = Σ_j w_j v_jᵀ,  C_i = ε + b·u_i·z_i | c | count
// with a = g(1), b = h(1) (g, h linear in s) and S_i, z_i = Σ_j w_j over the keys
// row i sees: all keys below kv_len, or (causal) the prefix j <= i, built by
// chunks of kLinearChunk keys: the state of the earlier chunks plus the
// quadratic pairs inside the row's own chunk. row_max = 0, row_sum = C_i.
//
// Backward, with dN_i = a·dO_i/C_i and dH_i = −b·D_i/C_i (D_i = dO_i·O_i):
//   du_i = S_i dN_i + z_i dH_i,   dw_j = P_j v_j + y_j,   dv_j = P_jᵀ w_j,
//   P_j = Σ_i u_i dN_iᵀ, y_j = Σ_i u_i dH_i over the queries that see key j (a
//   suffix sum when causal), da = Σ_i dO_i·N_i/C_i, db = −Σ_i D_i·H_i/C_i, and
//   dθ = da·∂g(1)/∂θ + db·∂h(1)/∂θ; then through φ' and the cos/sin factors.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_CODEGEN_CPU_LINEARATTENTION_H
#define ATTN_LIB_CODEGEN_CPU_LINEARATTENTION_H

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::attn {

/// Keys per chunk of the causal prefix sums (and rows per feature scratch).
constexpr int64_t kLinearChunk = 64;

/// What the linear form needs of a kernel, instantiated for one element type.
struct LinearForm {
  KernelOp kernel;
  FloatType type;
  /// g, h (h null unless the denominator is summed), the score mod (c·s, or
  /// null), φ and φ' (null: identity), the cosformer phase x(i, j) (or null),
  /// and the derivatives of g and h by each normalizer param.
  func::FuncOp numerator, denominator, score, feature, featureDx, phase;
  ArrayRef<func::FuncOp> numeratorDp, denominatorDp;
  /// Values of the entry being built (see KernelCodegen::prologue): the score
  /// scale, min(kv_len, Nk), causal (i1: the runtime flag, or true with a mask
  /// region) and the params.
  Value scale, kvEnd, isCausal;
  ValueRange params;
};

/// Emits the forward body at `b`'s insertion point; `args` are the forward ABI
/// arguments (q, k, v, o, row_max, row_sum, params, q_begin, q_end, kv_len, causal).
void buildLinearForward(ImplicitLocOpBuilder &b, const LinearForm &form, ValueRange args);

/// The backward body; `args` are the backward ABI arguments.
void buildLinearBackward(ImplicitLocOpBuilder &b, const LinearForm &form, ValueRange args);

} // namespace mlir::attn

#endif
