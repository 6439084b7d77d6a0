//===- Differentiate.cpp - symbolic derivatives of scalar functions -------===//
#include "lib/Transforms/Differentiate.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

#include "llvm/Support/MathExtras.h"
#include <cmath>

using namespace mlir;
using namespace mlir::attn;

namespace {
/// Emits tangent arithmetic. A null Value stands for an exact zero tangent, so
/// ops that do not depend on the variable cost nothing.
class TangentBuilder {
public:
  TangentBuilder(OpBuilder &builder, Location loc) : b(builder), loc(loc) {}

  Value constant(Type type, double value) {
    return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, value));
  }
  // log(2), not a literal: derivatives are taken at f32 and retyped to the kernel's
  // type afterwards, which reads an f32 literal back as its shortest decimal
  // (0.6931472); log(2) is folded by canonicalize once it has the kernel's type.
  Value ln2(Type type) { return math::LogOp::create(b, loc, constant(type, 2.0)); }
  // The rules below fold ±1 factors and negations as they go, so a derivative
  // reads like one written by hand (d(e^s - e^-s) = e^s + e^-s) after canonicalize.
  Value add(Value x, Value y) {
    if (!x)
      return y;
    if (!y)
      return x;
    if (auto negated = y.getDefiningOp<arith::NegFOp>())
      return arith::SubFOp::create(b, loc, x, negated.getOperand());
    return arith::AddFOp::create(b, loc, x, y);
  }
  Value sub(Value x, Value y) {
    if (!y)
      return x;
    if (!x)
      return neg(y);
    if (auto negated = y.getDefiningOp<arith::NegFOp>())
      return arith::AddFOp::create(b, loc, x, negated.getOperand());
    return arith::SubFOp::create(b, loc, x, y);
  }
  /// factor · tangent, with a zero tangent staying zero.
  Value scale(Value factor, Value tangent) {
    if (!tangent)
      return {};
    if (std::optional<double> c = constantValue(tangent)) {
      if (*c == 1.0)
        return factor;
      if (*c == -1.0)
        return neg(factor);
    }
    return arith::MulFOp::create(b, loc, factor, tangent);
  }
  Value div(Value tangent, Value divisor) {
    if (!tangent)
      return {};
    return arith::DivFOp::create(b, loc, tangent, divisor);
  }
  Value neg(Value tangent) {
    if (!tangent)
      return {};
    if (std::optional<double> c = constantValue(tangent))
      return constant(tangent.getType(), -*c);
    if (auto negated = tangent.getDefiningOp<arith::NegFOp>())
      return negated.getOperand();
    return arith::NegFOp::create(b, loc, tangent);
  }
  static std::optional<double> constantValue(Value v) {
    auto cst = v.getDefiningOp<arith::ConstantOp>();
    if (auto attr = cst ? dyn_cast<FloatAttr>(cst.getValue()) : FloatAttr())
      return attr.getValueAsDouble();
    return std::nullopt;
  }
  Value select(Value cond, Value x, Value y, Type type) {
    if (!x && !y)
      return {};
    if (!x)
      x = constant(type, 0.0);
    if (!y)
      y = constant(type, 0.0);
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
  Value cmp(arith::CmpFPredicate pred, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, pred, x, y);
  }

  OpBuilder &b;
  Location loc;
};
} // namespace

namespace {
/// y = constant + e^u, in either operand order.
struct BoundedDenominator {
  Value constant;
  Value exponent; // u
};
} // namespace

static std::optional<BoundedDenominator> matchBoundedDenominator(Value y) {
  auto add = y.getDefiningOp<arith::AddFOp>();
  if (!add)
    return std::nullopt;
  for (auto [c, e] : {std::pair(add.getLhs(), add.getRhs()), std::pair(add.getRhs(), add.getLhs())})
    if (c.getDefiningOp<arith::ConstantOp>())
      if (auto exp = e.getDefiningOp<math::ExpOp>())
        return BoundedDenominator{c, exp.getOperand()};
  return std::nullopt;
}

/// The same function written with ops that have derivative rules, for the ops
/// researchers reach for that have none; empty for others.
static StringRef differentiableRewrite(Operation *op) {
  return llvm::TypeSwitch<Operation *, StringRef>(op)
      .Case<math::CbrtOp>([](auto) {
        return "x^(1/3) is math.powf(x, 0.3333333) for x > 0; for any sign, "
               "copysign(powf(|x|, 1/3), x) as select(x < 0, -p, p)";
      })
      .Case<math::TanOp>([](auto) { return "tan(x) is math.sin(x) / math.cos(x)"; })
      .Case<math::SinhOp>([](auto) { return "sinh(x) is (e^x - e^-x) / 2"; })
      .Case<math::CoshOp>([](auto) { return "cosh(x) is (e^x + e^-x) / 2"; })
      .Case<math::Log10Op>([](auto) { return "log10(x) is math.log(x) / log(10)"; })
      .Case<math::ErfcOp>([](auto) { return "erfc(x) is 1 - math.erf(x)"; })
      .Case<math::Atan2Op>([](auto) { return "atan2(y, x) is math.atan(y / x) where x > 0"; })
      .Default([](Operation *) { return StringRef(); });
}

/// The tangent of `op`'s single result, given tangents of its operands (`dx(i)`,
/// null for zero) and the primal values (`x(i)`, the result `r`); `primalOf` and
/// `tangentOfValue` look up any earlier value of the function. Returns failure
/// for an op with a float result that has no rule.
static FailureOr<Value> tangentOf(Operation *op, TangentBuilder &t,
                                  function_ref<Value(unsigned)> x,
                                  function_ref<Value(unsigned)> dx, Value r,
                                  function_ref<Value(Value)> primalOf,
                                  function_ref<Value(Value)> tangentOfValue) {
  auto exponentTangent = [&](const BoundedDenominator &bounded) {
    return tangentOfValue(bounded.exponent);
  };
  Type type = r.getType();
  auto one = [&] { return t.constant(type, 1.0); };
  return TypeSwitch<Operation *, FailureOr<Value>>(op)
      .Case<arith::AddFOp>([&](auto) { return t.add(dx(0), dx(1)); })
      .Case<arith::SubFOp>([&](auto) { return t.sub(dx(0), dx(1)); })
      .Case<arith::NegFOp>([&](auto) { return t.neg(dx(0)); })
      .Case<arith::MulFOp>(
          [&](auto) { return t.add(t.scale(x(1), dx(0)), t.scale(x(0), dx(1))); })
      .Case<arith::DivFOp>([&](arith::DivFOp div) -> Value {
        // y = k + e^u (a sigmoid-like wrapper): d(x/y) = dx/y - r·(1 - k/y)·du.
        // The textbook (dx - r·dy)/y gives 0·∞ = NaN once e^u overflows.
        if (std::optional<BoundedDenominator> bounded = matchBoundedDenominator(div.getRhs())) {
          Value du = exponentTangent(*bounded);
          Value k = primalOf(bounded->constant);
          Value fraction = arith::SubFOp::create(t.b, t.loc, one(),
                                                 arith::DivFOp::create(t.b, t.loc, k, x(1)));
          Value viaDenominator = du ? t.scale(arith::MulFOp::create(t.b, t.loc, r, fraction), du)
                                    : Value();
          return t.sub(t.div(dx(0), x(1)), viaDenominator);
        }
        // d(x/y) = (dx - r·dy) / y
        return t.div(t.sub(dx(0), t.scale(r, dx(1))), x(1));
      })
      .Case<arith::MaximumFOp, arith::MaxNumFOp>([&](auto) {
        return t.select(t.cmp(arith::CmpFPredicate::OGT, x(0), x(1)), dx(0), dx(1), type);
      })
      .Case<arith::MinimumFOp, arith::MinNumFOp>([&](auto) {
        return t.select(t.cmp(arith::CmpFPredicate::OLT, x(0), x(1)), dx(0), dx(1), type);
      })
      .Case<arith::SelectOp>([&](auto) { return t.select(x(0), dx(1), dx(2), type); })
      .Case<arith::ExtFOp, arith::TruncFOp>([&](Operation *cast) -> Value {
        if (!dx(0))
          return {};
        OperationState state(cast->getLoc(), cast->getName(), ValueRange{dx(0)},
                             TypeRange{type});
        return t.b.create(state)->getResult(0);
      })
      .Case<arith::ConstantOp, arith::SIToFPOp, arith::UIToFPOp, math::FloorOp,
            math::CeilOp, math::RoundOp, math::RoundEvenOp, math::TruncOp>(
          [&](auto) { return Value(); })
      .Case<math::ExpOp>([&](auto) { return t.scale(r, dx(0)); })
      .Case<math::Exp2Op>([&](auto) {
        return t.scale(arith::MulFOp::create(t.b, t.loc, r, t.ln2(type)),
                       dx(0));
      })
      .Case<math::ExpM1Op>([&](auto) {
        return t.scale(arith::AddFOp::create(t.b, t.loc, r, one()), dx(0));
      })
      .Case<math::LogOp>([&](auto) { return t.div(dx(0), x(0)); })
      .Case<math::Log1pOp>([&](auto) {
        return t.div(dx(0), arith::AddFOp::create(t.b, t.loc, x(0), one()));
      })
      .Case<math::Log2Op>([&](auto) {
        return t.div(dx(0), arith::MulFOp::create(t.b, t.loc, x(0), t.ln2(type)));
      })
      .Case<math::SqrtOp>([&](auto) {
        return t.div(dx(0), arith::MulFOp::create(t.b, t.loc, r, t.constant(type, 2.0)));
      })
      .Case<math::RsqrtOp>([&](auto) {
        // d(x^-1/2) = -r / (2x) dx
        Value f = arith::DivFOp::create(t.b, t.loc, r,
                                        arith::MulFOp::create(t.b, t.loc, x(0),
                                                              t.constant(type, -2.0)));
        return t.scale(f, dx(0));
      })
      .Case<math::TanhOp>([&](auto) {
        Value rr = arith::MulFOp::create(t.b, t.loc, r, r);
        return t.scale(arith::SubFOp::create(t.b, t.loc, one(), rr), dx(0));
      })
      .Case<math::SinOp>([&](auto) {
        return t.scale(math::CosOp::create(t.b, t.loc, x(0)), dx(0));
      })
      .Case<math::CosOp>([&](auto) {
        return t.neg(t.scale(math::SinOp::create(t.b, t.loc, x(0)), dx(0)));
      })
      .Case<math::AtanOp>([&](auto) {
        Value xx = arith::MulFOp::create(t.b, t.loc, x(0), x(0));
        return t.div(dx(0), arith::AddFOp::create(t.b, t.loc, xx, one()));
      })
      .Case<math::ErfOp>([&](auto) {
        Value xx = arith::MulFOp::create(t.b, t.loc, x(0), x(0));
        Value e = math::ExpOp::create(t.b, t.loc, arith::NegFOp::create(t.b, t.loc, xx));
        Value k = t.constant(type, 2.0 / std::sqrt(llvm::numbers::pi));
        return t.scale(arith::MulFOp::create(t.b, t.loc, k, e), dx(0));
      })
      .Case<math::AbsFOp>([&](auto) {
        Value zero = t.constant(type, 0.0);
        Value negative = t.select(t.cmp(arith::CmpFPredicate::OLT, x(0), zero),
                                  t.neg(dx(0)), Value(), type);
        return t.select(t.cmp(arith::CmpFPredicate::OGT, x(0), zero), dx(0), negative,
                        type);
      })
      .Case<math::PowFOp>([&](auto) -> Value {
        // d(x^y) = y·x^(y-1)·dx + r·log(x)·dy; the dx term avoids log(x) so x = 0 works.
        Value viaBase;
        if (dx(0)) {
          Value ym1 = arith::SubFOp::create(t.b, t.loc, x(1), one());
          Value p = math::PowFOp::create(t.b, t.loc, x(0), ym1);
          viaBase = t.scale(arith::MulFOp::create(t.b, t.loc, x(1), p), dx(0));
        }
        Value viaExponent;
        if (dx(1))
          viaExponent = t.scale(
              arith::MulFOp::create(t.b, t.loc, r, math::LogOp::create(t.b, t.loc, x(0))),
              dx(1));
        return t.add(viaBase, viaExponent);
      })
      .Case<math::FPowIOp>([&](math::FPowIOp pow) -> Value {
        if (!dx(0))
          return {};
        Value n = x(1);
        Value nm1 = arith::SubIOp::create(
            t.b, t.loc, n, arith::ConstantOp::create(t.b, t.loc, n.getType(),
                                                     t.b.getIntegerAttr(n.getType(), 1)));
        Value p = math::FPowIOp::create(t.b, t.loc, x(0), nm1);
        Value nf = arith::SIToFPOp::create(t.b, t.loc, type, n);
        return t.scale(arith::MulFOp::create(t.b, t.loc, nf, p), dx(0));
      })
      .Case<math::FmaOp>([&](auto) {
        return t.add(t.add(t.scale(x(1), dx(0)), t.scale(x(0), dx(1))), dx(2));
      })
      .Default([&](Operation *other) -> FailureOr<Value> {
        InFlightDiagnostic error =
            other->emitOpError()
            << "has no derivative rule; differentiable ops are arith add/sub/mul/div/"
               "neg/max/min/select/extf/truncf and math exp/exp2/expm1/log/log1p/"
               "log2/sqrt/rsqrt/tanh/sin/cos/atan/erf/absf/powf/fpowi/fma";
        if (StringRef rewrite = differentiableRewrite(other); !rewrite.empty())
          error.attachNote(other->getLoc()) << "differentiable rewrite: " << rewrite;
        return error;
      });
}

FailureOr<func::FuncOp> mlir::attn::buildDerivative(func::FuncOp function, unsigned wrt,
                                                     StringRef name) {
  if (wrt >= function.getNumArguments() ||
      !isa<FloatType>(function.getArgumentTypes()[wrt]))
    return function.emitOpError() << "argument #" << wrt << " is not a float";
  return buildDerivative(function, function.getArgument(wrt), name);
}

FailureOr<func::FuncOp> mlir::attn::buildDerivative(func::FuncOp function, Value seed,
                                                     StringRef name) {
  if (!function.getBody().hasOneBlock() || function.getNumResults() != 1 ||
      !isa<FloatType>(function.getResultTypes()[0]))
    return function.emitOpError("must be one block returning one float to be differentiated");
  if (!isa<FloatType>(seed.getType()))
    return function.emitOpError() << "cannot be differentiated by a value of type "
                                  << seed.getType();

  OpBuilder b(function);
  b.setInsertionPointAfter(function);
  auto derivative = func::FuncOp::create(b, function.getLoc(), name, function.getFunctionType());
  derivative.setPrivate();
  Block *entry = derivative.addEntryBlock();
  b.setInsertionPointToStart(entry);

  IRMapping primal;
  DenseMap<Value, Value> tangents;
  Block &body = function.getBody().front();
  primal.map(body.getArguments(), entry->getArguments());
  TangentBuilder t(b, function.getLoc());
  tangents[seed] = t.constant(seed.getType(), 1.0);

  for (Operation &op : body.without_terminator()) {
    Operation *cloned = b.clone(op, primal);
    bool anyTangent = llvm::any_of(op.getOperands(),
                                   [&](Value v) { return tangents.lookup(v) != nullptr; });
    if (!anyTangent || op.getNumResults() != 1 || !isa<FloatType>(op.getResult(0).getType()))
      continue;
    t.loc = op.getLoc();
    FailureOr<Value> tangent = tangentOf(
        &op, t, [&](unsigned i) { return primal.lookup(op.getOperand(i)); },
        [&](unsigned i) { return tangents.lookup(op.getOperand(i)); }, cloned->getResult(0),
        [&](Value v) { return primal.lookup(v); }, [&](Value v) { return tangents.lookup(v); });
    if (failed(tangent)) {
      derivative.erase();
      return failure();
    }
    if (*tangent)
      tangents[op.getResult(0)] = *tangent;
  }
  Value result = body.getTerminator()->getOperand(0);
  Value tangent = tangents.lookup(result);
  if (!tangent)
    tangent = t.constant(function.getResultTypes()[0], 0.0);
  func::ReturnOp::create(b, function.getLoc(), tangent);
  return derivative;
}
