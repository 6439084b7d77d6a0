//===- RowAlgorithm.h - what a query row carries, in one place ----*- C++ -*-===//
//
// The row algorithm of DESIGN.md §2 (docs/row-algorithm.md): what a query row
// carries across its keys, how one pair or a tile's reduced candidates fold into
// it, how two partial states of one row combine (split-K, context parallelism),
// how the row ends, and what the backward prepares per row. Its equations are
// RowEquations.h's, which the Triton templates instantiate too; this is their MLIR
// instantiation, with the state's layout. Every CPU schedule instantiates it (the
// generic loops a pair at a time, the tiled loops a tile's reduced candidates, the
// split-K merge partial states, the linear form its row sums); schedules supply
// only loops, memory and reductions:
//
//   state       (m, l[, ε_l], count)   m the running max (online; plain: 0, kept),
//                                      l = Σ h·e^-m, ε_l its rounding error (Kahan,
//                                      below f64), count the keys folded in
//   start       m = x_β (the row offset's exponent; −∞ without one), l = count = 0
//   fold tile   m' = max(m, max_t stab(s_t)),  α = e^(m − m') (1 while m' = −∞),
//               l' = α·l + Σ_t h(s_t, m'),  count' = count + kept;  O' = α·O + Σ_t g·v
//   combine     m' = max(m_a, m_b),  α_a = e^(m_a − m'),  α_b = e^(m_b − m'),
//               l' = α_a·l_a + α_b·l_b,  count' = count_a + count_b;  O' likewise
//   finalize    C = l + β·e^-m | c | count, O·coefficient/C, row_max, row_sum
//   backward    from (row_max, row_sum, D = dO·O): shift, 1/C (0 where C = 0), live
//
// A scan (stick-breaking) carries another state, ScanState, and an implicit
// normalizer (sparsemax, α-entmax) its threshold's (ThresholdState); their equations
// are RowEquations.h's too.
//
// Across the lanes of a tile (and threads, ranks) the fields reduce as
// laneReduction says: m by maximum, l and count by addition (the lanes share
// their shift).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_CODEGEN_ROWALGORITHM_H
#define ATTN_LIB_CODEGEN_ROWALGORITHM_H

#include "lib/Codegen/AttentionMath.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <optional>

namespace mlir::attn {

/// The state of one query row, by name: the running max m (online; plain: 0,
/// unchanged), Σ h·e^-m with, compensated, its rounding error, and the keys folded
/// in. `count` is index (schedules that fold one pair at a time count them) or the
/// float type (tiles count kept lanes).
using RowState = RowStateOf<Value, AttentionMath::RunningSum>;

/// Which fields a schedule's row state carries and how it is laid out in scf.for
/// iter_args and in a panel row (memref<? x size() x T>): max, sum, the sum's
/// error where compensated, count; schedules never index it by position.
class RowStateLayout {
public:
  /// `countType`: index or `type`. A panel row holds the count as `type`.
  RowStateLayout(FloatType type, bool compensated, Type countType)
      : type(type), counter(countType), compensated(compensated) {}

  FloatType floatType() const { return type; }
  Type countType() const { return counter; }
  bool carriesSumError() const { return compensated; }
  unsigned size() const { return compensated ? 4 : 3; }
  SmallVector<Value> pack(const RowState &state) const;
  RowState unpack(ValueRange values) const;
  /// Row `row` of `panel` (the count must be a float).
  void store(ImplicitLocOpBuilder &b, const RowState &state, Value panel, Value row) const;
  RowState load(ImplicitLocOpBuilder &b, Value panel, Value row) const;

private:
  FloatType type;
  Type counter;
  bool compensated;
};

/// The state of a scan's query row (RowEquations.h's ScanStateOf).
using ScanState = ScanStateOf<Value>;

// --- the equations' MLIR algebra -----------------------------------------------------

/// RowEquations' value algebra on MLIR values: arith and math ops (add, sub and mul
/// at AttentionMath's fast-math flags), AttentionMath's running sums (compensated
/// below f64) and regions, and the state's layout for its start.
class MlirRowOps {
public:
  using Value = mlir::Value;
  using Sum = AttentionMath::RunningSum;
  using Row = RowIndices;

  MlirRowOps(ImplicitLocOpBuilder &b, AttentionMath &math,
             const std::optional<RowStateLayout> &layout)
      : b(b), math(math), layout(layout) {}

  bool hasOffsetStabilizer() const { return bool(math.functions().offsetStab); }
  Value offsetStabilizer(const RowIndices &row) { return math.offsetStabilizer(row); }
  Value offsetRegion(Value m, const RowIndices &row) { return math.offsetRegion(m, row); }
  Value rowConstant(double value);
  Sum emptySum();
  Value noKeys();
  Value constantLike(Value like, double value) { return attn::constantLike(b, like, value); }
  Value maximum(Value x, Value y) { return arith::MaximumFOp::create(b, x, y); }
  Value exp(Value x);
  Value negate(Value x) { return arith::NegFOp::create(b, x); }
  Value add(Value x, Value y) { return math.add(x, y); }
  Value sub(Value x, Value y) { return math.sub(x, y); }
  Value mul(Value x, Value y) { return math.mul(x, y); }
  /// count + kept, in the count's type.
  Value addCount(Value count, Value kept);
  Value compare(RowComparison comparison, Value x, Value y);
  Value select(Value condition, Value x, Value y) {
    return arith::SelectOp::create(b, condition, x, y);
  }
  Value both(Value x, Value y) { return arith::AndIOp::create(b, x, y); }
  Value either(Value x, Value y) { return arith::OrIOp::create(b, x, y); }
  Value negateFlag(Value x) {
    return arith::XOrIOp::create(b, x, arith::ConstantIntOp::create(b, 1, 1));
  }
  Value rowFlag(bool value) { return arith::ConstantIntOp::create(b, value, 1); }
  Value divide(Value x, Value y) { return arith::DivFOp::create(b, x, y); }
  Value quotientWhere(Value condition, Value x, Value y);
  Sum accumulate(Sum acc, Value alpha, Value term) { return math.accumulate(acc, alpha, term); }
  Value name(StringRef, Value value) { return value; }

private:
  ImplicitLocOpBuilder &b;
  AttentionMath &math;
  const std::optional<RowStateLayout> &layout;
};

class RowAlgorithm {
public:
  using Equations = RowEquations<MlirRowOps>;
  using Rescale = Equations::Rescale;
  using RowResult = Equations::RowResult;

  /// A forward schedule's rows carry their state as `layout` says; the backward,
  /// which prepares rows from their statistics only, and finalize need none.
  RowAlgorithm(ImplicitLocOpBuilder &b, AttentionMath &math,
               std::optional<RowStateLayout> layout = std::nullopt)
      : b(b), math(math), layout(layout),
        equations(MlirRowOps(b, math, this->layout), math.normalizer(), math.online()) {}
  // The equations' ops refer to `layout`.
  RowAlgorithm(const RowAlgorithm &) = delete;
  RowAlgorithm &operator=(const RowAlgorithm &) = delete;

  const RowStateLayout &stateLayout() const {
    assert(layout && "a forward schedule's row algorithm has a state layout");
    return *layout;
  }
  bool online() const { return math.online(); }

  /// The state before the row's first key.
  RowState initial(const RowIndices &row);

  // --- folding pairs one at a time --------------------------------------------
  /// One kept pair's step: the new shift (m' online, 0 plain), α (null plain) and
  /// its g and h (h null without a summed denominator).
  struct PairStep {
    Value shift, alpha, numerator, denominator;
  };
  PairStep pairStep(const RowState &state, const PairValues &pair, Value s);
  /// The state after the pair of `step` (O folds by foldOutput in between).
  RowState foldPair(const RowState &state, const PairStep &step);

  // --- folding a tile ------------------------------------------------------------
  /// How a field's lane values reduce to the row's (maxima, sums, counts).
  struct Reduction {
    vector::CombiningKind kind;
    arith::FastMathFlags flags;
  };
  static Reduction maxReduction();
  static Reduction sumReduction();
  /// Two stabiliser candidates of one row combined as maxReduction says.
  Value combineCandidates(Value x, Value y);
  /// The running maxima (any shape: vector<rows> of a tile's rows) advanced by
  /// the tile's reduced candidates, and α; rows whose keys were all masked so
  /// far keep α = 1.
  Rescale advanceMax(Value maxima, Value candidates);
  /// The state after a tile: m' = newMax (online), l' = α·l + hSum (hSum null: no
  /// summed denominator), count' = count + kept.
  RowState foldTile(const RowState &state, Value newMax, Value alpha, Value hSum, Value kept);

  // --- combining partial states (split-K, the deferred rescale) ----------------
  /// α·O + term, compensated where `acc` has an error term (l, O, and a block's
  /// W·V product joining O with the product of the rescale factors since).
  AttentionMath::RunningSum foldOutput(AttentionMath::RunningSum acc, Value alpha, Value term);
  /// Two partial states of one row over disjoint keys: the combined state and the
  /// factors their outputs take (null plain, where O_a + O_b).
  using Combined = Equations::Combined;
  Combined combine(const RowState &running, const RowState &part);
  /// α_a·O_a + α_b·O_b of `combined`.
  Value combineOutput(const Combined &combined, Value output, Value partOutput);
  /// The product of two rescale factors (a rescale deferred across tiles).
  Value composeRescales(Value alpha, Value next);

  // --- a scan's row (keys from the last to the first; RowEquations' scan*) ----------
  /// S = 0: no key folded in.
  ScanState scanInitial(FloatType type);
  /// One kept pair: its survival e^S, its weight w = g(s)·e^S and the state after it.
  using ScanStep = Equations::ScanStep;
  ScanStep scanPair(const ScanState &state, const PairValues &pair, Value s);
  /// Two chunks of one row's keys, `nearer` of the larger keys: the combined state and
  /// the factor e^(S_nearer) the farther chunk's output takes.
  using ScanCombined = Equations::ScanCombined;
  ScanCombined scanCombine(const ScanState &farther, const ScanState &nearer) {
    return equations.scanCombine(farther, nearer);
  }
  /// O_nearer + e^(S_nearer)·O_farther.
  Value scanCombineOutput(const ScanCombined &combined, Value fartherOutput, Value nearerOutput) {
    return equations.scanCombineOutput(combined, fartherOutput, nearerOutput);
  }
  /// r = e^S, the left-over weight of a finished row.
  Value scanLeftOver(const ScanState &state) { return equations.scanLeftOver(state); }

  // --- the end of a row ------------------------------------------------------------
  /// The state with its count as a float (what finalize and partial states store).
  RowState withFloatCount(const RowState &state);
  RowResult finalize(const RowState &state, const RowIndices &row,
                     Value numeratorCoefficient = {});
  /// The row statistics the ABI stores (RowEquations::rowMax, rowSum).
  Value rowMax(const RowResult &result) { return equations.rowMax(result); }
  Value rowSum(const RowResult &result) { return equations.rowSum(result); }

  // --- the backward's rows -----------------------------------------------------------
  /// Whether a row with this row_sum contributes (C != 0).
  Value rowLive(Value rowSum);
  /// The row's backward values from row_max, row_sum and D = dO·O; `alsoLive`
  /// marks further rows that contribute nothing (padding rows of a tile).
  BackwardRow prepareBackward(Value rowMax, Value rowSum, Value delta, Value alsoLive = {});
  /// A prepared row in row `row` of a panel memref<? x backwardPanelWidth x T>
  /// (live as 1 or 0), and back.
  static constexpr int64_t backwardPanelWidth = 4;
  void storeBackward(const BackwardRow &prepared, Value panel, Value row);
  BackwardRow loadBackward(Value panel, Value row);

private:
  Value constant(Type type, double value);

  ImplicitLocOpBuilder &b;
  AttentionMath &math;
  std::optional<RowStateLayout> layout;
  Equations equations;

  // --- an implicit normalizer's row (sparsemax, α-entmax) ---------------------------
  // RowEquations' threshold equations (the bracket, the safeguarded Newton iteration of
  // τ_i, the backward's r_i). The sums over a row's keys at a trial τ are the
  // schedule's reduction, handed in as ThresholdKeySums, each key folded by
  // thresholdFoldKey; every other step of the iteration is RowEquations'.
public:
  using ThresholdSums = Equations::ThresholdSums;
  using ThresholdBracket = Equations::ThresholdBracket;
  using ThresholdState = Equations::ThresholdState;
  using ThresholdGradientSums = Equations::ThresholdGradientSums;
  /// The sums and the state in scf.for iter_args, and back.
  static SmallVector<Value> pack(const ThresholdSums &sums);
  static ThresholdSums unpackThresholdSums(ValueRange values);
  static SmallVector<Value> pack(const ThresholdState &state);
  static ThresholdState unpackThresholdState(ValueRange values);
  /// The schedule's sums over row i's keys at `tau`, each key folded by
  /// thresholdFoldKey.
  using ThresholdKeySums = function_ref<ThresholdSums(Value tau, bool withSlopes)>;
  ThresholdBracket thresholdBracketInitial(FloatType type);
  /// One doubling (nothing once found); a scf.for of thresholdBracketDoublings runs it.
  ThresholdBracket thresholdBracketStep(const ThresholdBracket &bracket, Value maxScore,
                                        ThresholdKeySums sumsAt);
  ThresholdState thresholdInitial(Value maxScore, const ThresholdBracket &bracket,
                                  ThresholdKeySums sumsAt);
  /// RowEquations' thresholdSteps for `type`. A step after convergence must leave
  /// the state as it is.
  static int64_t thresholdSteps(FloatType type);
  ThresholdState thresholdStep(const ThresholdState &state, ThresholdKeySums sumsAt);
  /// τ_i of a finished iteration (what the row stores as row_max).
  Value thresholdRoot(const ThresholdState &state) { return equations.thresholdRoot(state); }
  /// x = s − τ, the argument of g.
  Value thresholdArgument(Value s, Value tau) { return equations.thresholdArgument(s, tau); }
  /// Whether a key has a weight: x > 0 (g is 0 elsewhere).
  Value thresholdAbove(Value x) { return equations.thresholdAbove(x); }
  /// Whether a block of keys whose largest score is `blockMax` may add to a sum at τ.
  Value thresholdBlockAbove(Value blockMax, Value tau) {
    return equations.thresholdBlockAbove(blockMax, tau);
  }
  /// w = g(x), of a key above the threshold.
  Value thresholdWeight(Value x, const PairIndices &at);
  /// g'(x) of the pair (x its score less τ).
  Value thresholdSlope(const PairValues &pair, Value x);
  ThresholdSums thresholdSumsInitial(FloatType type, bool withSlopes);
  /// The sums with the key of score `s` at `at` folded in (slopes where the sums
  /// carry them); a masked key's s = −inf adds nothing.
  ThresholdSums thresholdFoldKey(const ThresholdSums &sums, Value s, Value tau,
                                 const PairIndices &at);
  ThresholdGradientSums thresholdGradientInitial(FloatType type);
  ThresholdGradientSums thresholdGradientFold(const ThresholdGradientSums &sums, Value slope,
                                              Value dP) {
    return equations.thresholdGradientFold(sums, slope, dP);
  }
  /// r_i = Σ g'·dP / Σ g' (0 where no key has a slope).
  Value thresholdCorrection(const ThresholdGradientSums &sums) {
    return equations.thresholdCorrection(sums);
  }
  /// The gradients of a pair above τ_i: the pair gradient at C = 1, dP − r_i for dP.
  AttentionMath::PairGradient thresholdPairGradient(const PairValues &pair, Value x, Value dP,
                                                    Value correction);

  // --- a scan's backward row (keys last to first, as its forward) --------------------
  // RowEquations' ScanBackwardState (S, B) and scanBackwardFold. It has no combine: a
  // chunk's B needs the chunks after it, so the backward takes whole rows.
  using ScanBackwardState = Equations::ScanBackwardState;
  ScanBackwardState scanBackwardInitial(FloatType type);
  /// After scanPair's `step` and the pair's dP = dO_i·v_j: the next state and the
  /// pair's gradients (dv_j gets step.weight·dO_i).
  struct ScanBackwardStep {
    ScanBackwardState next;
    AttentionMath::PairGradient gradient;
  };
  ScanBackwardStep scanBackwardFold(const ScanBackwardState &state, const ScanStep &step,
                                    const PairValues &pair, Value s, Value dP, Value delta);

private:
  /// The row of a gradient at C = 1 with `delta` for D (live: null, every pair counts).
  BackwardRow unitBackwardRow(Value delta);
  /// The equations over rows of `type` without a forward state's layout (a scan's
  /// constants), applied to `apply`.
  template <typename Apply> auto withRowType(FloatType type, Apply apply) {
    std::optional<RowStateLayout> scalar(std::in_place, type, /*compensated=*/false, type);
    Equations scalarRows(MlirRowOps(b, math, scalar), math.normalizer(), math.online());
    return apply(scalarRows);
  }
};

} // namespace mlir::attn

#endif
