//===- RangeAnalysis.cpp - how large a region's values can get ------------===//
#include "lib/Analysis/RangeAnalysis.h"

#include "dialect/AttnOps.h"
#include "lib/Analysis/SignAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Block.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::attn;

bool Range::isFinite() const { return std::isfinite(lo) && std::isfinite(hi); }

namespace {
constexpr double kLargestIndex = 2147483647.0;

/// a·b with 0·inf = 0 (a bound, not a value: 0 times anything bounded by inf is 0).
double times(double a, double b) { return a == 0 || b == 0 ? 0.0 : a * b; }

/// The range of a monotone non-decreasing f over [lo, hi].
template <typename F>
Range increasing(Range x, F f) {
  return {f(x.lo), f(x.hi)};
}

Range sum(Range a, Range b) {
  double lo = a.lo + b.lo, hi = a.hi + b.hi;
  return {std::isnan(lo) ? -INFINITY : lo, std::isnan(hi) ? INFINITY : hi};
}

Range negated(Range a) { return {-a.hi, -a.lo}; }

Range product(Range a, Range b) {
  double c[] = {times(a.lo, b.lo), times(a.lo, b.hi), times(a.hi, b.lo), times(a.hi, b.hi)};
  return {*std::min_element(std::begin(c), std::end(c)), *std::max_element(std::begin(c), std::end(c))};
}

bool contains(Range r, double x) { return r.lo <= x && x <= r.hi; }

Range quotient(Range a, Range b) {
  if (contains(b, 0.0)) {
    Range pole = Range::all();
    pole.singular = true;
    return pole;
  }
  Range reciprocal{1.0 / b.hi, 1.0 / b.lo};
  return product(a, reciprocal);
}

Range absolute(Range a) {
  if (a.lo >= 0)
    return a;
  if (a.hi <= 0)
    return negated(a);
  return {0.0, std::max(-a.lo, a.hi)};
}

Range hull(Range a, Range b) { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }

/// |x|^c for a constant exponent c (an integer c keeps the sign of odd powers).
Range power(Range x, double c) {
  Range magnitude = absolute(x);
  double top = std::pow(magnitude.hi, c), bottom = std::pow(magnitude.lo, c);
  if (c < 0)
    std::swap(top, bottom);
  bool pole = c < 0 && magnitude.lo == 0;
  if (pole)
    top = INFINITY;
  bool integer = std::floor(c) == c;
  bool odd = integer && std::fmod(std::fabs(c), 2.0) == 1.0;
  Range r = odd && x.lo < 0 ? Range{-top, x.hi > 0 ? top : -bottom}
                            : Range{std::min(bottom, top), std::max(bottom, top)};
  r.singular = pole;
  return r;
}

double largestOf(Type type) {
  if (auto f = dyn_cast<FloatType>(type))
    return llvm::APFloat::getLargest(f.getFloatSemantics()).convertToDouble();
  return INFINITY;
}
} // namespace

RangeAnalysis::RangeAnalysis(Region &region, const llvm::SmallPtrSetImpl<Operation *> &fixed,
                             Range scoreRange)
    : region(region) {
  Block &block = region.front();
  largest = largestOf(block.getTerminator()->getOperand(0).getType());
  const Range guaranteed{-kGuaranteedScoreMagnitude, kGuaranteedScoreMagnitude};
  for (BlockArgument arg : block.getArguments()) {
    Range r = Range::all();
    if (arg.getType().isIndex())
      r = {0.0, kLargestIndex};
    else if (isa<FloatType>(arg.getType()))
      r = arg.getArgNumber() == 0 ? scoreRange : guaranteed;
    ranges[arg] = r;
  }
  for (Operation &op : block.without_terminator()) {
    Range r = fixed.contains(&op) ? Range{0.0, 1.0} : compute(op);
    // Evaluated in the region's type: past its largest number is ±inf.
    if (r.hi > largest)
      r.hi = INFINITY;
    if (r.lo < -largest)
      r.lo = -INFINITY;
    if (r.isFinite()) {
      r.overflows = false;
    } else if (!r.overflows) {
      // Finite operands grown past the type (a division by a range with 0 is not).
      bool operandsFinite = llvm::all_of(op.getOperands(), [&](Value v) { return of(v).isFinite(); });
      r.overflows = operandsFinite && !r.singular && !fixed.contains(&op);
    }
    for (Value result : op.getResults())
      ranges[result] = r;
  }
}

Range RangeAnalysis::of(Value v) const {
  auto it = ranges.find(v);
  return it == ranges.end() ? Range::all() : it->second;
}

Range RangeAnalysis::ofResult() const { return of(region.front().getTerminator()->getOperand(0)); }

Operation *RangeAnalysis::overflowOrigin() const {
  if (!ofResult().overflows)
    return nullptr;
  Operation *op = region.front().getTerminator()->getOperand(0).getDefiningOp();
  while (op) {
    auto overflowing = llvm::find_if(op->getOperands(), [&](Value v) { return of(v).overflows; });
    if (overflowing == op->operand_end() || !(*overflowing).getDefiningOp())
      return op;
    op = (*overflowing).getDefiningOp();
  }
  return nullptr;
}

Range RangeAnalysis::compute(Operation &op) const {
  auto operand = [&](unsigned k) { return of(op.getOperand(k)); };
  // Overflow of an operand propagates unless the op's own range is finite.
  auto propagate = [&](Range r) {
    r.overflows = llvm::any_of(op.getOperands(), [&](Value v) { return of(v).overflows; });
    return r;
  };
  return TypeSwitch<Operation *, Range>(&op)
      .Case<arith::ConstantOp>([&](auto c) {
        if (std::optional<double> v = constantNumber(c))
          return Range{*v, *v};
        return Range::all();
      })
      .Case<ReadOp>([&](ReadOp read) {
        if (isa<FloatType>(read.getType()))
          return Range{-kGuaranteedScoreMagnitude, kGuaranteedScoreMagnitude};
        return Range::all();
      })
      .Case<arith::AddFOp, arith::AddIOp>([&](auto) { return propagate(sum(operand(0), operand(1))); })
      .Case<arith::SubFOp, arith::SubIOp>(
          [&](auto) { return propagate(sum(operand(0), negated(operand(1)))); })
      .Case<arith::MulFOp, arith::MulIOp>([&](auto mul) {
        if (mul.getLhs() == mul.getRhs())
          return propagate(power(operand(0), 2.0));
        return propagate(product(operand(0), operand(1)));
      })
      .Case<arith::DivFOp>([&](auto) { return propagate(quotient(operand(0), operand(1))); })
      .Case<arith::NegFOp>([&](auto) { return propagate(negated(operand(0))); })
      .Case<math::AbsFOp, math::AbsIOp>([&](auto) { return propagate(absolute(operand(0))); })
      .Case<arith::MaximumFOp, arith::MaxNumFOp, arith::MaxSIOp>([&](auto) {
        Range a = operand(0), b = operand(1);
        return propagate({std::max(a.lo, b.lo), std::max(a.hi, b.hi)});
      })
      .Case<arith::MinimumFOp, arith::MinNumFOp, arith::MinSIOp>([&](auto) {
        Range a = operand(0), b = operand(1);
        return propagate({std::min(a.lo, b.lo), std::min(a.hi, b.hi)});
      })
      .Case<arith::SelectOp>([&](auto) { return propagate(hull(operand(1), operand(2))); })
      .Case<arith::CmpFOp, arith::CmpIOp>([](auto) { return Range{0.0, 1.0}; })
      .Case<math::ExpOp>([&](auto) {
        return propagate(increasing(operand(0), [](double x) { return std::exp(x); }));
      })
      .Case<math::Exp2Op>([&](auto) {
        return propagate(increasing(operand(0), [](double x) { return std::exp2(x); }));
      })
      .Case<math::ExpM1Op>([&](auto) {
        return propagate(increasing(operand(0), [](double x) { return std::expm1(x); }));
      })
      .Case<math::SinhOp>([&](auto) {
        return propagate(increasing(operand(0), [](double x) { return std::sinh(x); }));
      })
      .Case<math::CoshOp>([&](auto) {
        Range m = absolute(operand(0));
        return propagate({std::cosh(m.lo), std::cosh(m.hi)});
      })
      // log of a range reaching 0 or below: -inf there (or NaN), the user's domain.
      .Case<math::LogOp, math::Log2Op, math::Log10Op, math::Log1pOp>([&](Operation *log) {
        Range x = operand(0);
        double floor = isa<math::Log1pOp>(log) ? -1.0 : 0.0;
        auto f = [&](double v) -> double {
          if (v <= floor)
            return -INFINITY;
          return TypeSwitch<Operation *, double>(log)
              .Case<math::Log2Op>([&](auto) { return std::log2(v); })
              .Case<math::Log10Op>([&](auto) { return std::log10(v); })
              .Case<math::Log1pOp>([&](auto) { return std::log1p(v); })
              .Default([&](Operation *) { return std::log(v); });
        };
        Range r = increasing(x, f);
        r.overflows = x.overflows && std::isinf(x.hi);
        r.singular = x.lo <= floor;
        return r;
      })
      .Case<math::SqrtOp>([&](auto) {
        Range x = operand(0);
        return propagate({std::sqrt(std::max(x.lo, 0.0)), std::sqrt(std::max(x.hi, 0.0))});
      })
      .Case<math::RsqrtOp>([&](auto) {
        Range x = operand(0);
        if (x.lo <= 0)
          return Range{0.0, INFINITY, /*overflows=*/false, /*singular=*/true};
        return Range{1.0 / std::sqrt(x.hi), 1.0 / std::sqrt(x.lo)};
      })
      .Case<math::TanhOp, math::ErfOp, math::AtanOp, math::AsinhOp, math::CbrtOp>([&](Operation *f) {
        Range x = operand(0);
        auto apply = [&](double v) -> double {
          return TypeSwitch<Operation *, double>(f)
              .Case<math::TanhOp>([&](auto) { return std::tanh(v); })
              .Case<math::ErfOp>([&](auto) { return std::erf(v); })
              .Case<math::AtanOp>([&](auto) { return std::atan(v); })
              .Case<math::AsinhOp>([&](auto) { return std::asinh(v); })
              .Default([&](Operation *) { return std::cbrt(v); });
        };
        Range r = increasing(x, apply);
        r.overflows = !r.isFinite() && x.overflows;
        return r;
      })
      .Case<math::SinOp, math::CosOp>([](auto) { return Range{-1.0, 1.0}; })
      .Case<math::PowFOp>([&](math::PowFOp pow) {
        if (std::optional<double> c = constantNumber(pow.getRhs()))
          return propagate(power(operand(0), *c));
        Range base = operand(0);
        if (base.lo <= 0)
          return Range::all();
        Range logBase = increasing(base, [](double v) { return std::log(v); });
        return propagate(increasing(product(operand(1), logBase), [](double v) { return std::exp(v); }));
      })
      .Case<math::FPowIOp>([&](math::FPowIOp pow) {
        if (std::optional<double> c = constantNumber(pow.getRhs()))
          return propagate(power(operand(0), *c));
        return Range::all();
      })
      .Case<math::FloorOp, math::CeilOp, math::TruncOp, math::RoundOp, math::RoundEvenOp>(
          [&](auto) {
            Range x = operand(0);
            return propagate({std::floor(x.lo), std::ceil(x.hi)});
          })
      .Case<arith::SIToFPOp, arith::UIToFPOp, arith::IndexCastOp, arith::IndexCastUIOp,
            arith::ExtFOp, arith::TruncFOp, arith::ExtSIOp, arith::ExtUIOp, arith::FPToSIOp>(
          [&](auto) { return propagate(operand(0)); })
      .Default([](Operation *) { return Range::all(); });
}
