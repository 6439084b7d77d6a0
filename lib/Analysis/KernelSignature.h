//===- KernelSignature.h - what a kernel exposes at the ABI -------*- C++ -*-===//
//
// The kernel's learnable params, weights and tensor inputs in ABI order, its score scale and
// the names element types take in entry points and the manifest. Every lowering
// and the manifest writer read these from here.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_ANALYSIS_KERNELSIGNATURE_H
#define ATTN_LIB_ANALYSIS_KERNELSIGNATURE_H

#include "dialect/AttnOps.h"

#include <optional>
#include <string>

namespace mlir::attn {

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

/// The tensor inputs of the kernel in ABI order: the attn.input ops its
/// normalizer, score and mask read, in the order the module declares them.
SmallVector<InputOp> kernelInputs(KernelOp kernel);

/// ε of the cosine contraction's norms |x|_ε = sqrt(x·x + ε²), on every backend: a
/// zero row gets cos = 0 and finite gradients instead of 0/0.
constexpr double kCosineEpsilon = 1e-6;

/// The factor applied to the contraction: the score's scale, else 1 for every
/// contract but `scaled_dot`, whose default (std::nullopt) is 1/sqrt(head dim).
std::optional<double> fixedScoreScale(KernelOp kernel);

/// The name of an element type in entry points and the manifest (f32, f64, f16, bf16).
std::string elementTypeName(Type type);

} // namespace mlir::attn

#endif
