//===- NormalizerAnalysis.cpp - choose the forward algorithm --------------===//
#include "lib/Analysis/NormalizerAnalysis.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::attn;

namespace {
enum class Degree { Zero, One, Mixed };

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
  /// algorithm must shift. Bounded wrappers such as 1/(1 + e^-s) are not followed.
  void collectStabilised(NormalizerClass &form) const {
    SmallVector<Value> worklist{result};
    llvm::DenseSet<Value> seen;
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      if (of(v) != Degree::One || !seen.insert(v).second)
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
      for (Value operand : op->getOperands())
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
      if (exp && of(exp.getOperand()) == Degree::Zero && div && isPositiveConstant(div.getLhs()) &&
          isBoundedDenominator(div.getRhs()))
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
      return exp && of(exp.getOperand()) == Degree::Zero;
    };
    return (isPositiveConstant(add.getLhs()) && plainExp(add.getRhs())) ||
           (isPositiveConstant(add.getRhs()) && plainExp(add.getLhs()));
  }

  Degree degreeOf(Operation &op) const {
    auto operand = [&](unsigned i) { return of(op.getOperand(i)); };
    auto same = [&](Degree a, Degree b) { return a == b ? a : Degree::Mixed; };
    return TypeSwitch<Operation *, Degree>(&op)
        .Case<arith::ConstantOp>([](auto) { return Degree::Zero; })
        .Case<math::ExpOp>([&](auto) {
          return operand(0) == Degree::Zero ? Degree::One : Degree::Mixed;
        })
        .Case<arith::AddFOp, arith::SubFOp, arith::MaximumFOp, arith::MinimumFOp,
              arith::MaxNumFOp, arith::MinNumFOp>(
            [&](auto) { return same(operand(0), operand(1)); })
        .Case<arith::NegFOp>([&](auto) { return operand(0); })
        .Case<arith::SelectOp>([&](auto) {
          if (operand(0) != Degree::Zero)
            return Degree::Mixed;
          return same(operand(1), operand(2));
        })
        .Case<arith::MulFOp>([&](auto) {
          if (operand(0) == Degree::Mixed || operand(1) == Degree::Mixed)
            return Degree::Mixed;
          int total = (operand(0) == Degree::One) + (operand(1) == Degree::One);
          return total == 0 ? Degree::Zero : total == 1 ? Degree::One : Degree::Mixed;
        })
        .Case<arith::DivFOp>([&](arith::DivFOp div) {
          if (operand(1) == Degree::Zero || isBoundedDenominator(div.getRhs()))
            return operand(0);
          return Degree::Mixed;
        })
        .Default([&](Operation *other) {
          // Any other op (tanh, log, pow, comparisons, casts...) is fine on
          // exp-free operands and scale-dependent on anything else.
          for (Value v : other->getOperands())
            if (of(v) != Degree::Zero)
              return Degree::Mixed;
          return Degree::Zero;
        });
  }

  DenseMap<Value, Degree> degrees;
  Value result;
};
} // namespace

FailureOr<NormalizerClass> mlir::attn::classifyNormalizer(NormalizerOp normalizer) {
  // The op where a region's exp degrees start to mix, reported by name.
  auto reportMixed = [&](Operation *bad, StringRef region) {
    return bad->emitOpError()
           << "in the " << region << " of @" << normalizer.getSymName()
           << " mixes exp-factor degrees (e.g. e^s + 1, e^(e^s), log(e^s), e^s·e^s); "
              "such a normalizer can be neither stabilised online nor accumulated "
              "without overflow";
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

  Degree g = numerator.resultDegree(), h = denominator.resultDegree();
  if (g == Degree::Zero && h == Degree::Zero) {
    result.algorithm = Algorithm::Plain;
    return result;
  }
  if (g != h) {
    Region &exposed = g == Degree::One ? normalizer.getDenominator() : normalizer.getNumerator();
    return exposed.front().getTerminator()->emitOpError()
           << "yields a value without an exp factor while the "
           << (g == Degree::One ? "numerator" : "denominator") << " of @"
           << normalizer.getSymName()
           << " has one in every term: the online algorithm needs both or neither";
  }
  result.algorithm = Algorithm::Online;
  numerator.collectStabilised(result);
  denominator.collectStabilised(result);
  return result;
}

FailureOr<Algorithm> mlir::attn::requireAlgorithm(KernelOp kernel) {
  if (std::optional<Algorithm> algorithm = kernel.getAlgorithm())
    return *algorithm;
  return kernel.emitOpError(
      "has no algorithm: the kernel is not classified; run attn-classify-normalizer first");
}
