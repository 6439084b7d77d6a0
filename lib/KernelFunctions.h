//===- KernelFunctions.h - a kernel's regions as scalar functions -*- C++ -*-===//
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
#ifndef ATTN_LIB_KERNELFUNCTIONS_H
#define ATTN_LIB_KERNELFUNCTIONS_H

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

/// The kernel's learnable params in ABI order: normalizer's, then score's.
SmallVector<StringRef> kernelParamNames(KernelOp kernel);
SmallVector<double> kernelParamInits(KernelOp kernel);

/// A learnable tensor of the score (attn.score weights(...)). The params vector
/// of the ABI holds the scalar params, then every weight flattened row-major.
struct KernelWeight {
  StringRef name;
  ArrayRef<int64_t> shape;
  int64_t offset; // of its first element in the params vector
  int64_t size;
  Attribute init; // FloatAttr fill value or StringAttr "identity"
};
SmallVector<KernelWeight> kernelWeights(KernelOp kernel);

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

/// Fails unless the kernel's score is one `lowering` (named in the diagnostic)
/// implements: a dot or scaled_dot contraction without learnable weights or row
/// inputs (the CPU lowering implements every score; the GPU one these).
LogicalResult checkContractSupported(KernelOp kernel, StringRef lowering);

/// The factor applied to the contraction: the score's scale, else 1 for every
/// contract but `scaled_dot`, whose default (std::nullopt) is 1/sqrt(head dim).
std::optional<double> fixedScoreScale(KernelOp kernel);

/// C_i (times e^-m for online normalizers) of a row from its running max `m`, its
/// Σ h `sum` and its unmasked-key `count`, all of m's float type.
Value buildRowDenominator(ImplicitLocOpBuilder &b, NormalizerOp normalizer, bool online,
                          Value m, Value sum, Value count);

/// The attn.kernel of `module` named `name`, or its only kernel when `name` is
/// empty; emits an error (listing the candidates) otherwise.
FailureOr<KernelOp> selectKernel(ModuleOp module, StringRef name);

/// The name of an element type in entry points and the manifest (f32, f64, f16, bf16).
std::string elementTypeName(Type type);

/// The float types a lowering pass's `element-types` option names (`defaults` when
/// it is empty), each one of `allowed` ("f16", "bf16", "f32", "f64"). Otherwise an
/// error on `module`: "unsupported <what> 'x'; expected a, b or c".
FailureOr<SmallVector<FloatType>> parseElementTypes(ModuleOp module,
                                                    ArrayRef<std::string> names,
                                                    ArrayRef<StringRef> defaults,
                                                    ArrayRef<StringRef> allowed,
                                                    StringRef what);

} // namespace mlir::attn

#endif
