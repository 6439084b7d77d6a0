//===- RowAlgorithm.cpp - what a query row carries, in one place ---------===//
#include "lib/Codegen/RowAlgorithm.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::attn;

RowMaxStart RowMaxStart::of(NormalizerOp normalizer, bool hasOffsetStabilizer) {
  if (hasOffsetStabilizer)
    return {true, 0.0};
  if (auto eps = normalizer.getEpsilon(); eps && eps->convertToDouble() > 0.0)
    return {false, std::log(eps->convertToDouble())};
  return {false, -std::numeric_limits<double>::infinity()};
}

// --- the state's layout -------------------------------------------------------------

SmallVector<Value> RowStateLayout::pack(const RowState &state) const {
  assert(state.count.getType() == counter && "the count has the layout's type");
  assert(bool(state.sum.error) == compensated && "the sum's error term as the layout says");
  SmallVector<Value> values{state.max, state.sum.sum};
  if (compensated)
    values.push_back(state.sum.error);
  values.push_back(state.count);
  return values;
}

RowState RowStateLayout::unpack(ValueRange values) const {
  assert(values.size() == size() && "a packed row state");
  return {values[0], {values[1], compensated ? values[2] : Value()}, values.back()};
}

void RowStateLayout::store(ImplicitLocOpBuilder &b, const RowState &state, Value panel,
                           Value row) const {
  assert(counter == type && "a panel row holds floats");
  for (auto [field, value] : llvm::enumerate(pack(state)))
    memref::StoreOp::create(b, value, panel,
                            ValueRange{row, arith::ConstantIndexOp::create(b, field)});
}

RowState RowStateLayout::load(ImplicitLocOpBuilder &b, Value panel, Value row) const {
  assert(counter == type && "a panel row holds floats");
  SmallVector<Value> values;
  for (unsigned field = 0; field < size(); ++field)
    values.push_back(memref::LoadOp::create(
        b, panel, ValueRange{row, arith::ConstantIndexOp::create(b, field)}));
  return unpack(values);
}

// --- the equations' MLIR algebra -----------------------------------------------------

Value MlirRowOps::rowConstant(double value) {
  FloatType type = layout->floatType();
  return arith::ConstantOp::create(b, type, b.getFloatAttr(type, value));
}

MlirRowOps::Sum MlirRowOps::emptySum() {
  Value zero = rowConstant(0.0);
  return {zero, layout->carriesSumError() ? zero : Value()};
}

Value MlirRowOps::noKeys() {
  if (layout->countType().isIndex())
    return arith::ConstantIndexOp::create(b, 0);
  return rowConstant(0.0);
}

Value MlirRowOps::exp(Value x) { return math::ExpOp::create(b, x); }

Value MlirRowOps::addCount(Value count, Value kept) {
  if (count.getType().isIndex())
    return arith::AddIOp::create(b, count, kept);
  return arith::AddFOp::create(b, count, kept);
}

Value MlirRowOps::compare(RowComparison comparison, Value x, Value y) {
  auto predicate = [&] {
    switch (comparison) {
    case RowComparison::Equal:
      return arith::CmpFPredicate::OEQ;
    case RowComparison::NotEqual:
      return arith::CmpFPredicate::UNE;
    case RowComparison::Greater:
      return arith::CmpFPredicate::OGT;
    case RowComparison::GreaterEqual:
      return arith::CmpFPredicate::OGE;
    case RowComparison::Less:
      return arith::CmpFPredicate::OLT;
    }
    llvm_unreachable("a row comparison");
  };
  return arith::CmpFOp::create(b, predicate(), x, y);
}

Value MlirRowOps::quotientWhere(Value condition, Value x, Value y) {
  return arith::SelectOp::create(b, condition, arith::DivFOp::create(b, x, y),
                                 constantLike(x, 0.0));
}

// --- the row algorithm ---------------------------------------------------------------

Value RowAlgorithm::constant(Type type, double value) {
  return arith::ConstantOp::create(b, type, b.getFloatAttr(type, value));
}

RowState RowAlgorithm::initial(const RowIndices &row) {
  (void)stateLayout(); // MlirRowOps starts the state in the layout's types
  return equations.initial(row);
}

RowAlgorithm::PairStep RowAlgorithm::pairStep(const RowState &state, const PairValues &pair,
                                              Value s) {
  Rescale step{constantLike(b, s, 0.0), Value()};
  if (online())
    step = equations.advanceMax(state.max, math.stabilizer(pair, s), /*mayBeEmpty=*/false);
  Value g = math.numeratorTerm(pair, s, step.max);
  Value h = math.denominatorTerm(pair, s, step.max);
  return {step.max, step.alpha, g, h};
}

RowState RowAlgorithm::foldPair(const RowState &state, const PairStep &step) {
  Value one = state.count.getType().isIndex() ? arith::ConstantIndexOp::create(b, 1).getResult()
                                              : constant(state.count.getType(), 1.0);
  return equations.foldTile(state, step.shift, step.alpha, step.denominator, one);
}

RowAlgorithm::Reduction RowAlgorithm::maxReduction() {
  // A NaN score makes its g, and so O, NaN whatever the max is, and e^(s - m) is
  // the same for m = ±0: the max may skip NaNs and order zeros freely, one vmaxps
  // per vector (without nsz, LLVM adds a sign test and two blends to each).
  return {vector::CombiningKind::MAXIMUMF, arith::FastMathFlags::nnan | arith::FastMathFlags::nsz};
}

RowAlgorithm::Reduction RowAlgorithm::sumReduction() {
  return {vector::CombiningKind::ADD, arith::FastMathFlags::reassoc};
}

Value RowAlgorithm::combineCandidates(Value x, Value y) {
  return arith::MaximumFOp::create(b, x, y, maxReduction().flags);
}

RowAlgorithm::Rescale RowAlgorithm::advanceMax(Value maxima, Value candidates) {
  return equations.advanceMax(maxima, candidates, /*mayBeEmpty=*/true);
}

RowState RowAlgorithm::foldTile(const RowState &state, Value newMax, Value alpha, Value hSum,
                                Value kept) {
  return equations.foldTile(state, newMax, alpha, hSum, kept);
}

AttentionMath::RunningSum RowAlgorithm::foldOutput(AttentionMath::RunningSum acc, Value alpha,
                                                   Value term) {
  return equations.foldOutput(acc, alpha, term);
}

RowAlgorithm::Combined RowAlgorithm::combine(const RowState &running, const RowState &part) {
  assert(!part.sum.error && "a partial state carries no error term (abi.h)");
  return equations.combine(running, part, part.sum.sum);
}

Value RowAlgorithm::combineOutput(const Combined &combined, Value output, Value partOutput) {
  return equations.combineOutput(combined, output, partOutput);
}

Value RowAlgorithm::composeRescales(Value alpha, Value next) {
  return equations.composeRescales(alpha, next);
}

// --- a scan's row ----------------------------------------------------------------------

ScanState RowAlgorithm::scanInitial(FloatType type) {
  return withRowType(type, [](Equations &rows) { return rows.scanInitial(); });
}

RowAlgorithm::ScanStep RowAlgorithm::scanPair(const ScanState &state, const PairValues &pair,
                                              Value s) {
  Value zero = constant(s.getType(), 0.0);
  Value g = math.numerator(s, zero, pair.at); // g before d, in every compiler's order
  Value d = math.denominator(s, zero, pair.at);
  return equations.scanPair(state, g, d);
}

RowState RowAlgorithm::withFloatCount(const RowState &state) {
  if (!state.count.getType().isIndex())
    return state;
  Value count = arith::UIToFPOp::create(b, state.sum.sum.getType(),
                                        arith::IndexCastOp::create(b, b.getI64Type(), state.count));
  return {state.max, state.sum, count};
}

RowAlgorithm::RowResult RowAlgorithm::finalize(const RowState &state, const RowIndices &row,
                                               Value numeratorCoefficient) {
  RowState counted = withFloatCount(state);
  return equations.finalize(counted, counted.sum.sum, row, numeratorCoefficient);
}

// --- the backward's rows ---------------------------------------------------------------

Value RowAlgorithm::rowLive(Value rowSum) { return equations.rowLive(rowSum); }

BackwardRow RowAlgorithm::prepareBackward(Value rowMax, Value rowSum, Value delta, Value alsoLive) {
  return equations.prepareBackward(rowMax, rowSum, delta, alsoLive);
}

void RowAlgorithm::storeBackward(const BackwardRow &prepared, Value panel, Value row) {
  Type type = prepared.delta.getType();
  Value liveAsFloat =
      arith::SelectOp::create(b, prepared.live, constant(type, 1.0), constant(type, 0.0));
  Value fields[backwardPanelWidth] = {prepared.shift, prepared.inverseC, prepared.delta,
                                      liveAsFloat};
  for (auto [field, value] : llvm::enumerate(fields))
    memref::StoreOp::create(b, value, panel,
                            ValueRange{row, arith::ConstantIndexOp::create(b, field)});
}

BackwardRow RowAlgorithm::loadBackward(Value panel, Value row) {
  SmallVector<Value, backwardPanelWidth> fields;
  for (int64_t field = 0; field < backwardPanelWidth; ++field)
    fields.push_back(memref::LoadOp::create(
        b, panel, ValueRange{row, arith::ConstantIndexOp::create(b, field)}));
  Value live = arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, fields[3],
                                     constant(fields[3].getType(), 0.0));
  return {fields[0], fields[1], fields[2], live};
}

// --- an implicit normalizer's row ------------------------------------------------------

SmallVector<Value> RowAlgorithm::pack(const ThresholdSums &sums) {
  SmallVector<Value> values{sums.weights};
  if (sums.slopes)
    values.push_back(sums.slopes);
  return values;
}

RowAlgorithm::ThresholdSums RowAlgorithm::unpackThresholdSums(ValueRange values) {
  assert((values.size() == 1 || values.size() == 2) && "packed threshold sums");
  return {values[0], values.size() == 2 ? values[1] : Value()};
}

SmallVector<Value> RowAlgorithm::pack(const ThresholdState &state) {
  return {state.lo, state.hi, state.atLo.weights, state.atLo.slopes, state.hiMoved,
          state.converged};
}

RowAlgorithm::ThresholdState RowAlgorithm::unpackThresholdState(ValueRange values) {
  assert(values.size() == 6 && "a packed threshold state");
  return {values[0], values[1], {values[2], values[3]}, values[4], values[5]};
}

RowAlgorithm::ThresholdBracket RowAlgorithm::thresholdBracketInitial(FloatType type) {
  return withRowType(type, [](Equations &rows) { return rows.thresholdBracketInitial(); });
}

RowAlgorithm::ThresholdBracket RowAlgorithm::thresholdBracketStep(const ThresholdBracket &bracket,
                                                                  Value maxScore,
                                                                  ThresholdKeySums sumsAt) {
  Value trial = equations.thresholdBracketTrial(bracket, maxScore);
  return equations.thresholdBracketStep(bracket, sumsAt(trial, false).weights);
}

RowAlgorithm::ThresholdState RowAlgorithm::thresholdInitial(Value maxScore,
                                                            const ThresholdBracket &bracket,
                                                            ThresholdKeySums sumsAt) {
  Value lo = equations.thresholdStartLo(maxScore, bracket);
  return equations.thresholdInitial(maxScore, lo, sumsAt(lo, true));
}

int64_t RowAlgorithm::thresholdSteps(FloatType type) {
  return attn::thresholdSteps(type.getFPMantissaWidth());
}

RowAlgorithm::ThresholdState RowAlgorithm::thresholdStep(const ThresholdState &state,
                                                         ThresholdKeySums sumsAt) {
  Value next = equations.thresholdTrial(state);
  return equations.thresholdStep(state, next, sumsAt(next, true));
}

Value RowAlgorithm::thresholdWeight(Value x, const PairIndices &at) {
  return math.numerator(x, constant(x.getType(), 0.0), at);
}

Value RowAlgorithm::thresholdSlope(const PairValues &pair, Value x) {
  return math.gradient(pair, x, unitBackwardRow(constant(x.getType(), 0.0)),
                       constant(x.getType(), 1.0))
      .scoreGrad();
}

RowAlgorithm::ThresholdSums RowAlgorithm::thresholdSumsInitial(FloatType type, bool withSlopes) {
  return withRowType(type,
                     [&](Equations &rows) { return rows.thresholdSumsInitial(withSlopes); });
}

RowAlgorithm::ThresholdSums RowAlgorithm::thresholdFoldKey(const ThresholdSums &sums, Value s,
                                                           Value tau, const PairIndices &at) {
  Value x = thresholdArgument(s, tau);
  Value above = thresholdAbove(x);
  Value weight = thresholdWeight(x, at);
  Value slope = sums.slopes ? thresholdSlope(PairValues{x, at, Value()}, x) : Value();
  return equations.thresholdAddTerms(sums, equations.thresholdKeyTerms(above, weight, slope));
}

RowAlgorithm::ThresholdGradientSums RowAlgorithm::thresholdGradientInitial(FloatType type) {
  return withRowType(type, [](Equations &rows) { return rows.thresholdGradientInitial(); });
}

AttentionMath::PairGradient RowAlgorithm::thresholdPairGradient(const PairValues &pair, Value x,
                                                                Value dP, Value correction) {
  return math.gradient(pair, x, unitBackwardRow(constant(x.getType(), 0.0)),
                       equations.thresholdPairDP(dP, correction));
}

// --- a scan's backward row ---------------------------------------------------------------

RowAlgorithm::ScanBackwardState RowAlgorithm::scanBackwardInitial(FloatType type) {
  return withRowType(type, [](Equations &rows) { return rows.scanBackwardInitial(); });
}

RowAlgorithm::ScanBackwardStep RowAlgorithm::scanBackwardFold(const ScanBackwardState &state,
                                                              const ScanStep &step,
                                                              const PairValues &pair, Value s,
                                                              Value dP, Value delta) {
  Equations::ScanBackwardStep next = equations.scanBackwardFold(state, step, dP, delta);
  return {next.next,
          math.gradient(pair, s, unitBackwardRow(next.suffixDelta), next.scaledDP)};
}

BackwardRow RowAlgorithm::unitBackwardRow(Value delta) {
  Type type = delta.getType();
  return {constant(type, 0.0), constant(type, 1.0), delta, Value()};
}
