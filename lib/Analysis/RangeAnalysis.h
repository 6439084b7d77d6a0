//===- RangeAnalysis.h - how large a region's values can get ------*- C++ -*-===//
//
// For every value of a single-block region: an interval [lo, hi] that holds it when
// the score, params and float table reads lie in [-1e4, 1e4] (the scale the
// compiler's overflow guarantee is stated for, DESIGN.md §2) and indices in
// [0, 2^31), evaluated in the region's float type: a bound past the type's largest
// finite number is ±inf. An infinite bound is marked `overflows` when finite values
// grew past that number (e^x, products, sums, powers) rather than a division by a
// value that can be 0, whose size is the user's (1/x at x = 0). Ops that tame an
// infinity keep a finite range (1/(1 + e^-x), tanh, e^-inf = 0). One pass over the
// ops in order, each value once: linear in the region. NaN (log of a negative, 0/0)
// is not tracked: it is NaN in float64 as well.
//
// attn-classify-normalizer refuses a plain numerator, denominator or offset whose
// result `overflows` (s^10 reaches 1e40 > f32's 3.4e38); online ones are checked with
// their stabilised exp factors e^(x - m) in [0, 1].
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_ANALYSIS_RANGEANALYSIS_H
#define ATTN_LIB_ANALYSIS_RANGEANALYSIS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Region.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::attn {

/// The magnitude the guarantee assumes for scores, params and float table reads.
constexpr double kGuaranteedScoreMagnitude = 1e4;

struct Range {
  double lo, hi;
  /// An infinite bound comes from finite values growing past the type's range.
  bool overflows = false;
  /// An infinite bound comes from a pole or the edge of the op's domain (1/0,
  /// log 0), whose size is the user's, not from growth.
  bool singular = false;
  static Range all() { return {-INFINITY, INFINITY, false}; }
  bool isFinite() const;
};

class RangeAnalysis {
public:
  /// `fixed`: ops whose result lies in [0, 1] whatever their operands (the online
  /// algorithm's stabilised exp factors e^(x - m)); `scoreRange`: the score's range
  /// where known tighter than ±1e4 (e.g. >= 0 from the kernel's score).
  RangeAnalysis(Region &region, const llvm::SmallPtrSetImpl<Operation *> &fixed, Range scoreRange);

  Range of(Value v) const;
  Range ofResult() const;
  /// The first op (in order) whose result overflows from finite operands, on the
  /// way to the result; null when the result does not overflow.
  Operation *overflowOrigin() const;

private:
  Range compute(Operation &op) const;
  llvm::DenseMap<Value, Range> ranges;
  Region &region;
  double largest; // the region's float type's largest finite value
};

} // namespace mlir::attn

#endif
