//===- ScalarFunctions.h - a kernel's regions as scalar functions -*- C++ -*-===//
//
// attn-derive-backward turns the regions a kernel uses into private scalar
// func.func ops, plus their derivatives, and records them on the kernel as an
// #attn.functions (role -> symbol); attn-instantiate-functions adds copies at
// other float types and on vectors. The lowerings read that attribute (never a
// symbol name), call the functions and the inliner folds them into the loops.
// All of them take the kernel's params (normalizer params, then score params)
// as trailing arguments; their names are only for readers:
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

#include <optional>

namespace mlir::attn {

/// Emits the scalar functions and derivatives of `kernel` into its module and
/// records them on the kernel as its `functions` (one #attn.functions at the
/// kernel's float type). The kernel must be classified: online normalizers are
/// emitted stabilised (every exp factor e^x as e^(x - m)).
LogicalResult outlineKernelFunctions(KernelOp kernel);

/// Copies the scalar function `function` as `name`, computing in `type` instead
/// of its float type and, when `vectorWidth` is nonzero, on vector<vectorWidth x _>
/// of every scalar type (index and i1 included): the elementwise form the tiled
/// kernels call on a row of scores. Constants are converted (splat for vectors).
FailureOr<func::FuncOp> cloneRetyped(func::FuncOp function, FloatType type, int64_t vectorWidth,
                                     StringRef name);

/// Adds to the kernel's `functions` the instance at `type` and `lanes` (0:
/// scalars), copied from its own (cloneRetyped), unless it has one already.
LogicalResult instantiateKernelFunctions(KernelOp kernel, FloatType type, int64_t lanes);

/// The scalar functions of one kernel at one float type and shape (null where
/// the kernel has no such function), as the CPU and GPU lowerings call them.
struct ScalarFunctions {
  func::FuncOp numerator, denominator, stabilizer, score, feature, mask;
  func::FuncOp phase; // kernelised cosformer mods only
  func::FuncOp numeratorDs, denominatorDs, scoreDs, featureDx;
  SmallVector<func::FuncOp> scoreDr;                    // per row input
  SmallVector<func::FuncOp> numeratorDp, denominatorDp; // per normalizer param
  SmallVector<func::FuncOp> scoreDp;                    // per score param
};

/// The kernel's functions at `type` and `lanes`, resolved from its `functions`.
/// Fails with a diagnostic naming the pass that has not run: attn-derive-backward
/// (no functions) or attn-instantiate-functions (no such instance).
FailureOr<ScalarFunctions> lookupScalarFunctions(KernelOp kernel, FloatType type,
                                                 int64_t lanes = 0);

} // namespace mlir::attn

#endif
