//===- ThresholdAnalysis.h - checks of an implicit normalizer's g -*- C++ -*-===//
//
// An implicit normalizer (`denominator threshold c`) weights w_ij = g(s_ij − τ_i)
// with τ_i the root of Σ_j g(s_ij − τ_i) = c. The forward brackets τ_i in
// [max_j s_ij − x_c, max_j s_ij] with g(x_c) >= c and bisects; that is sound when
// g is 0 for x <= 0 (the key of the largest score has weight 0 at τ = max s),
// non-decreasing (Σ_j g is monotone in τ) and reaches c. These are checked where
// the numerator folds to a number at sample points (params at their initial
// values, indices 0): a numerator that reads tensor inputs, or ops without a
// folder, is taken as written.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_ANALYSIS_THRESHOLDANALYSIS_H
#define ATTN_LIB_ANALYSIS_THRESHOLDANALYSIS_H

#include "dialect/AttnOps.h"

namespace mlir::attn {

/// The checks above on `normalizer` (a threshold denominator); a diagnostic on
/// the numerator's yield naming the sample that breaks one.
LogicalResult verifyThresholdNumerator(NormalizerOp normalizer);

} // namespace mlir::attn

#endif
