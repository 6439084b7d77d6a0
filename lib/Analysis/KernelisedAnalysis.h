//===- KernelisedAnalysis.h - does a kernel have a linear-time form? -*- C++ -*-===//
//
// DESIGN.md section 2, "kernelised": when the score is s_ij = φ(q_i)·φ(k_j) (a dot
// or scaled dot, an optional elementwise feature map φ, identity without one),
// the numerator is g = a·s and the denominator is ε + Σ b·s, a constant or the
// key count (a, b free of s; they may depend on params), and the mask is none
// or causal, then
//   O_i = a·u_iᵀ S / C_i,  S = Σ_j w_j v_jᵀ,  C_i = ε + b·u_i·Σ_j w_j
// with u_i = scale·φ(q_i), w_j = φ(k_j): O(N·d·dv) instead of O(N²·d).
//
// A score mod must keep that product form:
//   mod(s, i, j) = c·s           (c free of s, i, j and params), or
//   mod(s, i, j) = s·cos(x(i, j))  with x affine in i and j (cosformer), which
//     splits as cos(A_i + B_j) = cos A_i cos B_j − sin A_i sin B_j with
//     A_i = x(i, 0) − x(0, 0) and B_j = x(0, j): features of twice the width.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_ANALYSIS_KERNELISEDANALYSIS_H
#define ATTN_LIB_ANALYSIS_KERNELISEDANALYSIS_H

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <optional>

namespace mlir::attn {

struct KernelisedForm {
  /// The cos(x(i, j)) factor of a cosformer mod, null without one.
  math::CosOp positionFactor;
};

/// The kernelised form of `kernel`, or nullopt when it has none. With `explain`,
/// a kernel with a feature map that does not qualify gets a remark on the op
/// that breaks the form (it then runs in the quadratic form).
std::optional<KernelisedForm> matchKernelised(KernelOp kernel, bool explain);

} // namespace mlir::attn

#endif
