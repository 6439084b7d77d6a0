//===- AttentionMath.cpp - the attention math, emitted in one place -------===//
#include "lib/Codegen/AttentionMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

#include <limits>

using namespace mlir;
using namespace mlir::attn;

/// A constant of `like`'s type: a float scalar, or a vector of them (broadcast).
static Value constantLike(ImplicitLocOpBuilder &b, Value like, double value) {
  Type type = like.getType();
  auto vector = dyn_cast<VectorType>(type);
  Type element = vector ? vector.getElementType() : type;
  Value scalar = arith::ConstantOp::create(b, element, b.getFloatAttr(element, value));
  return vector ? vector::BroadcastOp::create(b, vector, scalar).getResult() : scalar;
}

Value KeyBounds::causalEnd(ImplicitLocOpBuilder &b, Value i) const {
  return arith::MinSIOp::create(b, kvEnd,
                                arith::AddIOp::create(b, i, arith::ConstantIndexOp::create(b, 1)));
}

Value KeyBounds::end(ImplicitLocOpBuilder &b, Value i) const {
  return arith::SelectOp::create(b, isCausal, causalEnd(b, i), kvEnd);
}

Value KeyBounds::causalKeeps(ImplicitLocOpBuilder &b, Value i, Value j) const {
  return arith::OrIOp::create(
      b, arith::XOrIOp::create(b, isCausal, arith::ConstantIntOp::create(b, 1, 1)),
      arith::CmpIOp::create(b, arith::CmpIPredicate::sle, j, i));
}

AttentionMath::AttentionMath(ImplicitLocOpBuilder &b, const MathSetup &setup, ValueRange params)
    : b(b), setup(setup), params(params) {}

Value AttentionMath::masked(Value keep, Value x) {
  if (!keep)
    return x;
  return arith::SelectOp::create(b, keep, x, constantLike(b, x, 0.0));
}

Value AttentionMath::call(func::FuncOp function, ValueRange arguments) {
  if (setup.calls == CallStyle::Call)
    return func::CallOp::create(b, function, arguments).getResult(0);
  Block &body = function.getBody().front();
  IRMapping mapping;
  mapping.map(body.getArguments(), arguments);
  for (Operation &op : body.without_terminator())
    b.clone(op, mapping);
  return mapping.lookup(body.getTerminator()->getOperand(0));
}

Value AttentionMath::add(Value x, Value y) {
  return arith::AddFOp::create(b, x, y, setup.fastMath);
}

Value AttentionMath::sub(Value x, Value y) {
  return arith::SubFOp::create(b, x, y, setup.fastMath);
}

Value AttentionMath::mul(Value x, Value y) {
  return arith::MulFOp::create(b, x, y, setup.fastMath);
}

SmallVector<Value> AttentionMath::withParams(ValueRange leading) {
  SmallVector<Value> args(leading);
  args.append(params);
  return args;
}

// --- regions ---------------------------------------------------------------------

Value AttentionMath::score(const PairValues &pair) {
  if (!functions().score)
    return pair.raw;
  SmallVector<Value> args{pair.raw, pair.i, pair.j};
  args.append(pair.rowInputs.begin(), pair.rowInputs.end());
  return call(functions().score, withParams(args));
}

Value AttentionMath::maskKeeps(Value i, Value j) {
  if (functions().mask)
    return call(functions().mask, {i, j});
  return arith::ConstantIntOp::create(b, 1, 1);
}

Value AttentionMath::feature(Value x) {
  return functions().feature ? call(functions().feature, {x}) : x;
}

Value AttentionMath::featureGrad(Value grad, Value x) {
  if (!functions().featureDx)
    return grad;
  return mul(grad, call(functions().featureDx, {x}));
}

Value AttentionMath::numerator(Value s, Value shift) {
  return call(functions().numerator, withParams({s, shift}));
}

Value AttentionMath::denominator(Value s, Value shift) {
  if (!functions().denominator)
    return {};
  return call(functions().denominator, withParams({s, shift}));
}

Value AttentionMath::phase(Value i, Value j) { return call(functions().phase, {i, j}); }

// --- forward -----------------------------------------------------------------------

Value AttentionMath::stabilizer(const PairValues &pair, Value s) {
  Value candidate = call(functions().stabilizer, withParams({s}));
  if (!pair.keep)
    return candidate;
  return arith::SelectOp::create(b, pair.keep, candidate,
                                 constantLike(b, s, -std::numeric_limits<double>::infinity()));
}

AttentionMath::Rescale AttentionMath::rescale(Value m, Value candidate, bool mayBeEmpty) {
  Value next = arith::MaximumFOp::create(b, m, candidate);
  if (!mayBeEmpty)
    return {next, math::ExpOp::create(b, sub(m, next))};
  Value stillEmpty =
      arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, next,
                            constantLike(b, next, -std::numeric_limits<double>::infinity()));
  Value alpha = math::ExpOp::create(b, sub(m, next));
  return {next, arith::SelectOp::create(b, stillEmpty, constantLike(b, next, 1.0), alpha)};
}

Value AttentionMath::numeratorTerm(const PairValues &pair, Value s, Value shift) {
  return masked(pair.keep, numerator(s, shift));
}

Value AttentionMath::denominatorTerm(const PairValues &pair, Value s, Value shift) {
  Value h = denominator(s, shift);
  return h ? masked(pair.keep, h) : h;
}

Value AttentionMath::rescaled(Value x, Value alpha) { return alpha ? mul(x, alpha) : x; }

Value AttentionMath::accumulateSum(Value l, Value alpha, Value hSum) {
  Value sum = rescaled(l, alpha);
  return hSum ? add(sum, hSum) : sum;
}

Value AttentionMath::rowDenominator(Value m, Value sum, Value count) {
  NormalizerOp normalizer = setup.normalizer;
  switch (normalizer.getDenominatorKind()) {
  case DenominatorKind::Sum:
    if (auto eps = normalizer.getEpsilon()) {
      Value epsilon = constantLike(b, sum, eps->convertToDouble());
      if (online()) // C·e^-m = Σ h·e^-m + ε·e^-m
        epsilon =
            arith::MulFOp::create(b, epsilon, math::ExpOp::create(b, arith::NegFOp::create(b, m)));
      return add(sum, epsilon);
    }
    return sum;
  case DenominatorKind::Constant:
    return constantLike(b, sum, normalizer.getDenominatorConstant()->convertToDouble());
  case DenominatorKind::Count:
    return count;
  }
  llvm_unreachable("unknown denominator kind");
}

AttentionMath::RowResult AttentionMath::finalize(Value m, Value sum, Value count,
                                                 Value numeratorCoefficient) {
  Value zero = constantLike(b, sum, 0.0);
  RowResult row;
  row.max = m;
  row.denominator = rowDenominator(m, sum, count);
  row.anyKey = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, count, zero);
  Value numeratorScale = numeratorCoefficient ? numeratorCoefficient : constantLike(b, sum, 1.0);
  row.outputScale = arith::SelectOp::create(
      b, row.anyKey, arith::DivFOp::create(b, numeratorScale, row.denominator), zero);
  return row;
}

Value AttentionMath::rowMax(const RowResult &row) {
  Value zero = constantLike(b, row.denominator, 0.0);
  return arith::SelectOp::create(b, row.anyKey, online() ? row.max : zero, zero);
}

Value AttentionMath::rowSum(const RowResult &row) {
  return arith::SelectOp::create(b, row.anyKey, row.denominator,
                                 constantLike(b, row.denominator, 0.0));
}

// --- backward ----------------------------------------------------------------------

Value AttentionMath::rowLive(Value rowSum) {
  return arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, rowSum, constantLike(b, rowSum, 0.0));
}

BackwardRow AttentionMath::backwardRow(Value rowMax, Value rowSum, Value delta, Value alsoLive) {
  Value zero = constantLike(b, rowSum, 0.0);
  Value live = rowLive(rowSum);
  if (alsoLive)
    live = arith::AndIOp::create(b, alsoLive, live);
  Value inverse = arith::SelectOp::create(
      b, live, arith::DivFOp::create(b, constantLike(b, rowSum, 1.0), rowSum), zero);
  return {rowMax, inverse, delta, live};
}

Value AttentionMath::gradientTerm(Value numeratorPart, Value denominatorPart,
                                  const BackwardRow &row) {
  if (!denominatorPart)
    return mul(numeratorPart, row.inverseC);
  Value viaDenominator = mul(denominatorPart, row.delta);
  if (!numeratorPart)
    return arith::NegFOp::create(b, mul(viaDenominator, row.inverseC));
  return mul(sub(numeratorPart, viaDenominator), row.inverseC);
}

AttentionMath::PairGradient AttentionMath::gradient(const PairValues &pair, Value s,
                                                    const BackwardRow &row, Value dP) {
  return PairGradient(*this, pair, s, row, dP);
}

AttentionMath::PairGradient::PairGradient(AttentionMath &math, const PairValues &pair, Value s,
                                          const BackwardRow &row, Value dP)
    : math(math), pair(pair), s(s), dP(dP), row(row) {}

SmallVector<Value> AttentionMath::PairGradient::normalizerArgs() {
  return math.withParams({s, row.shift});
}

SmallVector<Value> AttentionMath::PairGradient::scoreArgs() {
  SmallVector<Value> args{pair.raw, pair.i, pair.j};
  args.append(pair.rowInputs.begin(), pair.rowInputs.end());
  return math.withParams(args);
}

Value AttentionMath::PairGradient::weight() {
  return math.masked(pair.keep, math.mul(math.numerator(s, row.shift), row.inverseC));
}

Value AttentionMath::PairGradient::scoreGrad() {
  if (ds)
    return ds;
  const ScalarFunctions &fns = math.functions();
  Value viaNumerator = math.mul(math.call(fns.numeratorDs, normalizerArgs()), dP);
  Value viaDenominator =
      fns.denominatorDs ? math.call(fns.denominatorDs, normalizerArgs()) : Value();
  ds = math.masked(pair.keep, math.gradientTerm(viaNumerator, viaDenominator, row));
  return ds;
}

Value AttentionMath::PairGradient::rawGrad() {
  const ScalarFunctions &fns = math.functions();
  if (!fns.scoreDs)
    return scoreGrad();
  return math.masked(pair.keep, math.mul(scoreGrad(), math.call(fns.scoreDs, scoreArgs())));
}

Value AttentionMath::PairGradient::paramGrad(unsigned p) {
  const ScalarFunctions &fns = math.functions();
  unsigned numNormalizerParams = fns.numeratorDp.size();
  if (p >= numNormalizerParams)
    return math.masked(
        pair.keep,
        math.mul(scoreGrad(), math.call(fns.scoreDp[p - numNormalizerParams], scoreArgs())));
  Value viaNumerator = math.mul(math.call(fns.numeratorDp[p], normalizerArgs()), dP);
  Value viaDenominator =
      fns.denominatorDp[p] ? math.call(fns.denominatorDp[p], normalizerArgs()) : Value();
  return math.masked(pair.keep, math.gradientTerm(viaNumerator, viaDenominator, row));
}

Value AttentionMath::PairGradient::rowInputGrad(unsigned r) {
  return math.masked(pair.keep,
                     math.mul(scoreGrad(), math.call(math.functions().scoreDr[r], scoreArgs())));
}

// --- kernelised --------------------------------------------------------------------

AttentionMath::LinearScoreGrad AttentionMath::linearScoreGrad(Value a, Value bCoefficient,
                                                              const BackwardRow &row) {
  LinearScoreGrad coefficients;
  coefficients.dPFactor = gradientTerm(a, Value(), row);
  coefficients.offset =
      bCoefficient ? gradientTerm(Value(), bCoefficient, row) : constantLike(b, row.delta, 0.0);
  return coefficients;
}

Value AttentionMath::linearScoreGradAt(const LinearScoreGrad &coefficients, Value dP) {
  return add(mul(coefficients.dPFactor, dP), coefficients.offset);
}

Value AttentionMath::linearParamGrad(unsigned p, Value da, Value db) {
  const ScalarFunctions &fns = functions();
  if (p >= fns.numeratorDp.size())
    return constantLike(b, da, 0.0);
  SmallVector<Value> atOne = withParams({constantLike(b, da, 1.0), constantLike(b, da, 0.0)});
  Value grad = mul(da, call(fns.numeratorDp[p], atOne));
  if (fns.denominatorDp[p])
    grad = add(grad, mul(db, call(fns.denominatorDp[p], atOne)));
  return grad;
}
