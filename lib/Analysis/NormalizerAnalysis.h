//===- NormalizerAnalysis.h - choose the forward algorithm -------*- C++ -*-===//
//
// Classifies a normalizer into DESIGN.md's forward algorithms by the exp-degree of
// its regions. Every value gets a degree:
//   0      no exp factor (constants, s, params, polynomials, tanh/sigmoid-like
//          bounded forms, including a / (c + exp(x)) with c > 0)
//   1      exactly one exp factor per additive term (e^s, e^s - e^-s, e^σ(s)·t(s))
//   mixed  anything else (e^s + 1, e^(e^s), log(e^s), e^s · e^s, comparisons of e^s)
//   bounded e^x with x provably <= 0 (e^-|s|, e^-(s·s), e^min(s, 0)): in (0, 1] at any
//          scale, so degree 0 inside other functions (softplus written
//          max(s, 0) + log1p(e^-|s|)) and degree 1 next to exp factors or alone
// A rejected form gets a note with its stable rewrite where one is known
// (log(1 + e^s) -> softplus above, log(e^s) -> s, e^a·e^b -> e^(a+b), ...).
// Online (flash-style, stabilised) needs numerator and summed denominator both of
// degree 1; every degree-1 exp factor then becomes exp(x - m) with m the running
// maximum of those arguments, and all of g·e^-m, h·e^-m stay in range.
// Plain accumulation takes numerators without exp factors, and any numerator over
// a constant or count denominator (nothing could rescale C there).
// A row offset region β (C_i = β + Σ_j h) follows its normalizer: online, β is one
// exp factor e^x (x joins the running max) or a positive constant c = e^(log c);
// plain, β has no exp factor.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_ANALYSIS_NORMALIZERANALYSIS_H
#define ATTN_LIB_ANALYSIS_NORMALIZERANALYSIS_H

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::attn {

/// e^x · c / (k + e^u) with constants c, k > 0 (e.g. e^s·sigmoid(s)). Its size is
/// e^(x + ln c - log(k + e^u)), not e^x: the bounded factor can underflow to 0 on
/// its own, so the online algorithm stabilises the product as one exponential.
struct StabilisedProduct {
  Operation *exp;        // e^x
  arith::DivFOp bounded; // c / (k + e^u)
};

struct NormalizerClass {
  Algorithm algorithm;
  /// The math.exp ops (in the numerator and denominator regions) whose arguments
  /// the online algorithm shifts by the running maximum.
  llvm::SmallPtrSet<Operation *, 8> stabilisedExps;
  /// Products (arith.mulf ops) stabilised as a whole, see StabilisedProduct.
  llvm::DenseMap<Operation *, StabilisedProduct> stabilisedProducts;
  /// Online with an offset region that yields a positive constant c: c (its
  /// exponent log c joins the running max).
  std::optional<double> offsetConstant;
};

/// Classifies `normalizer`; on failure emits a diagnostic on the op that breaks
/// both algorithms.
FailureOr<NormalizerClass> classifyNormalizer(NormalizerOp normalizer);

/// The checks that need the kernel's score as well as its normalizer, by the
/// signs s can take (lib/Analysis/SignAnalysis.h): a summed denominator
/// C_i = β + Σ_j h cannot be 0 (h > 0, or h >= 0 with `epsilon` or an offset > 0;
/// else an error naming the fix, unless the normalizer says
/// `assume_nonzero_denominator`), and no region can exceed its float type where
/// |s| <= 1e4 (lib/Analysis/RangeAnalysis.h): s^10 reaches 1e40, e^s over a
/// constant or count overflows (e^s with a score mod <= 0 is bounded).
LogicalResult verifyRowNumerics(KernelOp kernel);

/// The nonzero constants of `region` that join its exp factors in sums, maxima,
/// minima and selects on their way to the result (Softpick's e^s − 1): each is
/// ±e^(log|c|), one more exp factor, which rewriteToStableForms writes out so
/// that the online algorithm shifts it like the others.
SmallVector<OpOperand *> constantsJoiningExpFactors(Region &region);

/// The algorithm attn-classify-normalizer recorded on `kernel`; a diagnostic
/// asking for that pass when it has not run (every later pass reads the
/// classifier's decision from here rather than recomputing it).
FailureOr<Algorithm> requireAlgorithm(KernelOp kernel);

} // namespace mlir::attn

#endif
