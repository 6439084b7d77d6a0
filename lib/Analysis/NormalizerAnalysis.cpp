//===- NormalizerAnalysis.cpp - choose the forward algorithm --------------===//
#include "lib/Analysis/NormalizerAnalysis.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
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
  explicit DegreeAnalysis(Region &region) {
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
  void collectStabilised(NormalizerClass &form) const {
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
      // A product carries the factor of its operand of its own degree: in e^s·e^-|s|
      // (degree 1) the bounded e^-|s| reads as degree 0.
      bool product = isa<arith::MulFOp>(op);
      for (Value operand : op->getOperands())
        if (!product || of(operand) == of(v))
          worklist.push_back(operand);
    }
  }

private:
  static bool isPositiveConstant(Value c) {
    auto cst = c.getDefiningOp<arith::ConstantOp>();
    auto attr = cst ? dyn_cast<FloatAttr>(cst.getValue()) : FloatAttr();
    return attr && attr.getValueAsDouble() > 0.0;
  }

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

  /// Whether `v` is >= 0 (sign > 0) or <= 0 (sign < 0) whatever the score, params
  /// and indices are: the few forms a stable rewrite uses (|x|, x·x, e^x, max with
  /// 0, negations, sums and products of those).
  static bool hasSign(Value v, int sign, unsigned depth = 0) {
    if (depth > 16)
      return false;
    auto same = [&](Value x) { return hasSign(x, sign, depth + 1); };
    auto opposite = [&](Value x) { return hasSign(x, -sign, depth + 1); };
    Operation *op = v.getDefiningOp();
    if (!op)
      return false;
    if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
      auto attr = dyn_cast<FloatAttr>(cst.getValue());
      return attr && (sign > 0 ? attr.getValueAsDouble() >= 0.0 : attr.getValueAsDouble() <= 0.0);
    }
    return TypeSwitch<Operation *, bool>(op)
        .Case<math::AbsFOp, math::ExpOp, math::Exp2Op, math::SqrtOp>(
            [&](auto) { return sign > 0; })
        .Case<arith::NegFOp>([&](auto neg) { return opposite(neg.getOperand()); })
        .Case<arith::AddFOp>([&](auto add) { return same(add.getLhs()) && same(add.getRhs()); })
        .Case<arith::SubFOp>(
            [&](auto sub) { return same(sub.getLhs()) && opposite(sub.getRhs()); })
        .Case<arith::MulFOp>([&](auto mul) {
          if (mul.getLhs() == mul.getRhs())
            return sign > 0;
          bool positive = (hasSign(mul.getLhs(), 1, depth + 1) && hasSign(mul.getRhs(), 1, depth + 1)) ||
                          (hasSign(mul.getLhs(), -1, depth + 1) && hasSign(mul.getRhs(), -1, depth + 1));
          bool negative = (hasSign(mul.getLhs(), 1, depth + 1) && hasSign(mul.getRhs(), -1, depth + 1)) ||
                          (hasSign(mul.getLhs(), -1, depth + 1) && hasSign(mul.getRhs(), 1, depth + 1));
          return sign > 0 ? positive : negative;
        })
        .Case<arith::MaximumFOp, arith::MaxNumFOp>([&](auto max) {
          // max(a, b) >= 0 if either is; <= 0 if both are.
          return sign > 0 ? same(max.getLhs()) || same(max.getRhs())
                          : same(max.getLhs()) && same(max.getRhs());
        })
        .Case<arith::MinimumFOp, arith::MinNumFOp>([&](auto min) {
          return sign < 0 ? same(min.getLhs()) || same(min.getRhs())
                          : same(min.getLhs()) && same(min.getRhs());
        })
        .Case<arith::SelectOp>(
            [&](auto select) { return same(select.getTrueValue()) && same(select.getFalseValue()); })
        .Default([](Operation *) { return false; });
  }

  Degree degreeOf(Operation &op) const {
    auto operand = [&](unsigned i) { return of(op.getOperand(i)); };
    // Operands added, compared or selected between: a bounded e^x takes the degree of
    // the other side (degree 1 next to an exp factor, else degree 0).
    auto same = [&](Degree a, Degree b) {
      if (a == Degree::BoundedExp)
        return b;
      if (b == Degree::BoundedExp)
        return a;
      return a == b ? a : Degree::Mixed;
    };
    return TypeSwitch<Operation *, Degree>(&op)
        .Case<arith::ConstantOp>([](auto) { return Degree::Zero; })
        .Case<math::ExpOp>([&](math::ExpOp exp) {
          if (asFactorFree(operand(0)) != Degree::Zero)
            return Degree::Mixed;
          return hasSign(exp.getOperand(), -1) ? Degree::BoundedExp : Degree::One;
        })
        .Case<arith::AddFOp, arith::SubFOp, arith::MaximumFOp, arith::MinimumFOp,
              arith::MaxNumFOp, arith::MinNumFOp>(
            [&](auto) { return same(operand(0), operand(1)); })
        .Case<arith::NegFOp>([&](auto) { return operand(0); })
        .Case<arith::SelectOp>([&](auto) {
          if (asFactorFree(operand(0)) != Degree::Zero)
            return Degree::Mixed;
          return same(operand(1), operand(2));
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
        .Default([&](Operation *other) {
          // Any other op (tanh, log, pow, comparisons, casts...) is fine on
          // exp-free or bounded operands and scale-dependent on anything else.
          for (Value v : other->getOperands())
            if (asFactorFree(of(v)) != Degree::Zero)
              return Degree::Mixed;
          return Degree::Zero;
        });
  }

  DenseMap<Value, Degree> degrees;
};
} // namespace

static LogicalResult classifyOffset(NormalizerOp normalizer, NormalizerClass &form);

/// The stable rewrite of the form that mixes exp-factor degrees at `bad`, where one
/// is known; empty otherwise.
static std::string stableRewrite(Operation *bad) {
  auto isExp = [](Value v) { return v.getDefiningOp<math::ExpOp>() != nullptr; };
  auto isConstant = [](Value v) { return v.getDefiningOp<arith::ConstantOp>() != nullptr; };
  const char *softplus =
      "log(1 + e^x) is softplus, which overflows for large x as written: write "
      "max(x, 0) + log1p(e^(-|x|)) (arith.maximumf, math.absf, arith.negf, math.exp, "
      "math.log1p), which is bounded and accepted";
  if (isa<math::Log1pOp>(bad) && isExp(bad->getOperand(0)))
    return softplus;
  if (isa<math::LogOp>(bad) && isExp(bad->getOperand(0)))
    return "log(e^x) is x: use x itself";
  if (auto add = dyn_cast<arith::AddFOp>(bad)) {
    bool constantPlusExp = (isConstant(add.getLhs()) && isExp(add.getRhs())) ||
                           (isExp(add.getLhs()) && isConstant(add.getRhs()));
    bool underLog = llvm::any_of(bad->getUsers(), [](Operation *user) {
      return isa<math::LogOp>(user);
    });
    if (constantPlusExp && underLog)
      return softplus;
    if (constantPlusExp)
      return "e^x + c cannot be rescaled by a running max: a constant added to the "
             "denominator's sum is `epsilon c` (C_i = c + Σ_j h), and the sigmoid "
             "e^x / (1 + e^x) is bounded written as 1 / (1 + e^(-x))";
  }
  if (auto mul = dyn_cast<arith::MulFOp>(bad); mul && isExp(mul.getLhs()) && isExp(mul.getRhs()))
    return "e^a·e^b is e^(a + b): write one math.exp of the sum";
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

FailureOr<NormalizerClass> mlir::attn::classifyNormalizer(NormalizerOp normalizer) {
  if (failed(normalizer.requireExpanded()))
    return failure();
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
  if (!normalizer.hasDenominatorRegion()) {
    // C is constant or a count: nothing rescales it, so accumulate as written.
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
        << "stable rewrite: write β as one exp factor e^y: c + e^x is e^y with y = "
           "log(c + e^x) = max(x, log c) + log1p(e^(-|x - log c|)), which is bounded and "
           "accepted";
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

FailureOr<Algorithm> mlir::attn::requireAlgorithm(KernelOp kernel) {
  if (std::optional<Algorithm> algorithm = kernel.getAlgorithm())
    return *algorithm;
  return kernel.emitOpError(
      "has no algorithm: the kernel is not classified; run attn-classify-normalizer first");
}
