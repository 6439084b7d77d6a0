//===- SignAnalysis.cpp - the signs a region's values can take ------------===//
#include "lib/Analysis/SignAnalysis.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Block.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::attn;

std::optional<double> mlir::attn::constantNumber(Value v) {
  auto c = v.getDefiningOp<arith::ConstantOp>();
  if (!c)
    return std::nullopt;
  if (auto f = dyn_cast<FloatAttr>(c.getValue()))
    return f.getValueAsDouble();
  if (auto i = dyn_cast<IntegerAttr>(c.getValue()); i && !i.getType().isInteger(1))
    return double(i.getValue().getSExtValue());
  return std::nullopt;
}

SignSet SignSet::of(double x) {
  return SignSet(x < 0 ? Negative : x > 0 ? Positive : Zero);
}

SignSet SignSet::negated() const {
  uint8_t flipped = bits & Zero;
  if (canBe(Negative))
    flipped |= Positive;
  if (canBe(Positive))
    flipped |= Negative;
  return SignSet(flipped);
}

std::string SignSet::describe() const {
  switch (bits) {
  case Negative: return "< 0";
  case Zero: return "= 0";
  case Positive: return "> 0";
  case Negative | Zero: return "<= 0";
  case Zero | Positive: return ">= 0";
  case Negative | Positive: return "!= 0";
  default: return "of any sign";
  }
}

namespace {
using Bits = SignSet::Bits;
constexpr Bits kSigns[] = {SignSet::Negative, SignSet::Zero, SignSet::Positive};

/// The union over every pair of signs (one from `a`, one from `b`) of `f`'s signs.
template <typename F>
SignSet pairwise(SignSet a, SignSet b, F f) {
  uint8_t bits = 0;
  for (Bits x : kSigns)
    for (Bits y : kSigns)
      if (a.canBe(x) && b.canBe(y))
        bits |= f(x, y).bits;
  return SignSet(bits);
}

int toInt(Bits b) { return b == SignSet::Negative ? -1 : b == SignSet::Zero ? 0 : 1; }

SignSet sum(SignSet a, SignSet b) {
  return pairwise(a, b, [](Bits x, Bits y) {
    int sx = toInt(x), sy = toInt(y);
    if (sx * sy < 0)
      return SignSet::any();
    return SignSet::of(sx + sy);
  });
}

SignSet product(SignSet a, SignSet b) {
  return pairwise(a, b, [](Bits x, Bits y) { return SignSet::of(toInt(x) * toInt(y)); });
}

SignSet maximum(SignSet a, SignSet b) {
  return pairwise(a, b, [](Bits x, Bits y) { return SignSet::of(std::max(toInt(x), toInt(y))); });
}

SignSet minimum(SignSet a, SignSet b) {
  return pairwise(a, b, [](Bits x, Bits y) { return SignSet::of(std::min(toInt(x), toInt(y))); });
}

/// f(x) for an f that keeps x's sign but may round a nonzero x to 0 (floor, trunc).
SignSet sameSignOrZero(SignSet x) {
  return x.bits == SignSet::Zero ? x : x | SignSet(SignSet::Zero);
}
} // namespace

SignAnalysis::SignAnalysis(Region &region, ArrayRef<SignSet> argumentSigns) : region(region) {
  Block &block = region.front();
  for (BlockArgument arg : block.getArguments()) {
    SignSet sign = arg.getType().isIndex() ? SignSet::nonNegative() : SignSet::any();
    if (arg.getArgNumber() < argumentSigns.size())
      sign = argumentSigns[arg.getArgNumber()];
    signs[arg] = sign;
  }
  for (Operation &op : block.without_terminator()) {
    SignSet sign = compute(op);
    for (Value result : op.getResults())
      signs[result] = sign;
  }
}

SignSet SignAnalysis::of(Value v) const {
  auto it = signs.find(v);
  return it == signs.end() ? SignSet::any() : it->second;
}

SignSet SignAnalysis::ofResult() const {
  return of(region.front().getTerminator()->getOperand(0));
}

SignSet SignAnalysis::compute(Operation &op) const {
  auto operand = [&](unsigned k) { return of(op.getOperand(k)); };
  return TypeSwitch<Operation *, SignSet>(&op)
      .Case<arith::ConstantOp>([](arith::ConstantOp c) {
        if (auto f = dyn_cast<FloatAttr>(c.getValue()))
          return SignSet::of(f.getValueAsDouble());
        if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
          return i.getType().isInteger(1) ? SignSet::nonNegative()
                                          : SignSet::of(double(i.getValue().getSExtValue()));
        return SignSet::any();
      })
      .Case<arith::NegFOp>([&](auto) { return operand(0).negated(); })
      .Case<math::AbsFOp, math::AbsIOp>([&](auto) {
        SignSet x = operand(0);
        uint8_t bits = x.bits & SignSet::Zero;
        if (x.canBe(SignSet::Negative) || x.canBe(SignSet::Positive))
          bits |= SignSet::Positive;
        return SignSet(bits);
      })
      .Case<math::ExpOp, math::Exp2Op, math::CoshOp>([](auto) { return SignSet::positive(); })
      // Odd and increasing through 0: the operand's sign.
      .Case<math::ExpM1Op, math::TanhOp, math::SinhOp, math::AtanOp, math::AsinhOp, math::ErfOp,
            math::CbrtOp, math::TanOp, arith::ExtFOp, arith::TruncFOp, arith::SIToFPOp,
            arith::IndexCastOp, arith::ExtSIOp>([&](auto) { return operand(0); })
      .Case<arith::UIToFPOp, arith::ExtUIOp, arith::IndexCastUIOp>(
          [&](auto) { return operand(0) | SignSet(SignSet::Zero); })
      .Case<math::FloorOp, math::CeilOp, math::TruncOp, math::RoundOp, math::RoundEvenOp,
            arith::FPToSIOp>([&](auto) { return sameSignOrZero(operand(0)); })
      .Case<math::SqrtOp>([&](auto) {
        SignSet x = operand(0);
        return x.isNonNegative() ? x : SignSet::any();
      })
      .Case<math::RsqrtOp>([&](auto) {
        return operand(0).bits == SignSet::Positive ? SignSet::positive() : SignSet::any();
      })
      .Case<math::LogOp>([&](math::LogOp log) {
        // log c of a constant c > 0 (the stable forms' ln 2, log|c|).
        std::optional<double> c = constantNumber(log.getOperand());
        return c && *c > 0.0 ? SignSet::of(std::log(*c)) : SignSet::any();
      })
      .Case<math::Log1pOp>([&](auto) {
        SignSet x = operand(0);
        return x.isNonNegative() ? x : SignSet::any();
      })
      .Case<math::PowFOp>([&](math::PowFOp pow) {
        SignSet base = operand(0);
        if (base.bits == SignSet::Positive)
          return SignSet::positive();
        // x^c for an integer constant c: an even power is >= 0, an odd one has x's sign.
        double n = constantNumber(pow.getRhs()).value_or(0.5);
        if (std::floor(n) != n || n <= 0)
          return SignSet::any();
        if (std::fmod(n, 2.0) == 1.0)
          return base;
        uint8_t bits = base.bits & SignSet::Zero;
        if (base.canBe(SignSet::Negative) || base.canBe(SignSet::Positive))
          bits |= SignSet::Positive;
        return SignSet(bits);
      })
      .Case<arith::AddFOp, arith::AddIOp>([&](auto) { return sum(operand(0), operand(1)); })
      .Case<arith::SubFOp, arith::SubIOp>(
          [&](auto) { return sum(operand(0), operand(1).negated()); })
      .Case<arith::MulFOp, arith::MulIOp>([&](auto mul) {
        if (mul.getLhs() == mul.getRhs()) { // x·x
          SignSet x = operand(0);
          uint8_t bits = x.bits & SignSet::Zero;
          if (x.canBe(SignSet::Negative) || x.canBe(SignSet::Positive))
            bits |= SignSet::Positive;
          return SignSet(bits);
        }
        return product(operand(0), operand(1));
      })
      .Case<arith::DivFOp>([&](auto) {
        // x / ±0 is ±inf with x's sign times the zero's (0 / 0, NaN, has none).
        SignSet divisor = operand(1);
        if (divisor.bits == SignSet::Zero)
          return SignSet::any();
        return product(operand(0), SignSet(divisor.bits & ~SignSet::Zero));
      })
      .Case<arith::MaximumFOp, arith::MaxNumFOp, arith::MaxSIOp>(
          [&](auto) { return maximum(operand(0), operand(1)); })
      .Case<arith::MinimumFOp, arith::MinNumFOp, arith::MinSIOp>(
          [&](auto) { return minimum(operand(0), operand(1)); })
      .Case<arith::SelectOp>([&](auto) { return operand(1) | operand(2); })
      .Case<arith::CmpFOp, arith::CmpIOp>([](auto) { return SignSet::nonNegative(); })
      .Default([](Operation *) { return SignSet::any(); });
}
