//===- ScalarFunctions.h - a kernel's regions as scalar functions -*- C++ -*-===//
//
// attn-derive-backward turns the regions a kernel uses into private scalar
// func.func ops, plus their derivatives; the loop lowering calls them and the
// inliner folds them into the loops. All of them take the kernel's params
// (normalizer params, then score params) as trailing arguments:
//
//   <k>.num(s, m, θ...)      numerator g; online: every stabilised e^x is e^(x-m)
//   <k>.den(s, m, θ...)      summed denominator h, likewise (sum denominators only)
//   <k>.stab(s, θ...)        online only: the max of the stabilised exp arguments
//   <k>.score(r, i, j, ρ..., θ...) the score mod (only with a mod region); ρ are
//                            the row inputs' values at query i
//   <k>.feature(x)           the feature map (only with a feature region)
//   <k>.mask(i, j) -> i1     (only with a mask)
//   <k>.phase(i, j)          kernelised cosformer mods only: x(i, j) of the mod's
//                            s·cos(x(i, j)) (see KernelisedAnalysis.h); no params
//   <f>.d.<arg>              d<f>/d<arg>, for arg s (num, den, score), x (feature),
//                            row.<name> (score, per row input) and each param
//                            the function depends on
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_TRANSFORMS_SCALARFUNCTIONS_H
#define ATTN_LIB_TRANSFORMS_SCALARFUNCTIONS_H

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <optional>

namespace mlir::attn {

/// Symbol names of the functions derived from one kernel.
struct KernelFunctionNames {
  explicit KernelFunctionNames(KernelOp kernel) : prefix(kernel.getSymName().str()) {}
  std::string numerator() const { return prefix + ".num"; }
  std::string denominator() const { return prefix + ".den"; }
  std::string stabilizer() const { return prefix + ".stab"; }
  std::string score() const { return prefix + ".score"; }
  std::string feature() const { return prefix + ".feature"; }
  std::string mask() const { return prefix + ".mask"; }
  std::string phase() const { return prefix + ".phase"; }
  static std::string derivative(StringRef function, StringRef arg) {
    return (function + ".d." + arg).str();
  }
  std::string prefix;
};

/// The derivative suffix of the score function by row input `index`.
std::string rowInputDerivativeName(ScoreOp score, unsigned index);

/// Emits the scalar functions and derivatives of `kernel` into its module.
LogicalResult outlineKernelFunctions(KernelOp kernel);

/// Copies the scalar function `function` as `name`, computing in `type` instead
/// of its float type and, when `vectorWidth` is nonzero, on vector<vectorWidth x _>
/// of every scalar type (index and i1 included): the elementwise form the tiled
/// kernels call on a row of scores. Constants are converted (splat for vectors).
FailureOr<func::FuncOp> cloneRetyped(func::FuncOp function, FloatType type,
                                     int64_t vectorWidth, StringRef name);

/// The scalar functions of one kernel at one float type (null where the kernel
/// has no such function), as the CPU and GPU lowerings call them.
struct ScalarFunctions {
  func::FuncOp numerator, denominator, stabilizer, score, feature, mask;
  func::FuncOp phase; // kernelised cosformer mods only
  func::FuncOp numeratorDs, denominatorDs, scoreDs, featureDx;
  SmallVector<func::FuncOp> scoreDr;                     // per row input
  SmallVector<func::FuncOp> numeratorDp, denominatorDp; // per normalizer param
  SmallVector<func::FuncOp> scoreDp;                     // per score param
  bool online() const { return static_cast<bool>(stabilizer); }
};

/// The functions outlineKernelFunctions emitted for `kernel`, retyped to `type`
/// (as `<name>.<type>` next to the original) when the kernel computes in another
/// float type. Fails with a diagnostic when attn-derive-backward has not run.
FailureOr<ScalarFunctions> lookupScalarFunctions(KernelOp kernel, FloatType type);

/// C_i (times e^-m for online normalizers) of a row from its running max `m`, its
/// Σ h `sum` and its unmasked-key `count`, all of m's float type.
Value buildRowDenominator(ImplicitLocOpBuilder &b, NormalizerOp normalizer, bool online,
                          Value m, Value sum, Value count);

} // namespace mlir::attn

#endif
