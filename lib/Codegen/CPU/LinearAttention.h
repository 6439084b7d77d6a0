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

#include "lib/Codegen/AttentionMath.h"
#include "lib/Codegen/CPU/EntryArguments.h"

namespace mlir::attn {

/// Keys per chunk of the causal prefix sums (and rows per feature scratch).
constexpr int64_t kLinearChunk = 64;

/// What the linear form needs of a kernel, instantiated for one element type.
struct LinearForm {
  FloatType type;
  /// The attention math on scalars: g, h (a = g(1), b = h(1)), the score mod
  /// (c·s), φ and φ', the cosformer phase x(i, j) and the row and gradient
  /// terms.
  AttentionMath &math;
  /// Values of the entry being built (see CPUKernelBuilder::prologue): the score
  /// scale, min(kv_len, Nk), causal (i1: the runtime flag, or true with a mask
  /// region).
  Value scale, kvEnd, isCausal;
};

/// Emits the forward body at `b`'s insertion point from the forward ABI's arguments.
void buildLinearForward(ImplicitLocOpBuilder &b, const LinearForm &form,
                        const cpu::ForwardArgs &args);

/// The backward body, from the backward ABI's arguments.
void buildLinearBackward(ImplicitLocOpBuilder &b, const LinearForm &form,
                         const cpu::BackwardArgs &args);

} // namespace mlir::attn

#endif
