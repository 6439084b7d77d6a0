//===- StableForms.h - exponentials in the forms the classifier reads -*- C++ -*-===//
//
// attn-classify-normalizer first rewrites a normalizer's regions so that every op
// that grows exponentially is a math.exp whose argument the online algorithm can
// shift, and the forms people write for bounded functions are the bounded ones:
//
//   exp2(x)              e^(x·ln 2)
//   powf(c, x), c > 0    e^(x·ln c)          (a constant base)
//   powf(a, x)           e^(x·log a)         (a variable exponent; NaN where a < 0,
//                                             as powf itself for non-integer x)
//   powf(e^x, c)         e^(c·x)
//   expm1(x)             e^x − 1             (kept where x <= 0: bounded, and exact
//                                             near 0)
//   sinh(x), cosh(x)     (e^x ∓ e^-x)·0.5
//   log(e^x)             x
//   log1p(e^x), log(1 + e^x), log(c + e^x)
//                        max(y, 0) + log1p(e^-|y|) (+ log c), y = x − log c
//                                            (softplus, bounded)
//   e^a · e^b            e^(a + b)           (neither a nor b <= 0)
//   c ± e^x (c ≠ 0 constant, beside an exp factor in a sum, max, min or select)
//                        ±e^(log|c|)         (one more exp factor: Softpick's e^s − 1)
//
// fpowi/ipowi with a variable exponent and powf of a constant base <= 0 are
// errors naming the form to write. Each rule applied is recorded on the normalizer
// (`rewrites`, in ASCII), which --attn-explain prints. Rewriting is idempotent.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_TRANSFORMS_STABLEFORMS_H
#define ATTN_LIB_TRANSFORMS_STABLEFORMS_H

#include "dialect/AttnOps.h"

namespace mlir::attn {

/// Rewrites every region of `normalizer` (which must be expanded) as above and
/// records the rules applied in its `rewrites`; fails with a diagnostic on an
/// exponential op it cannot rewrite.
LogicalResult rewriteToStableForms(NormalizerOp normalizer);

} // namespace mlir::attn

#endif
