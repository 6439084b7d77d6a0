//===- RowEquations.h - the row algorithm's equations, once -------*- C++ -*-===//
//
// The equations of the row algorithm (DESIGN.md §2, docs/row-algorithm.md), written
// once over a small value algebra `Ops` that each target instantiates:
//
//   RowAlgorithm (RowAlgorithm.h)   Ops = RowAlgorithm's MLIR builder: mlir::Value,
//                                   AttentionMath's sums (Kahan below f64) and
//                                   fast-math flags; every CPU schedule
//   the Triton templates            Ops = Python expressions (TritonEmitter.cpp);
//   (lib/Codegen/Triton)            e^x as tl.exp2 with log2 e folded in
//
// Schedules supply the loops, the memory and the reductions across lanes, threads or
// ranks (a tile's reduced candidates and sums come in as values); what a row carries
// and how it starts, folds, combines, ends and prepares its backward is here:
//
//   state       (m, l, count)   m the running max (online; plain: 0, kept),
//                               l = Σ h·e^-m, count the keys folded in
//   start       m = x_β (RowMaxStart: the row offset's exponent), l = count = 0
//   advance     m' = max(m, candidate),  α = e^(m − m'), and α = 1 while m' = −∞:
//               a row without a key so far keeps its shift at −∞ and its sums at 0
//               (one rule for every schedule, CPU and GPU)
//   fold tile   l' = α·l + Σh,  count' = count + kept;  O' = α·O + Σ g·v
//   combine     m' = max(m_a, m_b),  α_a, α_b the factors from m_a, m_b to m',
//               l' = α_a·l_a + α_b·l_b,  count' = count_a + count_b;  O' likewise
//   finalize    C = l + β·e^-m | c | count,  O·coefficient/C (0 for a row without
//               keys),  row_max = m (0 plain),  row_sum = C, both 0 without keys
//   backward    live = row_sum ≠ 0 (and what the schedule adds),  1/C (0 where dead)
//
// A scan (stick-breaking, docs/normalizer-classes.md) carries another state, its keys
// walked from the last to the first:
//
//   state       S, the log-survival Σ d(s_k) of the kept keys folded so far
//   start       S = 0
//   fold pair   w = g(s)·e^S,  S' = S + d(s);  O' = O + w·v   (a masked pair: nothing)
//   combine     a near chunk (larger keys) and a far one: S = S_near + S_far,
//               O = O_near + e^(S_near)·O_far
//   finish      r = e^S (the left-over weight); row_max = S, row_sum = C = 1
//   backward    (S, B), B = Σ_{j >= k} w·dP: B' = B + w·dP, the pair's gradient at
//               C = 1 with dP·e^S for dP and B' − D for D
//
// An implicit normalizer (sparsemax, α-entmax; docs/normalizer-classes.md) solves a
// threshold τ_i per row, the root of F(τ) = Σ_j g(s_ij − τ) − c (decreasing in τ),
// with the row's max score m_i; the schedule supplies the sums over the row's keys at
// each trial τ (a key above τ adds its g and g', thresholdKeyTerms):
//
//   bracket     x_c doubled from 1 until F(m_i − x_c) >= 0: the root lies in
//               [m_i − x_c, m_i] (a row whose doublings all fail gets τ = NaN)
//   state       (lo, hi) with F(lo) >= 0 > F(hi), Σ g and Σ g' at lo, whether the
//               last step moved hi, whether it converged
//   step        τ = lo + F(lo)/F'(lo) inside (lo, hi) unless the last step moved hi,
//               else (lo + hi)/2; lo = τ where F(τ) >= 0, else hi = τ; converged
//               where τ left (lo, hi) or F(τ) = 0; a step after convergence keeps it
//   finish      τ_i = lo (row_max)
//   backward    r_i = Σ g'·dP / Σ g' over the keys above τ_i (0 without a slope);
//               each pair's gradient at C = 1 with dP − r_i for dP
//
// Ops provides: the types Value (null-testable; null = absent), Sum (a running sum)
// and Row (where a row sits); constantLike, rowConstant (a row's value broadcast to
// the state's shape), emptySum, noKeys; maximum, exp, negate, add, sub, mul, addCount;
// divide; compare (Equal, NotEqual, Greater, GreaterEqual, Less), select, both
// (logical and), either (or), negateFlag, rowFlag (a row's constant flag); quotientWhere
// (x/y where a condition holds, else 0); accumulate (α·acc + term in the target's
// running-sum arithmetic); offsetStabilizer and offsetRegion (the row offset's
// exponent and β·e^-m, a null Value without an offset region); name (binds an
// intermediate value, so a text target prints it once).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_CODEGEN_ROWEQUATIONS_H
#define ATTN_LIB_CODEGEN_ROWEQUATIONS_H

#include "dialect/AttnOps.h"

#include <cstdint>
#include <limits>
#include <utility>

namespace mlir::attn {

/// Where a row's running max starts (online): the row offset's exponent, from the
/// offset region's stabiliser, or a constant: log ε for an ε offset (ε = e^(log ε)),
/// −∞ without an offset.
struct RowMaxStart {
  bool fromOffsetStabilizer;
  double constant; // when not fromOffsetStabilizer
  static RowMaxStart of(NormalizerOp normalizer, bool hasOffsetStabilizer);
};

/// The new running max and the factor α the row's sums so far take.
template <typename V> struct RescaleOf {
  V max, alpha;
};

/// A row's state by name. Plain rows keep max at 0; `sum` is the target's running sum.
template <typename V, typename Sum> struct RowStateOf {
  V max;
  Sum sum;
  V count;
};

/// The end of a row: the factor its accumulated output is multiplied by
/// (coefficient/C, 0 for a row without keys), and its m, C and whether it has a key.
template <typename V> struct RowResultOf {
  V outputScale;
  V max, denominator, anyKey;
};

/// The values of one query row the backward pass reads: its shift m (row_max),
/// 1/C (0 for a row without keys: it contributes nothing) and D = dO·O.
template <typename V> struct BackwardRowOf {
  V shift, inverseC, delta;
  V live; // C != 0 (and whatever the schedule added)
};

enum class RowComparison { Equal, NotEqual, Greater, GreaterEqual, Less };

/// A scan's row: S, the log-survival of the kept keys folded in (the keys after the
/// next one). A sum of logs, never a product of survivals: it stays exact where the
/// product would underflow.
template <typename V> struct ScanStateOf {
  V logSurvival;
};
/// One kept pair of a scan: its survival e^S, its weight w = g·e^S and the state after.
template <typename V> struct ScanStepOf {
  V survival, weight;
  ScanStateOf<V> next;
};
/// Two chunks of a scan's keys combined, and the factor e^(S_nearer) the farther
/// chunk's output takes.
template <typename V> struct ScanCombinedOf {
  ScanStateOf<V> state;
  V fartherFactor;
};
/// A scan's backward row: the forward's S and the suffix B = Σ_{j >= k} w·dP.
template <typename V> struct ScanBackwardStateOf {
  ScanStateOf<V> scan;
  V suffix;
};
/// After a pair: the next backward state, and the dP and D its pair gradient takes
/// (at C = 1: dP·e^S and B' − D).
template <typename V> struct ScanBackwardStepOf {
  ScanBackwardStateOf<V> next;
  V scaledDP, suffixDelta;
};

/// Σ_j g(s_ij − τ) and Σ_j g'(s_ij − τ) at one τ (slopes null where not asked for),
/// or one key's terms of them.
template <typename V> struct ThresholdSumsOf {
  V weights, slopes;
};
/// The search for the bracket's width x_c, and whether it reached c.
template <typename V> struct ThresholdBracketOf {
  V width, found;
};
/// The iteration of τ_i: the bracket (lo, hi), the sums at lo, whether the last step
/// moved hi, whether it converged.
template <typename V> struct ThresholdStateOf {
  V lo, hi;
  ThresholdSumsOf<V> atLo;
  V hiMoved, converged;
};
/// The backward's row sums over the keys above τ_i: Σ g'·dP and Σ g'.
template <typename V> struct ThresholdGradientSumsOf {
  V slopeDP, slopes;
};

/// Doublings of x_c from 1 before a row's bracket is given up (τ_i = NaN, and the
/// row's outputs with it): ThresholdAnalysis refuses a g that never reaches c at its
/// initial params.
inline constexpr int64_t thresholdBracketDoublings = 64;
/// Newton steps of τ_i: as many as reach the float's resolution by the midpoints
/// alone, 2·(mantissa bits + 2).
constexpr int64_t thresholdSteps(int64_t mantissaBits) { return 2 * (mantissaBits + 2); }

template <typename Ops> class RowEquations {
public:
  using Value = typename Ops::Value;
  using Sum = typename Ops::Sum;
  using Row = typename Ops::Row;
  using State = RowStateOf<Value, Sum>;
  using Rescale = RescaleOf<Value>;
  using RowResult = RowResultOf<Value>;
  using BackwardRow = BackwardRowOf<Value>;
  using ScanState = ScanStateOf<Value>;
  using ScanStep = ScanStepOf<Value>;
  using ScanCombined = ScanCombinedOf<Value>;
  using ScanBackwardState = ScanBackwardStateOf<Value>;
  using ScanBackwardStep = ScanBackwardStepOf<Value>;
  using ThresholdSums = ThresholdSumsOf<Value>;
  using ThresholdBracket = ThresholdBracketOf<Value>;
  using ThresholdState = ThresholdStateOf<Value>;
  using ThresholdGradientSums = ThresholdGradientSumsOf<Value>;
  /// Two partial states combined and the factors their outputs take (null plain).
  struct Combined {
    State state;
    Value alpha, partAlpha;
  };

  RowEquations(Ops ops, NormalizerOp normalizer, bool online)
      : ops(std::move(ops)), normalizer(normalizer), online(online) {}

  // --- the state ----------------------------------------------------------------
  /// Where an online row's max starts: the row offset's exponent (RowMaxStart).
  Value initialMax(const Row &row) {
    RowMaxStart start = RowMaxStart::of(normalizer, ops.hasOffsetStabilizer());
    if (start.fromOffsetStabilizer)
      return ops.offsetStabilizer(row);
    return ops.rowConstant(start.constant);
  }
  /// The state before the row's first key.
  State initial(const Row &row) {
    Value zero = ops.rowConstant(0.0);
    return {online ? initialMax(row) : zero, ops.emptySum(), ops.noKeys()};
  }
  /// A partial state before its chunk's first key; the row offset's exponent joins
  /// its max when the chunks combine (combine is exact for any start).
  State noKeyState() {
    return {online ? ops.rowConstant(-std::numeric_limits<double>::infinity())
                   : ops.rowConstant(0.0),
            ops.emptySum(), ops.noKeys()};
  }

  // --- folding keys --------------------------------------------------------------
  /// e^(m − next), 1 where next = −∞ (`mayBeEmpty`: a row with no key so far).
  Value rescaleFactor(Value m, Value next, bool mayBeEmpty) {
    if (!mayBeEmpty)
      return ops.exp(ops.sub(m, next));
    Value noKey = ops.constantLike(next, -std::numeric_limits<double>::infinity());
    Value stillEmpty = ops.compare(RowComparison::Equal, next, noKey);
    Value alpha = ops.exp(ops.sub(m, next));
    return ops.select(stillEmpty, ops.constantLike(next, 1.0), alpha);
  }
  /// The running maxima advanced by (reduced) candidates, and α.
  Rescale advanceMax(Value m, Value candidate, bool mayBeEmpty) {
    Value next = ops.name("m_new", ops.maximum(m, candidate));
    return {next, ops.name("alpha", rescaleFactor(m, next, mayBeEmpty))};
  }
  /// α·x, x where α is null (plain).
  Value rescaled(Value x, Value alpha) { return alpha ? ops.mul(x, alpha) : x; }
  /// α·acc + term (term null: nothing to add): l, and O as a key block joins it.
  Sum foldOutput(Sum acc, Value alpha, Value term) { return ops.accumulate(acc, alpha, term); }
  /// The state after keys whose max was advanced to newMax with factor α, whose h sum
  /// to hSum (null without a summed denominator) and of which `kept` were kept.
  State foldTile(const State &state, Value newMax, Value alpha, Value hSum, Value kept) {
    Sum sum = ops.accumulate(state.sum, alpha, hSum);
    return {online ? newMax : state.max, sum, ops.addCount(state.count, kept)};
  }
  /// The product of two rescale factors (a rescale deferred across tiles).
  Value composeRescales(Value alpha, Value next) { return ops.mul(alpha, next); }

  // --- combining partial states ---------------------------------------------------
  /// Two partial states of one row over disjoint keys (the part's sum uncompensated).
  Combined combine(const State &running, const State &part, Value partSum) {
    Combined combined;
    Value max = running.max;
    if (online) {
      // Both maxima are −∞ while neither part has kept a key: the factors are then 1.
      Rescale step = advanceMax(running.max, part.max, /*mayBeEmpty=*/true);
      max = step.max;
      combined.alpha = step.alpha;
      combined.partAlpha = ops.name("alpha_part", rescaleFactor(part.max, max, true));
    }
    combined.state = {max, ops.accumulate(running.sum, combined.alpha,
                                          rescaled(partSum, combined.partAlpha)),
                      ops.addCount(running.count, part.count)};
    return combined;
  }
  /// α_a·O_a + α_b·O_b.
  Value combineOutput(const Combined &combined, Value output, Value partOutput) {
    Value running = rescaled(output, combined.alpha);
    return ops.add(running, rescaled(partOutput, combined.partAlpha));
  }

  // --- the end of a row -------------------------------------------------------------
  /// C (times e^-m online) from the state's m, l and count (a float).
  Value rowDenominator(const State &state, Value l, const Row &row) {
    switch (normalizer.getDenominatorKind()) {
    case DenominatorKind::Sum:
      if (Value offset = rowOffset(state.max, l, row)) // C·e^-m = β·e^-m + Σ h·e^-m
        return ops.add(l, offset);
      return l;
    case DenominatorKind::Constant:
      return ops.constantLike(l, normalizer.getDenominatorConstant()->convertToDouble());
    case DenominatorKind::Count:
      return state.count;
    case DenominatorKind::LogSurvival:
      llvm_unreachable("a scan's rows have no denominator (ScanLoops.cpp)");
    case DenominatorKind::Threshold:
      break; // ThresholdLoops.cpp normalises by τ_i, not by a C_i
    }
    llvm_unreachable("no C_i for this denominator kind");
  }
  /// `l` is the state's sum as a value (its error term left out).
  RowResult finalize(const State &state, Value l, const Row &row,
                     Value numeratorCoefficient = {}) {
    Value zero = ops.constantLike(l, 0.0);
    RowResult result;
    result.max = state.max;
    result.denominator = ops.name("c", rowDenominator(state, l, row));
    result.anyKey = ops.name("any_key", ops.compare(RowComparison::Greater, state.count, zero));
    Value coefficient = numeratorCoefficient ? numeratorCoefficient : ops.constantLike(l, 1.0);
    result.outputScale = ops.name(
        "out_scale", ops.quotientWhere(result.anyKey, coefficient, result.denominator));
    return result;
  }
  /// The row statistics the ABI stores: row_max (m online, 0 plain) and row_sum (C),
  /// both 0 for a row without keys.
  Value rowMax(const RowResult &result) {
    Value zero = ops.constantLike(result.denominator, 0.0);
    return online ? ops.select(result.anyKey, result.max, zero) : zero;
  }
  Value rowSum(const RowResult &result) {
    return ops.select(result.anyKey, result.denominator,
                      ops.constantLike(result.denominator, 0.0));
  }

  // --- the backward's rows -------------------------------------------------------------
  /// Whether a row with this row_sum contributes (C ≠ 0).
  Value rowLive(Value rowSum) {
    return ops.compare(RowComparison::NotEqual, rowSum, ops.constantLike(rowSum, 0.0));
  }
  /// From row_max, row_sum and D = dO·O; `alsoLive` marks further rows that
  /// contribute nothing (padding rows of a tile).
  BackwardRow prepareBackward(Value rowMax, Value rowSum, Value delta, Value alsoLive = {}) {
    Value live = rowLive(rowSum);
    if (alsoLive)
      live = ops.both(alsoLive, live);
    live = ops.name("live", live);
    Value inverse =
        ops.name("inv_c", ops.quotientWhere(live, ops.constantLike(rowSum, 1.0), rowSum));
    return {rowMax, inverse, delta, live};
  }

  // --- a scan's row (keys from the last to the first) ---------------------------------
  /// S = 0: no key folded in.
  ScanState scanInitial() { return {ops.rowConstant(0.0)}; }
  /// One kept pair of numerator g = g(s) and log-survival d = d(s) (at shift 0).
  ScanStep scanPair(const ScanState &state, Value g, Value d) {
    Value survival = ops.name("survival", ops.exp(state.logSurvival));
    return {survival, ops.name("w", ops.mul(g, survival)), {ops.add(state.logSurvival, d)}};
  }
  /// Two chunks of one row's keys, `nearer` of the larger keys.
  ScanCombined scanCombine(const ScanState &farther, const ScanState &nearer) {
    return {{ops.add(nearer.logSurvival, farther.logSurvival)},
            ops.name("farther_factor", ops.exp(nearer.logSurvival))};
  }
  /// O_nearer + e^(S_nearer)·O_farther.
  Value scanCombineOutput(const ScanCombined &combined, Value fartherOutput, Value nearerOutput) {
    return ops.add(nearerOutput, ops.mul(combined.fartherFactor, fartherOutput));
  }
  /// r = e^S, the left-over weight of a finished row.
  Value scanLeftOver(const ScanState &state) { return ops.exp(state.logSurvival); }

  // --- a scan's backward row (keys last to first, as its forward) --------------------
  /// S = 0, B = 0.
  ScanBackwardState scanBackwardInitial() {
    return {scanInitial(), ops.rowConstant(0.0)};
  }
  /// After scanPair's `step` and the pair's dP = dO_i·v_j, with D = dO_i·O_i.
  ScanBackwardStep scanBackwardFold(const ScanBackwardState &state, const ScanStep &step,
                                    Value dP, Value delta) {
    Value suffix = ops.add(state.suffix, ops.mul(step.weight, dP));
    return {{step.next, suffix}, ops.mul(dP, step.survival), ops.sub(suffix, delta)};
  }

  // --- an implicit normalizer's row (sparsemax, α-entmax) --------------------------
  /// x_c = 1, not found.
  ThresholdBracket thresholdBracketInitial() {
    return {ops.rowConstant(1.0), ops.rowFlag(false)};
  }
  /// The τ at which a bracket step sums the row's keys: m_i − x_c.
  Value thresholdBracketTrial(const ThresholdBracket &bracket, Value maxScore) {
    return ops.sub(maxScore, bracket.width);
  }
  /// One doubling from Σ g at the trial τ (the width stays once it reached c).
  ThresholdBracket thresholdBracketStep(const ThresholdBracket &bracket, Value weights) {
    Value reached = ops.compare(RowComparison::GreaterEqual, weights, thresholdTarget(weights));
    return {ops.select(reached, bracket.width, ops.add(bracket.width, bracket.width)), reached};
  }
  /// The iteration's lo: m_i − x_c, NaN where no doubling reached c.
  Value thresholdStartLo(Value maxScore, const ThresholdBracket &bracket) {
    return ops.select(bracket.found, ops.sub(maxScore, bracket.width),
                      ops.constantLike(maxScore, std::numeric_limits<double>::quiet_NaN()));
  }
  /// The state at lo (its sums with slopes), hi = m_i.
  ThresholdState thresholdInitial(Value maxScore, Value lo, const ThresholdSums &atLo) {
    return {lo, maxScore, atLo, ops.rowFlag(false), ops.rowFlag(false)};
  }
  /// The step's trial τ: safeguarded Newton on F from lo, F(lo) >= 0 > F(hi)
  /// throughout. For a convex g (α <= 2) every Newton step stays below the root and
  /// the iteration converges from below, for sparsemax exactly once the support is
  /// found; a concave g overshoots, so a step after one that moved hi bisects.
  Value thresholdTrial(const ThresholdState &state) {
    Value c = thresholdTarget(state.lo);
    Value newton = ops.name(
        "newton", ops.add(state.lo, ops.divide(ops.sub(state.atLo.weights, c), state.atLo.slopes)));
    Value useNewton = ops.both(thresholdInside(state, newton), ops.negateFlag(state.hiMoved));
    Value midpoint = ops.mul(ops.constantLike(state.lo, 0.5), ops.add(state.lo, state.hi));
    return ops.select(useNewton, newton, midpoint);
  }
  /// The state after the trial τ `next`, from the sums at it (with slopes).
  ThresholdState thresholdStep(const ThresholdState &state, Value next, const ThresholdSums &at) {
    Value c = thresholdTarget(at.weights);
    Value reached = ops.name("reached", ops.compare(RowComparison::GreaterEqual, at.weights, c));
    Value exact = ops.compare(RowComparison::Equal, at.weights, c);
    Value stalled = ops.negateFlag(thresholdInside(state, next));
    auto pick = [&](Value ifReached, Value otherwise) {
      return ops.select(reached, ifReached, otherwise);
    };
    return {pick(next, state.lo),
            pick(state.hi, next),
            {pick(at.weights, state.atLo.weights), pick(at.slopes, state.atLo.slopes)},
            ops.negateFlag(reached),
            ops.either(stalled, exact)};
  }
  /// τ_i of a finished iteration (what the row stores as row_max).
  Value thresholdRoot(const ThresholdState &state) { return state.lo; }
  /// x = s − τ, the argument of g.
  Value thresholdArgument(Value s, Value tau) { return ops.sub(s, tau); }
  /// Whether a key has a weight: x > 0 (g is 0 elsewhere).
  Value thresholdAbove(Value x) {
    return ops.compare(RowComparison::Greater, x, ops.constantLike(x, 0.0));
  }
  /// Whether a block of keys whose largest score is `blockMax` may add to a sum at τ.
  Value thresholdBlockAbove(Value blockMax, Value tau) {
    return ops.compare(RowComparison::Greater, blockMax, tau);
  }
  /// One key's terms of the sums: its g and g' (slope null: not summed) where it lies
  /// above τ, else 0 (a masked key's g may be NaN at x = −inf).
  ThresholdSums thresholdKeyTerms(Value above, Value weight, Value slope) {
    auto where = [&](Value value) {
      return ops.select(above, value, ops.constantLike(value, 0.0));
    };
    return {where(weight), slope ? where(slope) : Value()};
  }
  /// Sums plus (a key's or a block's reduced) terms.
  ThresholdSums thresholdAddTerms(const ThresholdSums &sums, const ThresholdSums &terms) {
    return {ops.add(sums.weights, terms.weights),
            sums.slopes ? ops.add(sums.slopes, terms.slopes) : Value()};
  }
  /// Zero sums (with slopes or without).
  ThresholdSums thresholdSumsInitial(bool withSlopes) {
    Value zero = ops.rowConstant(0.0);
    return {zero, withSlopes ? zero : Value()};
  }

  // --- an implicit normalizer's backward row -------------------------------------------
  ThresholdGradientSums thresholdGradientInitial() {
    Value zero = ops.rowConstant(0.0);
    return {zero, zero};
  }
  /// The sums with a key above τ_i of slope g' and dP = dO_i·v_j folded in.
  ThresholdGradientSums thresholdGradientFold(const ThresholdGradientSums &sums, Value slope,
                                              Value dP) {
    return {ops.add(sums.slopeDP, ops.mul(slope, dP)), ops.add(sums.slopes, slope)};
  }
  /// r_i = Σ g'·dP / Σ g' (0 where no key has a slope).
  Value thresholdCorrection(const ThresholdGradientSums &sums) {
    Value hasSlope =
        ops.compare(RowComparison::Greater, sums.slopes, ops.constantLike(sums.slopes, 0.0));
    return ops.quotientWhere(hasSlope, sums.slopeDP, sums.slopes);
  }
  /// The dP a pair above τ_i's gradient takes (at C = 1): dP − r_i.
  Value thresholdPairDP(Value dP, Value correction) { return ops.sub(dP, correction); }

private:
  /// c, the value the row's weights sum to.
  Value thresholdTarget(Value like) {
    return ops.constantLike(like, normalizer.getDenominatorConstant()->convertToDouble());
  }
  /// Whether τ lies strictly inside the state's bracket (lo, hi).
  Value thresholdInside(const ThresholdState &state, Value tau) {
    return ops.both(ops.compare(RowComparison::Greater, tau, state.lo),
                    ops.compare(RowComparison::Less, tau, state.hi));
  }

  /// The row offset β (times e^-m online) of a summed denominator, null without one.
  Value rowOffset(Value m, Value like, const Row &row) {
    if (Value offset = ops.offsetRegion(m, row)) // β·e^-m online (m = 0 plain)
      return offset;
    auto eps = normalizer.getEpsilon();
    if (!eps)
      return {};
    Value epsilon = ops.constantLike(like, eps->convertToDouble());
    if (!online)
      return epsilon;
    // ε·e^-m = e^(log ε − m); log ε is in m, so this stays in range.
    return ops.mul(epsilon, ops.exp(ops.negate(m)));
  }

  Ops ops;
  NormalizerOp normalizer;
  bool online;
};

} // namespace mlir::attn

#endif
