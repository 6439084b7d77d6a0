//===- StableForms.cpp - exponentials in the forms the classifier reads ---===//
#include "lib/Transforms/StableForms.h"

#include "lib/Analysis/NormalizerAnalysis.h"
#include "lib/Analysis/SignAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

using namespace mlir;
using namespace mlir::attn;

namespace {
class StableFormRewriter {
public:
  explicit StableFormRewriter(NormalizerOp normalizer) : normalizer(normalizer) {}

  LogicalResult run() {
    for (Region *region : {&normalizer.getNumerator(), &normalizer.getDenominator(),
                           &normalizer.getOffset()}) {
      if (region->empty())
        continue;
      if (failed(rewriteOps(*region)))
        return failure();
      liftConstants(*region);
      eraseDeadOps(*region);
    }
    if (applied.empty())
      return success();
    llvm::SetVector<StringRef> rules;
    if (ArrayAttr previous = normalizer.getRewritesAttr())
      rules.insert_range(previous.getAsValueRange<StringAttr>());
    rules.insert(applied.begin(), applied.end());
    normalizer.setRewritesAttr(Builder(normalizer).getStrArrayAttr(rules.getArrayRef()));
    return success();
  }

private:
  Value constant(OpBuilder &b, Location loc, Type type, double value) {
    return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, value));
  }
  Value exp(OpBuilder &b, Location loc, Value x) { return math::ExpOp::create(b, loc, x); }
  /// log c for a constant c > 0, as math.log of c rather than a folded constant: the
  /// region's constants are of its float type (f32), and the log is then evaluated
  /// at the type the kernel is instantiated at (ln 2 exact in f64 kernels too).
  Value logOf(OpBuilder &b, Location loc, Type type, double c) {
    if (c == 1.0)
      return constant(b, loc, type, 0.0);
    return math::LogOp::create(b, loc, constant(b, loc, type, c));
  }
  Value scaled(OpBuilder &b, Location loc, Value x, double factor) {
    return arith::MulFOp::create(b, loc, x, constant(b, loc, x.getType(), factor));
  }

  /// log(c + e^y) = max(z, 0) + log1p(e^-|z|) + log c with z = y - log c.
  Value softplus(OpBuilder &b, Location loc, Value y, double c) {
    Type t = y.getType();
    Value z = c == 1.0 ? y : arith::SubFOp::create(b, loc, y, logOf(b, loc, t, c)).getResult();
    Value positivePart = arith::MaximumFOp::create(b, loc, z, constant(b, loc, t, 0.0));
    Value decay = exp(b, loc, arith::NegFOp::create(b, loc, math::AbsFOp::create(b, loc, z)));
    Value result = arith::AddFOp::create(b, loc, positivePart, math::Log1pOp::create(b, loc, decay));
    if (c != 1.0)
      result = arith::AddFOp::create(b, loc, result, logOf(b, loc, t, c));
    return result;
  }

  /// The stable form of `op`, built before it; null where `op` stays as written.
  FailureOr<Value> rewrite(Operation &op, const SignAnalysis &signs) {
    OpBuilder b(&op);
    Location loc = op.getLoc();
    auto expArgument = [](Value v) -> Value {
      auto e = v.getDefiningOp<math::ExpOp>();
      return e ? e.getOperand() : Value();
    };
    if (auto exp2 = dyn_cast<math::Exp2Op>(op)) {
      applied.insert("exp2(x) = e^(x*ln 2)");
      Value x = exp2.getOperand();
      return exp(b, loc, arith::MulFOp::create(b, loc, x, logOf(b, loc, x.getType(), 2.0)));
    }
    if (auto pow = dyn_cast<math::PowFOp>(op)) {
      Value base = pow.getLhs(), exponent = pow.getRhs();
      if (std::optional<double> c = constantNumber(exponent)) {
        Value x = expArgument(base);
        if (!x)
          return Value(); // a power: polynomial in its base
        applied.insert("powf(e^x, c) = e^(c*x)");
        return exp(b, loc, scaled(b, loc, x, *c));
      }
      if (std::optional<double> c = constantNumber(base)) {
        if (!(*c > 0.0))
          return op.emitOpError() << "has the constant base " << *c
                                  << " and a variable exponent, which is NaN for non-integer "
                                     "exponents and cannot be stabilised; write e^(x·log c) "
                                     "with a base c > 0 (math.exp), or select the sign yourself";
        applied.insert("powf(c, x) = e^(x*ln c)");
        return exp(b, loc,
                   arith::MulFOp::create(b, loc, exponent, logOf(b, loc, exponent.getType(), *c)));
      }
      applied.insert("powf(a, x) = e^(x*log a)");
      return exp(b, loc,
                 arith::MulFOp::create(b, loc, exponent, math::LogOp::create(b, loc, base)));
    }
    if (isa<math::FPowIOp, math::IPowIOp>(op) && !matchPattern(op.getOperand(1), m_Constant()))
      return op.emitOpError() << "raises to a variable integer power, which grows exponentially "
                                 "in the exponent and cannot be stabilised; write a constant "
                                 "exponent, or e^(n·log|x|) with math.exp";
    if (auto expm1 = dyn_cast<math::ExpM1Op>(op)) {
      if (signs.of(expm1.getOperand()).isNonPositive())
        return Value(); // in (-1, 0]: bounded, and exact near 0 as written
      applied.insert("expm1(x) = e^x - e^0");
      Value e = exp(b, loc, expm1.getOperand());
      return arith::SubFOp::create(b, loc, e, constant(b, loc, e.getType(), 1.0)).getResult();
    }
    if (isa<math::SinhOp, math::CoshOp>(op)) {
      bool sinh = isa<math::SinhOp>(op);
      applied.insert(sinh ? "sinh(x) = (e^x - e^-x)*0.5" : "cosh(x) = (e^x + e^-x)*0.5");
      Value x = op.getOperand(0);
      Value up = exp(b, loc, x), down = exp(b, loc, arith::NegFOp::create(b, loc, x));
      Value both = sinh ? arith::SubFOp::create(b, loc, up, down).getResult()
                        : arith::AddFOp::create(b, loc, up, down).getResult();
      return scaled(b, loc, both, 0.5);
    }
    if (auto log = dyn_cast<math::LogOp>(op)) {
      if (Value x = expArgument(log.getOperand())) {
        applied.insert("log(e^x) = x");
        return x;
      }
      auto add = log.getOperand().getDefiningOp<arith::AddFOp>();
      if (!add)
        return Value();
      for (auto [c, e] : {std::pair(add.getLhs(), add.getRhs()), std::pair(add.getRhs(), add.getLhs())}) {
        std::optional<double> value = constantNumber(c);
        Value y = expArgument(e);
        if (value && *value > 0.0 && std::isfinite(std::log(*value)) && y) {
          applied.insert("log(c + e^x) = softplus: max(y, 0) + log1p(e^-|y|) + log c, y = x - log c");
          return softplus(b, loc, y, *value);
        }
      }
      return Value();
    }
    if (auto log1p = dyn_cast<math::Log1pOp>(op)) {
      if (Value y = expArgument(log1p.getOperand())) {
        if (signs.of(y).isNonPositive())
          return Value(); // e^x in (0, 1]: exact as written (softplus's own log1p(e^-|s|))
        applied.insert("log1p(e^x) = softplus: max(x, 0) + log1p(e^-|x|)");
        return softplus(b, loc, y, 1.0);
      }
      return Value();
    }
    if (auto mul = dyn_cast<arith::MulFOp>(op)) {
      // Two exp factors; a bounded e^x (x <= 0) beside one is a degree-0 factor.
      Value x = expArgument(mul.getLhs()), y = expArgument(mul.getRhs());
      if (!x || !y || signs.of(x).isNonPositive() || signs.of(y).isNonPositive())
        return Value();
      applied.insert("e^a*e^b = e^(a + b)");
      return exp(b, loc, arith::AddFOp::create(b, loc, x, y));
    }
    return Value();
  }

  LogicalResult rewriteOps(Region &region) {
    SignAnalysis signs(region);
    for (Operation &op : llvm::make_early_inc_range(region.front().without_terminator())) {
      FailureOr<Value> stable = rewrite(op, signs);
      if (failed(stable))
        return failure();
      if (!*stable)
        continue;
      op.getResult(0).replaceAllUsesWith(*stable);
      op.erase();
    }
    return success();
  }

  /// Erases the ops the rewrites left unused (the e^x of log(e^x), a lifted c).
  static void eraseDeadOps(Region &region) {
    // Users before their operands, so an operand whose last user goes is seen dead.
    auto ops = llvm::map_to_vector(region.front().without_terminator(),
                                   [](Operation &op) { return &op; });
    for (Operation *op : llvm::reverse(ops))
      if (isOpTriviallyDead(op))
        op->erase();
  }

  /// c beside an exp factor in a sum, max, min or select becomes ±e^(log|c|).
  void liftConstants(Region &region) {
    for (OpOperand *use : constantsJoiningExpFactors(region)) {
      double c = *constantNumber(use->get());
      OpBuilder b(use->getOwner());
      Location loc = use->get().getLoc();
      Value lifted = exp(b, loc, logOf(b, loc, use->get().getType(), std::fabs(c)));
      if (c < 0)
        lifted = arith::NegFOp::create(b, loc, lifted);
      use->set(lifted);
      applied.insert("c beside an exp factor = +-e^(log|c|)");
    }
  }

  NormalizerOp normalizer;
  /// The rules applied (string literals).
  llvm::SetVector<StringRef> applied;
};
} // namespace

LogicalResult mlir::attn::rewriteToStableForms(NormalizerOp normalizer) {
  if (failed(normalizer.requireExpanded()))
    return failure();
  return StableFormRewriter(normalizer).run();
}
