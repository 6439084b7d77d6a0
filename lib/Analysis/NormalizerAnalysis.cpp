//===- NormalizerAnalysis.cpp - choose the forward algorithm --------------===//
#include "lib/Analysis/NormalizerAnalysis.h"

#include "lib/Analysis/RangeAnalysis.h"
#include "lib/Analysis/SignAnalysis.h"
#include "lib/Analysis/ThresholdAnalysis.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::attn;

namespace {
/// Zero: no exp factor. One: one exp factor per additive term. Mixed: neither.
/// BoundedExp: e^x with x provably <= 0 (e^-|s|, e^-(s·s)), in (0, 1] whatever the
/// scale of s: it reads as degree 0 where an exp factor would mix (log1p(e^-|s|),
/// 1 + e^-|s|, e^s·e^-|s|) and as degree 1 where it joins other exp factors
/// (e^s + e^-|s|) or stands alone, where the online algorithm's shift also guards
/// it against underflow.
enum class Degree { Zero, One, Mixed, BoundedExp };

/// The degree `d` takes where it must not carry an exp factor.
Degree asFactorFree(Degree d) { return d == Degree::BoundedExp ? Degree::Zero : d; }

/// Exp-degree of every value in one region, and where it first went mixed.
class DegreeAnalysis {
public:
  /// `argumentSigns`: the signs of the region's arguments where known (the score's
  /// from the kernel's score, see SignAnalysis).
  explicit DegreeAnalysis(Region &region, ArrayRef<SignSet> argumentSigns = {})
      : signs(region, argumentSigns) {
    for (BlockArgument arg : region.front().getArguments())
      degrees[arg] = Degree::Zero;
    for (Operation &op : region.front().without_terminator()) {
      Degree d = degreeOf(op);
      for (Value result : op.getResults())
        degrees[result] = d;
    }
    result = region.front().getTerminator()->getOperand(0);
  }

  Degree of(Value v) const { return degrees.lookup(v); }
  Degree resultDegree() const { return of(result); }
  /// The value the region yields.
  Value result;

  /// When the result is mixed: the op where mixing starts on its way to the
  /// result (mixed intermediates inside bounded wrappers do not count).
  Operation *mixedOrigin() const {
    if (resultDegree() != Degree::Mixed)
      return nullptr;
    Operation *op = result.getDefiningOp();
    while (true) {
      auto mixedOperand = llvm::find_if(op->getOperands(), [&](Value v) {
        return of(v) == Degree::Mixed && v.getDefiningOp();
      });
      if (mixedOperand == op->operand_end())
        return op;
      op = (*mixedOperand).getDefiningOp();
    }
  }

  /// The exp ops whose factor reaches the result, i.e. the ones the online
  /// algorithm must shift, the result read as degree 1. Bounded wrappers such as
  /// 1/(1 + e^-s) are not followed, nor a bounded e^x multiplying an exp factor
  /// (it reads as degree 0 there).
  /// With `liftable`, also the constants joined to those exp factors that
  /// rewriteToStableForms lifts to ±e^(log|c|) (see isLiftableConstant).
  void collectStabilised(NormalizerClass &form,
                         SmallVectorImpl<OpOperand *> *liftable = nullptr) const {
    SmallVector<Value> worklist{result};
    llvm::DenseSet<Value> seen;
    auto carries = [&](Value v) {
      return of(v) == Degree::One || of(v) == Degree::BoundedExp;
    };
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      if (!carries(v) || !seen.insert(v).second)
        continue;
      Operation *op = v.getDefiningOp();
      if (!op)
        continue;
      if (isa<math::ExpOp>(op)) {
        form.stabilisedExps.insert(op);
        continue;
      }
      if (std::optional<StabilisedProduct> product = matchStabilisedProduct(op)) {
        form.stabilisedProducts[op] = *product;
        continue;
      }
      if (auto div = dyn_cast<arith::DivFOp>(op)) {
        worklist.push_back(div.getLhs());
        continue;
      }
      if (liftable)
        for (OpOperand &use : op->getOpOperands())
          if (isLiftableConstant(use))
            liftable->push_back(&use);
      // A product carries the factor of its operand of its own degree: in e^s·e^-|s|
      // (degree 1) the bounded e^-|s| reads as degree 0.
      bool product = isa<arith::MulFOp>(op);
      for (Value operand : op->getOperands())
        if (!product || of(operand) == of(v))
          worklist.push_back(operand);
    }
  }

private:
  static bool isPositiveConstant(Value c) { return constantNumber(c).value_or(0.0) > 0.0; }

  /// e^x · (c / (k + e^u)), either operand order, c > 0 constant.
  std::optional<StabilisedProduct> matchStabilisedProduct(Operation *op) const {
    auto mul = dyn_cast<arith::MulFOp>(op);
    if (!mul)
      return std::nullopt;
    for (auto [e, w] : {std::pair(mul.getLhs(), mul.getRhs()), std::pair(mul.getRhs(), mul.getLhs())}) {
      auto exp = e.getDefiningOp<math::ExpOp>();
      auto div = w.getDefiningOp<arith::DivFOp>();
      if (exp && asFactorFree(of(exp.getOperand())) == Degree::Zero && div &&
          isPositiveConstant(div.getLhs()) && isBoundedDenominator(div.getRhs()))
        return StabilisedProduct{exp, div};
    }
    return std::nullopt;
  }

  /// c + exp(x) or exp(x) + c with a positive constant c: a denominator that keeps
  /// a quotient bounded whatever x is, so the quotient has the numerator's degree.
  bool isBoundedDenominator(Value v) const {
    auto add = v.getDefiningOp<arith::AddFOp>();
    if (!add)
      return false;
    auto plainExp = [&](Value e) {
      auto exp = e.getDefiningOp<math::ExpOp>();
      return exp && asFactorFree(of(exp.getOperand())) == Degree::Zero;
    };
    return (isPositiveConstant(add.getLhs()) && plainExp(add.getRhs())) ||
           (isPositiveConstant(add.getRhs()) && plainExp(add.getLhs()));
  }

public:
  /// The operand positions of `op` that must share a degree (the two sides of a
  /// sum, max or min, the two branches of a select); none for other ops.
  static std::optional<std::pair<unsigned, unsigned>> joinedOperands(Operation &op) {
    if (isa<arith::SelectOp>(op))
      return std::pair(1u, 2u);
    if (isa<arith::AddFOp, arith::SubFOp, arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp,
            arith::MinNumFOp>(op))
      return std::pair(0u, 1u);
    return std::nullopt;
  }

  /// Whether `use` is a nonzero constant joined to an exp factor (see
  /// joinedOperands): c = ±e^(log|c|), which rewriteToStableForms lifts.
  bool isLiftableConstant(OpOperand &use) const {
    Operation &op = *use.getOwner();
    auto joined = joinedOperands(op);
    unsigned k = use.getOperandNumber();
    if (!joined || (k != joined->first && k != joined->second))
      return false;
    unsigned other = joined->first + joined->second - k;
    std::optional<double> c = constantNumber(use.get());
    return c && *c != 0.0 && of(op.getOperand(other)) == Degree::One;
  }

private:
  Degree degreeOf(Operation &op) const {
    auto operand = [&](unsigned i) { return of(op.getOperand(i)); };
    // Operands added, compared or selected between (positions `a` and `b`): a
    // bounded e^x takes the degree of the other side (degree 1 next to an exp
    // factor, else degree 0); 0 is 0·e^m and a nonzero constant c is ±e^(log|c|)
    // beside an exp factor (lifted by rewriteToStableForms).
    auto same = [&](unsigned a, unsigned b) {
      Degree da = operand(a), db = operand(b);
      if (da == Degree::BoundedExp)
        return db;
      if (db == Degree::BoundedExp)
        return da;
      if (da == db)
        return da;
      if ((da == Degree::One && constantNumber(op.getOperand(b))) ||
          (db == Degree::One && constantNumber(op.getOperand(a))))
        return Degree::One;
      return Degree::Mixed;
    };
    return TypeSwitch<Operation *, Degree>(&op)
        .Case<arith::ConstantOp>([](auto) { return Degree::Zero; })
        .Case<math::ExpOp>([&](math::ExpOp exp) {
          if (asFactorFree(operand(0)) != Degree::Zero)
            return Degree::Mixed;
          return signs.of(exp.getOperand()).isNonPositive() ? Degree::BoundedExp : Degree::One;
        })
        .Case<arith::AddFOp, arith::SubFOp, arith::MaximumFOp, arith::MinimumFOp,
              arith::MaxNumFOp, arith::MinNumFOp>([&](auto) { return same(0, 1); })
        // |c·e^x| = |c|·e^x: the sign is the factor-free part's.
        .Case<arith::NegFOp, math::AbsFOp>([&](auto) { return operand(0); })
        .Case<arith::SelectOp>([&](auto) {
          if (asFactorFree(operand(0)) != Degree::Zero)
            return Degree::Mixed;
          return same(1, 2);
        })
        .Case<arith::MulFOp>([&](auto) {
          Degree a = operand(0), b = operand(1);
          if (a == Degree::Mixed || b == Degree::Mixed)
            return Degree::Mixed;
          // A bounded factor times a factor-free one stays bounded; next to an exp
          // factor, or to another bounded factor, it reads as degree 0.
          if ((a == Degree::BoundedExp && b == Degree::Zero) ||
              (a == Degree::Zero && b == Degree::BoundedExp))
            return Degree::BoundedExp;
          int total = (a == Degree::One) + (b == Degree::One);
          return total == 0 ? Degree::Zero : total == 1 ? Degree::One : Degree::Mixed;
        })
        .Case<arith::DivFOp>([&](arith::DivFOp div) {
          // Dividing by a bounded e^x is multiplying by an unbounded e^-x.
          if (operand(1) == Degree::Zero || isBoundedDenominator(div.getRhs()))
            return operand(0);
          return Degree::Mixed;
        })
        // Ops that grow exponentially and that rewriteToStableForms turns into
        // math.exp: never factor-free, whatever their operand.
        .Case<math::Exp2Op, math::ExpM1Op, math::SinhOp, math::CoshOp, math::PowFOp,
              math::FPowIOp, math::IPowIOp>([&](Operation *grows) {
          if (isa<math::ExpM1Op>(grows) && asFactorFree(operand(0)) == Degree::Zero &&
              signs.of(grows->getOperand(0)).isNonPositive())
            return Degree::Zero; // in (-1, 0]
          if (isa<math::PowFOp, math::FPowIOp, math::IPowIOp>(grows) &&
              asFactorFree(operand(0)) == Degree::Zero &&
              matchPattern(grows->getOperand(1), m_Constant()))
            return Degree::Zero; // a power: polynomial in its base
          return Degree::Mixed;
        })
        .Default([&](Operation *other) {
          // Any other op (tanh, log, comparisons, casts...) is fine on exp-free or
          // bounded operands and scale-dependent on anything else.
          for (Value v : other->getOperands())
            if (asFactorFree(of(v)) != Degree::Zero)
              return Degree::Mixed;
          return Degree::Zero;
        });
  }

  SignAnalysis signs;
  DenseMap<Value, Degree> degrees;
};
} // namespace

static LogicalResult classifyOffset(NormalizerOp normalizer, NormalizerClass &form);

SmallVector<OpOperand *> mlir::attn::constantsJoiningExpFactors(Region &region) {
  SmallVector<OpOperand *> liftable;
  DegreeAnalysis degrees(region);
  if (degrees.resultDegree() == Degree::One) {
    NormalizerClass ignored;
    degrees.collectStabilised(ignored, &liftable);
  }
  return liftable;
}

/// The stable rewrite of the form that mixes exp-factor degrees at `bad`, where one
/// is known; empty otherwise.
static std::string stableRewrite(Operation *bad) {
  auto isExp = [](Value v) { return v.getDefiningOp<math::ExpOp>() != nullptr; };
  if (auto add = dyn_cast<arith::AddFOp>(bad)) {
    bool valuePlusExp = isExp(add.getLhs()) || isExp(add.getRhs());
    if (valuePlusExp)
      return "e^x + y with a y that is not a constant cannot be rescaled by a running max "
             "(a constant c is accepted: it is ±e^(log|c|)): a row constant added to the "
             "denominator's sum is `epsilon c` or an `offset` region, a param p is e^(log p) "
             "only where p > 0 (write e^q with a param q instead), and the sigmoid "
             "e^x / (1 + e^x) is bounded written as 1 / (1 + e^(-x))";
  }
  if (isa<arith::DivFOp>(bad))
    return "a quotient of exp factors is scale-dependent: tanh(x) = (e^x - e^-x) / (e^x + "
           "e^-x) is math.tanh, a ratio e^a / e^b is e^(a - b), and a / (c + e^x) with a "
           "constant c > 0 is bounded and accepted";
  if (isa<arith::CmpFOp>(bad))
    return "compare the exponents instead: e^a < e^b is a < b";
  if (isa<math::ExpOp>(bad) && isExp(bad->getOperand(0)))
    return "e^(e^x) grows doubly exponentially, beyond any rescaling: bound the inner "
           "exponent first, e.g. e^(tanh(x)) or e^(e^(-|x|))";
  return {};
}

/// A log_survival denominator: the weights are discounted by a scan over the keys
/// and nothing rescales them, so the numerator and the log-survival must not carry
/// an unbounded exp factor (σ(s) = 1 / (1 + e^-s) and −softplus(s) written
/// −max(s, 0) − log1p(e^-|s|) have none; their signs are checked with the score's,
/// verifyRowNumerics).
static FailureOr<NormalizerClass>
classifyScan(NormalizerOp normalizer, DegreeAnalysis &numerator,
             function_ref<InFlightDiagnostic(Operation *, StringRef)> reportMixed) {
  DegreeAnalysis survival(normalizer.getDenominator());
  if (Operation *bad = survival.mixedOrigin())
    return reportMixed(bad, "log_survival");
  for (auto [degrees, role] : {std::pair(&numerator, "numerator"),
                               std::pair(&survival, "log_survival")}) {
    if (asFactorFree(degrees->resultDegree()) == Degree::Zero)
      continue;
    Operation *yield = degrees->result.getParentRegion()->front().getTerminator();
    InFlightDiagnostic error =
        yield->emitOpError() << "yields an exp factor in the " << role << " of @"
                             << normalizer.getSymName()
                             << ", a scan normalizer: nothing rescales a scan's weights, so "
                                "e^s would overflow";
    error.attachNote(yield->getLoc())
        << "stable rewrite: stick-breaking's numerator is σ(s) = 1 / (1 + e^-s) and its "
           "log-survival log(1 − σ(s)) = −softplus(s) = −max(s, 0) − log1p(e^-|s|)";
    return error;
  }
  NormalizerClass result;
  result.algorithm = Algorithm::Scan;
  return result;
}

FailureOr<NormalizerClass> mlir::attn::classifyNormalizer(NormalizerOp normalizer) {
  if (failed(normalizer.requireExpanded()))
    return failure();
  if (normalizer.getDenominatorKind() == DenominatorKind::Threshold) {
    // g is evaluated at s - τ_i <= x_c only where it is not 0: nothing to stabilise.
    if (failed(verifyThresholdNumerator(normalizer)))
      return failure();
    NormalizerClass implicit;
    implicit.algorithm = Algorithm::Implicit;
    return implicit;
  }
  // The op where a region's exp degrees start to mix, reported by name.
  auto reportMixed = [&](Operation *bad, StringRef region) {
    InFlightDiagnostic error =
        bad->emitOpError() << "in the " << region << " of @" << normalizer.getSymName()
                           << " mixes exp-factor degrees (e.g. e^s + 1, e^(e^s), log(e^s), "
                              "e^s·e^s); such a normalizer can be neither stabilised online "
                              "nor accumulated without overflow";
    if (std::string rewrite = stableRewrite(bad); !rewrite.empty())
      error.attachNote(bad->getLoc()) << "stable rewrite: " << rewrite;
    return error;
  };
  DegreeAnalysis numerator(normalizer.getNumerator());
  if (Operation *bad = numerator.mixedOrigin())
    return reportMixed(bad, "numerator");

  NormalizerClass result;
  if (normalizer.getDenominatorKind() == DenominatorKind::LogSurvival)
    return classifyScan(normalizer, numerator, reportMixed);
  if (!normalizer.hasDenominatorRegion()) {
    // C is constant or a count: nothing rescales it, so accumulate as written
    // (verifyRowNumerics refuses a g that can overflow, knowing the kernel's score).
    result.algorithm = Algorithm::Plain;
    return result;
  }

  DegreeAnalysis denominator(normalizer.getDenominator());
  if (Operation *bad = denominator.mixedOrigin())
    return reportMixed(bad, "denominator");

  // A bounded e^x yielded alone is stabilised with an exp factor on the other side,
  // or when both sides are bounded (the shift guards their sum against underflow).
  Degree g = numerator.resultDegree(), h = denominator.resultDegree();
  if (g == Degree::BoundedExp)
    g = h == Degree::Zero ? Degree::Zero : Degree::One;
  if (h == Degree::BoundedExp)
    h = g == Degree::Zero ? Degree::Zero : Degree::One;
  if (g == Degree::Zero && h == Degree::Zero) {
    result.algorithm = Algorithm::Plain;
    if (failed(classifyOffset(normalizer, result)))
      return failure();
    return result;
  }
  if (g != h) {
    Region &exposed = g == Degree::One ? normalizer.getDenominator() : normalizer.getNumerator();
    Operation *yield = exposed.front().getTerminator();
    InFlightDiagnostic error = yield->emitOpError()
                               << "yields a value without an exp factor while the "
                               << (g == Degree::One ? "numerator" : "denominator") << " of @"
                               << normalizer.getSymName()
                               << " has one in every term: the online algorithm needs both or "
                                  "neither";
    error.attachNote(yield->getLoc())
        << "stable rewrite: give both an exp factor (h = e^s, softmax-like) or neither "
           "(g = s, linear-like); a weight over a constant or a count "
           "(`denominator constant 1.0`, `denominator count`) may have one in g alone";
    return error;
  }
  result.algorithm = Algorithm::Online;
  numerator.collectStabilised(result);
  denominator.collectStabilised(result);
  if (failed(classifyOffset(normalizer, result)))
    return failure();
  return result;
}

/// The row offset β of `normalizer` (if it has one) under `form`'s algorithm:
/// online, β is one exp factor (stabilised like g and h) or a positive constant;
/// plain, β has no exp factor.
static LogicalResult classifyOffset(NormalizerOp normalizer, NormalizerClass &form) {
  if (!normalizer.hasOffsetRegion())
    return success();
  Region &region = normalizer.getOffset();
  DegreeAnalysis beta(region);
  if (Operation *bad = beta.mixedOrigin()) {
    InFlightDiagnostic error = bad->emitOpError()
                               << "in the offset of @" << normalizer.getSymName()
                               << " mixes exp-factor degrees (e.g. e^x + 1, e^(e^x)); a row "
                                  "offset is one exp factor or has none";
    error.attachNote(bad->getLoc())
        << "stable rewrite: write β as exp factors and constants (e^x + c, e^x - e^y), or "
           "as one exp factor e^y (a sink); a value that is neither joins no running max";
    return error;
  }
  Operation *yield = region.front().getTerminator();
  if (form.algorithm == Algorithm::Plain) {
    if (asFactorFree(beta.resultDegree()) == Degree::Zero)
      return success();
    InFlightDiagnostic error =
        yield->emitOpError() << "yields an exp factor in the offset of @"
                             << normalizer.getSymName()
                             << ", whose numerator and denominator have none: a plain "
                                "normalizer does not stabilise, so its offset must not have "
                                "one either";
    error.attachNote(yield->getLoc())
        << "stable rewrite: a constant e^c is that number (`epsilon` with its value); "
           "otherwise give the numerator and denominator exp factors too";
    return error;
  }
  if (beta.resultDegree() == Degree::One || beta.resultDegree() == Degree::BoundedExp) {
    beta.collectStabilised(form);
    return success();
  }
  auto constant = beta.result.getDefiningOp<arith::ConstantOp>();
  auto value = constant ? dyn_cast<FloatAttr>(constant.getValue()) : FloatAttr();
  if (value && value.getValueAsDouble() > 0.0) {
    form.offsetConstant = value.getValueAsDouble();
    return success();
  }
  InFlightDiagnostic error =
      yield->emitOpError() << "yields a value without an exp factor in the offset of @"
                           << normalizer.getSymName()
                           << ", an online normalizer: its offset must be one exp factor e^x "
                              "or a positive constant, so that its exponent joins the running "
                              "max";
  error.attachNote(yield->getLoc())
      << "stable rewrite: a positive β is e^(log β): yield math.exp of its logarithm "
         "(sinks: β = e^(sinks[h]) reads the logits, not their exp)";
  return error;
}

/// The signs the score s can take where the normalizer reads it: the contraction's
/// (a dot product of feature maps φ > 0 or φ >= 0 has φ's sign, at a positive
/// scale; anything else any sign) through the mod region.
static SignSet scoreSigns(KernelOp kernel) {
  ScoreOp score = kernel.getScoreOp();
  if (!score)
    return SignSet::any();
  SignSet contracted = SignSet::any();
  bool dotProduct = score.getContract() == ContractKind::Dot ||
                    score.getContract() == ContractKind::ScaledDot;
  bool positiveScale = !score.getScale() || score.getScale()->convertToDouble() > 0.0;
  if (score.hasFeatureMap() && dotProduct && positiveScale) {
    SignSet phi = SignAnalysis(score.getFeature()).ofResult();
    if (phi.isNonNegative())
      contracted = phi;
  }
  if (!score.hasMod())
    return contracted;
  return SignAnalysis(score.getMod(), {contracted}).ofResult();
}

/// Whether a summed denominator C_i = β + Σ_j h can be 0 for some input where s
/// has `score`'s signs: h > 0 everywhere, or h >= 0 with an `epsilon` or an offset
/// > 0, cannot. Otherwise an error naming the fix, unless the normalizer says
/// `assume_nonzero_denominator`.
static LogicalResult verifyDenominatorCannotVanish(KernelOp kernel, NormalizerOp normalizer,
                                                   SignSet score) {
  if (normalizer.getDenominatorKind() != DenominatorKind::Sum ||
      normalizer.getAssumeNonzeroDenominator())
    return success();
  SignSet h = SignAnalysis(normalizer.getDenominator(), {score}).ofResult();
  if (h == SignSet::positive())
    return success();
  bool guarded = false;
  if (std::optional<APFloat> epsilon = normalizer.getEpsilon())
    guarded = epsilon->convertToDouble() > 0.0;
  if (normalizer.hasOffsetRegion())
    guarded = SignAnalysis(normalizer.getOffset()).ofResult() == SignSet::positive();
  // A guard keeps ε + Σ_j h from 0 where h >= 0; where h can be negative too, the
  // analysis cannot tell (linear attention's φ(q)·φ(k) with a select-form φ > 0),
  // and the guard the user wrote is taken as their statement that it holds.
  if (guarded)
    return success();
  InFlightDiagnostic error =
      kernel.emitOpError() << "divides by C_i = Σ_j h of @" << normalizer.getSymName()
                           << ", which can be 0: h is " << h.describe() << " where s is "
                           << score.describe()
                           << ", and nothing keeps the sum from 0 (a zero row gives NaN "
                              "outputs)";
  error.attachNote(normalizer.getDenominator().front().getTerminator()->getLoc())
      << (h.isNonNegative()
              ? "add `epsilon 1.0e-6` to the denominator (C_i = ε + Σ_j h), or an offset "
                "region that is > 0"
              : "h takes both signs, so even ε + Σ_j h can cancel to 0: make h >= 0 (s·s, "
                "|s|, max(s, 0), e^s) and add `epsilon 1.0e-6`")
      << "; if your inputs guarantee C_i != 0, declare the normalizer with "
         "`attributes {assume_nonzero_denominator}`";
  return error;
}

/// No region of `normalizer` returns inf where |s| <= 1e4 (with `score`'s signs) and
/// params and table reads are within ±1e4: evaluated as the kernel runs it, online
/// regions with their stabilised exp factors e^(x - m) in [0, 1] (RangeAnalysis.h).
static LogicalResult verifyNoOverflow(KernelOp kernel, NormalizerOp normalizer, SignSet score) {
  FailureOr<NormalizerClass> form = classifyNormalizer(normalizer);
  if (failed(form))
    return failure();
  llvm::SmallPtrSet<Operation *, 8> stabilised(form->stabilisedExps.begin(),
                                              form->stabilisedExps.end());
  for (auto &product : form->stabilisedProducts)
    stabilised.insert(product.first);
  const double bound = kGuaranteedScoreMagnitude;
  Range scoreRange{score.isNonNegative() ? 0.0 : -bound, score.isNonPositive() ? 0.0 : bound};
  for (auto [region, role] : {std::pair(&normalizer.getNumerator(), "numerator"),
                              std::pair(&normalizer.getDenominator(), "denominator"),
                              std::pair(&normalizer.getOffset(), "offset")}) {
    if (region->empty())
      continue;
    RangeAnalysis ranges(*region, stabilised, scoreRange);
    Operation *origin = ranges.overflowOrigin();
    if (!origin)
      continue;
    Type type = region->front().getTerminator()->getOperand(0).getType();
    InFlightDiagnostic error =
        origin->emitOpError() << "can exceed the largest " << type << " in the " << role
                              << " of @" << normalizer.getSymName() << " (kernel @"
                              << kernel.getSymName()
                              << ") where |s| <= 1e4 and params and table reads are within "
                                 "±1e4: the kernel would return inf or NaN";
    error.attachNote(origin->getLoc())
        << "bound the growth (tanh, a lower power, e^-|x|, e^min(x, c), a score mod <= 0), "
           "or write it as an exp factor e^x over a summed denominator, which the online "
           "algorithm rescales";
    return error;
  }
  return success();
}

/// A scan's survivals e^d are at most 1 (d <= 0 where s has `score`'s signs): a
/// survival above 1 would let the weights grow without bound over the keys.
static LogicalResult verifySurvivalAtMostOne(NormalizerOp normalizer, SignSet score) {
  if (normalizer.getDenominatorKind() != DenominatorKind::LogSurvival)
    return success();
  SignSet d = SignAnalysis(normalizer.getDenominator(), {score}).ofResult();
  if (d.isNonPositive())
    return success();
  Operation *yield = normalizer.getDenominator().front().getTerminator();
  InFlightDiagnostic error = yield->emitOpError()
                             << "yields a log-survival of @" << normalizer.getSymName()
                             << " that is " << d.describe()
                             << " where s is " << score.describe()
                             << "; a log-survival must be <= 0 (a survival in [0, 1])";
  error.attachNote(yield->getLoc())
      << "stick-breaking's is log(1 − σ(s)) = −softplus(s) = −max(s, 0) − log1p(e^-|s|)";
  return error;
}

LogicalResult mlir::attn::verifyRowNumerics(KernelOp kernel) {
  NormalizerOp normalizer = kernel.getNormalizerOp();
  if (!normalizer)
    return success();
  SignSet score = scoreSigns(kernel);
  if (failed(verifySurvivalAtMostOne(normalizer, score)))
    return failure();
  if (failed(verifyDenominatorCannotVanish(kernel, normalizer, score)))
    return failure();
  return verifyNoOverflow(kernel, normalizer, score);
}

FailureOr<Algorithm> mlir::attn::requireAlgorithm(KernelOp kernel) {
  if (std::optional<Algorithm> algorithm = kernel.getAlgorithm())
    return *algorithm;
  return kernel.emitOpError(
      "has no algorithm: the kernel is not classified; run attn-classify-normalizer first");
}
