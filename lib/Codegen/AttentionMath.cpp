//===- AttentionMath.cpp - the attention math, emitted in one place -------===//
#include "lib/Codegen/AttentionMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::attn;

Value mlir::attn::constantLike(ImplicitLocOpBuilder &b, Value like, double value) {
  Type type = like.getType();
  auto vector = dyn_cast<VectorType>(type);
  Type element = vector ? vector.getElementType() : type;
  Value scalar = arith::ConstantOp::create(b, element, b.getFloatAttr(element, value));
  return vector ? vector::BroadcastOp::create(b, vector, scalar).getResult() : scalar;
}

/// Row i's last causal key row plus one: i + 1 + positionShift.
static Value causalLimit(ImplicitLocOpBuilder &b, Value i, Value positionShift) {
  Value next = arith::AddIOp::create(b, i, arith::ConstantIndexOp::create(b, 1));
  return positionShift ? arith::AddIOp::create(b, next, positionShift).getResult() : next;
}

Value KeyBounds::causalEnd(ImplicitLocOpBuilder &b, Value i) const {
  Value limit = causalLimit(b, i, positionShift);
  if (positionShift)
    limit = arith::MaxSIOp::create(b, limit, arith::ConstantIndexOp::create(b, 0));
  return arith::MinSIOp::create(b, kvEnd, limit);
}

Value KeyBounds::end(ImplicitLocOpBuilder &b, Value i) const {
  return arith::SelectOp::create(b, isCausal, causalEnd(b, i), kvEnd);
}

Value KeyBounds::causalKeeps(ImplicitLocOpBuilder &b, Value i, Value j) const {
  return arith::OrIOp::create(
      b, arith::XOrIOp::create(b, isCausal, arith::ConstantIntOp::create(b, 1, 1)),
      arith::CmpIOp::create(
          b, arith::CmpIPredicate::sle, j,
          positionShift ? arith::AddIOp::create(b, i, positionShift).getResult() : i));
}

AttentionMath::AttentionMath(ImplicitLocOpBuilder &b, const MathSetup &setup, ValueRange params,
                             ValueRange tables)
    : b(b), setup(setup), params(params), tables(tables) {}

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
  args.append(tables);
  return args;
}

// --- regions ---------------------------------------------------------------------

Value AttentionMath::score(const PairValues &pair) {
  if (!functions().score)
    return pair.raw;
  return call(functions().score,
              withParams({pair.raw, pair.at.b, pair.at.h, pair.at.i, pair.at.j}));
}

Value AttentionMath::maskKeeps(const PairIndices &at) {
  if (functions().mask)
    return call(functions().mask, withParams({at.b, at.h, at.i, at.j}));
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

Value AttentionMath::numerator(Value s, Value shift, const PairIndices &at) {
  return call(functions().numerator, withParams({s, shift, at.b, at.h, at.i, at.j}));
}

Value AttentionMath::denominator(Value s, Value shift, const PairIndices &at) {
  if (!functions().denominator)
    return {};
  return call(functions().denominator, withParams({s, shift, at.b, at.h, at.i, at.j}));
}

Value AttentionMath::phase(Value i, Value j) { return call(functions().phase, {i, j}); }

// --- forward -----------------------------------------------------------------------

Value AttentionMath::stabilizer(const PairValues &pair, Value s) {
  const PairIndices &at = pair.at;
  Value candidate = call(functions().stabilizer, withParams({s, at.b, at.h, at.i, at.j}));
  if (!pair.keep)
    return candidate;
  return arith::SelectOp::create(b, pair.keep, candidate,
                                 constantLike(b, s, -std::numeric_limits<double>::infinity()));
}

Value AttentionMath::numeratorTerm(const PairValues &pair, Value s, Value shift) {
  return masked(pair.keep, numerator(s, shift, pair.at));
}

Value AttentionMath::denominatorTerm(const PairValues &pair, Value s, Value shift) {
  Value h = denominator(s, shift, pair.at);
  return h ? masked(pair.keep, h) : h;
}

Value AttentionMath::rescaled(Value x, Value alpha) { return alpha ? mul(x, alpha) : x; }

bool AttentionMath::carriesSumErrors(Type type) const {
  // Flags that let LLVM reassociate (the kernelised form's sums) would fold the
  // compensation away.
  bool reassociates = bitEnumContainsAny(setup.fastMath, arith::FastMathFlags::reassoc);
  return cast<FloatType>(getElementTypeOrSelf(type)).getFPMantissaWidth() < 53 && !reassociates;
}

AttentionMath::RunningSum AttentionMath::accumulate(RunningSum acc, Value alpha, Value term) {
  Value sum = rescaled(acc.sum, alpha);
  if (!term)
    return {sum, acc.error ? rescaled(acc.error, alpha) : Value()};
  if (!acc.error)
    return {add(sum, term), Value()};
  // Kahan: `error` is what the additions so far have lost (scaled with the sum);
  // adding term − error and measuring what that addition loses keeps it. The
  // arithmetic carries no reassociation flags, so LLVM keeps the order.
  Value corrected = sub(term, rescaled(acc.error, alpha));
  Value next = add(sum, corrected);
  return {next, sub(sub(next, sum), corrected)};
}

SmallVector<Value> AttentionMath::offsetArgs(Value m, const RowIndices &row) {
  return withParams({m, row.b, row.h, row.i});
}

Value AttentionMath::offsetStabilizer(const RowIndices &row) {
  return call(functions().offsetStab, withParams({row.b, row.h, row.i}));
}

Value AttentionMath::offsetRegion(Value m, const RowIndices &row) {
  if (!functions().offset)
    return {};
  return call(functions().offset, offsetArgs(m, row));
}

// --- backward ----------------------------------------------------------------------

Value AttentionMath::gradientTerm(Value numeratorPart, Value denominatorPart,
                                  const BackwardRow &row) {
  if (!denominatorPart)
    return mul(numeratorPart, row.inverseC);
  Value viaDenominator = mul(denominatorPart, row.delta);
  if (!numeratorPart)
    return arith::NegFOp::create(b, mul(viaDenominator, row.inverseC));
  return mul(sub(numeratorPart, viaDenominator), row.inverseC);
}

Value AttentionMath::offsetParamGrad(unsigned p, const BackwardRow &row, const RowIndices &at) {
  const ScalarFunctions &fns = functions();
  if (p >= fns.offsetDp.size() || !fns.offsetDp[p])
    return {};
  return gradientTerm(Value(), call(fns.offsetDp[p], offsetArgs(row.shift, at)), row);
}

AttentionMath::TableGrad AttentionMath::offsetTableGrad(unsigned site, const BackwardRow &row,
                                                        const RowIndices &at) {
  const TableGradSite &read = functions().tableGrads[site];
  assert(read.role == TableGradRole::Offset && "a read of the offset region");
  SmallVector<Value> args = offsetArgs(row.shift, at);
  return {call(read.position, args), gradientTerm(Value(), call(read.derivative, args), row)};
}

AttentionMath::PairGradient AttentionMath::gradient(const PairValues &pair, Value s,
                                                    const BackwardRow &row, Value dP) {
  return PairGradient(*this, pair, s, row, dP);
}

AttentionMath::PairGradient::PairGradient(AttentionMath &math, const PairValues &pair, Value s,
                                          const BackwardRow &row, Value dP)
    : math(math), pair(pair), s(s), dP(dP), row(row) {}

SmallVector<Value> AttentionMath::PairGradient::normalizerArgs() {
  const PairIndices &at = pair.at;
  return math.withParams({s, row.shift, at.b, at.h, at.i, at.j});
}

SmallVector<Value> AttentionMath::PairGradient::scoreArgs() {
  const PairIndices &at = pair.at;
  return math.withParams({pair.raw, at.b, at.h, at.i, at.j});
}

Value AttentionMath::PairGradient::weight() {
  return math.masked(pair.keep, math.mul(math.numerator(s, row.shift, pair.at), row.inverseC));
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

AttentionMath::TableGrad AttentionMath::PairGradient::tableGrad(unsigned site) {
  const TableGradSite &read = math.functions().tableGrads[site];
  SmallVector<Value> args = read.role == TableGradRole::Score ? scoreArgs() : normalizerArgs();
  Value partial = math.call(read.derivative, args);
  Value value;
  switch (read.role) {
  case TableGradRole::Numerator:
    value = math.gradientTerm(math.mul(partial, dP), Value(), row);
    break;
  case TableGradRole::Denominator:
    value = math.gradientTerm(Value(), partial, row);
    break;
  case TableGradRole::Score:
    value = math.mul(scoreGrad(), partial);
    break;
  case TableGradRole::Offset:
    llvm_unreachable("a read of the offset region is a row's, not a pair's (offsetTableGrad)");
  }
  return {math.call(read.position, args), math.masked(pair.keep, value)};
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

Value AttentionMath::linearParamGrad(unsigned p, Value da, Value db, const PairIndices &at) {
  const ScalarFunctions &fns = functions();
  if (p >= fns.numeratorDp.size())
    return constantLike(b, da, 0.0);
  SmallVector<Value> atOne = withParams(
      {constantLike(b, da, 1.0), constantLike(b, da, 0.0), at.b, at.h, at.i, at.j});
  Value grad = mul(da, call(fns.numeratorDp[p], atOne));
  if (fns.denominatorDp[p])
    grad = add(grad, mul(db, call(fns.denominatorDp[p], atOne)));
  return grad;
}
