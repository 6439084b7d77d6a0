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
//   <k>.num(s, m, b, h, i, j, θ...)  numerator g; online: every stabilised e^x
//                            is e^(x-m); b, h, i, j the batch, head, query and
//                            key indices (index), constants of the pair
//   <k>.den(s, m, b, h, i, j, θ...)  summed denominator h, likewise (sum
//                            denominators only)
//   <k>.stab(s, b, h, i, j, θ...)    online only: the max of the stabilised exp
//                            arguments
//   <k>.offset(m, b, h, i, θ...)     the row offset β of an offset region, at the
//                            shift m online (β·e^-m; a constant c as c·e^-m)
//   <k>.offset.stab(b, h, i, θ...)   online only: β's exponent (log c for a constant)
//   <k>.score(r, b, h, i, j, θ...)  the score mod (only with a mod region)
//   <k>.feature(x)           the feature map (only with a feature region)
//   <k>.mask(b, h, i, j, θ...) -> i1  (only with a mask; the params unused)
//   <k>.phase(i, j)          kernelised cosformer mods only: x(i, j) of the mod's
//                            s·cos(x(i, j)) (see KernelisedAnalysis.h); no params
//   <f>.d.<arg>              d<f>/d<arg>, for arg s (num, den, score), x (feature)
//                            and each param the function depends on
//   <f>.d.<input>.<k>        d<f>/d(the value its k-th read of learnable input
//                            <input> reads) (num, den, offset, score)
//   <f>.at.<input>.<k>       the row-major position that read reads, clamped
//
// Every function but feature and phase takes, after the params, one memref per
// tensor input of the kernel (kernelInputs, the ABI order; tableType): an
// attn.read in a region becomes an attn.table_load of it.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_TRANSFORMS_SCALARFUNCTIONS_H
#define ATTN_LIB_TRANSFORMS_SCALARFUNCTIONS_H

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace mlir::attn {

/// How large a kernel's scalar functions may be (attn-derive-backward's options).
struct FunctionSizeLimits {
  /// Functions of more ops are marked no_inline: the loops call them.
  int64_t inlineOps;
  /// The most ops all functions and derivatives of a kernel may hold together.
  int64_t totalOps;
  /// The most ops one region of the kernel may hold.
  int64_t regionOps;
};

/// Refuses, with a diagnostic, a kernel too large to compile in reasonable time,
/// before any analysis reads it: a region of more than `limits.regionOps` ops, or
/// regions that outlineKernelFunctions would turn into more than `limits.totalOps`
/// ops in all. Every derivative clones its function's whole body, so the region
/// sizes times the number of functions made from each (the function, its
/// derivatives by s and by each param, one per read of a learnable input) is a
/// lower bound of that total: what this refuses, derivation would refuse too.
/// Linear in the size of the regions.
LogicalResult checkKernelSize(KernelOp kernel, const FunctionSizeLimits &limits);

/// Emits the scalar functions and derivatives of `kernel` into its module and
/// records them on the kernel as its `functions` (one #attn.functions at the
/// kernel's float type). The kernel must be classified: online normalizers are
/// emitted stabilised (every exp factor e^x as e^(x - m)). Marks functions past
/// `limits.inlineOps` no_inline; fails past `limits.totalOps` in all.
LogicalResult outlineKernelFunctions(KernelOp kernel, const FunctionSizeLimits &limits);

/// Copies the scalar function `function` as `name`, computing in `type` instead
/// of its float type and, when `vectorWidth` is nonzero, on vector<vectorWidth x _>
/// of every scalar type (index and i1 included): the elementwise form the tiled
/// kernels call on a row of scores. Constants are converted (splat for vectors).
FailureOr<func::FuncOp> cloneRetyped(func::FuncOp function, FloatType type, int64_t vectorWidth,
                                     StringRef name);

/// Adds to the kernel's `functions` the instance at `type` and `lanes` (0:
/// scalars), copied from its own (cloneRetyped), unless it has one already.
LogicalResult instantiateKernelFunctions(KernelOp kernel, FloatType type, int64_t lanes);

/// The memref type tensor input `input` has in the functions at `floatType`:
/// its rank, dynamic extents and strides; a float input's elements have
/// `floatType`.
MemRefType tableType(InputOp input, FloatType floatType);

/// One read of a learnable tensor input (#attn.table_grad), resolved.
struct TableGradSite {
  TableGradRole role;
  unsigned input; // in the kernel's input order
  func::FuncOp derivative, position;
};

/// The scalar functions of one kernel at one float type and shape (null where
/// the kernel has no such function), as the CPU and GPU lowerings call them.
struct ScalarFunctions {
  func::FuncOp numerator, denominator, stabilizer, score, feature, mask;
  func::FuncOp offset, offsetStab; // a row offset region (offsetStab online only)
  func::FuncOp phase; // kernelised cosformer mods only
  func::FuncOp numeratorDs, denominatorDs, scoreDs, featureDx;
  SmallVector<func::FuncOp> numeratorDp, denominatorDp; // per normalizer param
  SmallVector<func::FuncOp> offsetDp;                   // per normalizer param, with an offset
  SmallVector<func::FuncOp> scoreDp;                    // per score param
  SmallVector<TableGradSite> tableGrads;                // per read of a learnable input
};

/// The kernel's functions at `type` and `lanes`, resolved from its `functions`.
/// Fails with a diagnostic naming the pass that has not run: attn-derive-backward
/// (no functions) or attn-instantiate-functions (no such instance).
FailureOr<ScalarFunctions> lookupScalarFunctions(KernelOp kernel, FloatType type,
                                                 int64_t lanes = 0);

} // namespace mlir::attn

#endif
