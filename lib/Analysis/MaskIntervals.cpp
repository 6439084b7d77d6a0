//===- MaskIntervals.cpp - a mask region over a whole tile
//-----------------===//
#include "lib/Analysis/MaskIntervals.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::attn;

namespace {
/// The mask region's block arguments.
enum IndexArg : unsigned { BatchArg = 0, HeadArg = 1, QueryArg = 2, KeyArg = 3 };

bool isBlockArg(Value value, unsigned position) {
  auto arg = dyn_cast<BlockArgument>(value);
  return arg && arg.getArgNumber() == position;
}

/// A positive integer constant (a divisor the range rules accept).
bool isPositiveConstant(Value value) {
  APInt constant;
  return matchPattern(value, m_ConstantInt(&constant)) && constant.isStrictlyPositive();
}

/// The read as a MaskRead, or nullopt when its indices are not b, h,
/// constants and at most one i or j.
std::optional<MaskRead> asMaskRead(ReadOp read) {
  if (!read.getType().isSignlessInteger())
    return std::nullopt;
  MaskRead result{read, std::nullopt, false};
  for (auto [d, index] : llvm::enumerate(read.getIndices())) {
    if (isBlockArg(index, BatchArg) || isBlockArg(index, HeadArg) ||
        matchPattern(index, m_Constant()))
      continue;
    if (result.rangeDim || !(isBlockArg(index, QueryArg) || isBlockArg(index, KeyArg)))
      return std::nullopt;
    result.rangeDim = d;
    result.querySide = isBlockArg(index, QueryArg);
  }
  return result;
}

/// Whether the interval rules below cover `op` (the region's yield aside).
bool hasIntervalRule(Operation *op) {
  if (auto read = dyn_cast<ReadOp>(op))
    return asMaskRead(read).has_value();
  if (auto constant = dyn_cast<arith::ConstantOp>(op))
    return isa<IntegerAttr>(constant.getValue());
  if (isa<arith::DivUIOp, arith::DivSIOp, arith::RemUIOp, arith::RemSIOp>(op))
    return isPositiveConstant(op->getOperand(1));
  // Booleans combine by the truth rules, integers (never i1) by the range
  // rules.
  if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(op))
    return op->getResult(0).getType().isInteger(1);
  if (isa<arith::ExtSIOp, arith::ExtUIOp, arith::IndexCastOp, arith::IndexCastUIOp>(op))
    return !op->getOperand(0).getType().isInteger(1);
  if (auto cmp = dyn_cast<arith::CmpIOp>(op))
    return !cmp.getLhs().getType().isInteger(1);
  if (isa<arith::SelectOp>(op))
    return true;
  return isa<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::MinSIOp, arith::MaxSIOp,
             arith::MinUIOp, arith::MaxUIOp>(op) &&
         !op->getResult(0).getType().isInteger(1);
}

/// A boolean over the tile: whether it may be true, whether it may be false.
struct Truth {
  Value mayTrue, mayFalse;
};

/// Emits the interval rules of a mask region, op by op.
class IntervalEmitter {
public:
  IntervalEmitter(ImplicitLocOpBuilder &b, const TileRanges &tile, ReadRange readRange)
      : b(b), tile(tile), readRange(readRange), sound(constantBool(true)) {}

  TileClass run(MaskOp mask) {
    Block &body = mask.getBody().front();
    ranges[body.getArgument(BatchArg)] = {tile.b, tile.b};
    ranges[body.getArgument(HeadArg)] = {tile.h, tile.h};
    ranges[body.getArgument(QueryArg)] = tile.i;
    ranges[body.getArgument(KeyArg)] = tile.j;
    for (Operation &op : body.without_terminator())
      visit(&op);
    Truth keep = truths.lookup(body.getTerminator()->getOperand(0));
    // Where an unsigned rule did not hold, nothing is known about the tile.
    return {arith::OrIOp::create(b, keep.mayTrue, negate(sound)),
            arith::AndIOp::create(b, negate(keep.mayFalse), sound)};
  }

private:
  Value constantBool(bool value) { return arith::ConstantIntOp::create(b, value, 1); }
  Value negate(Value x) { return arith::XOrIOp::create(b, x, constantBool(true)); }
  Value both(Value x, Value y) { return arith::AndIOp::create(b, x, y); }
  Value either(Value x, Value y) { return arith::OrIOp::create(b, x, y); }
  Value compare(arith::CmpIPredicate predicate, Value x, Value y) {
    return arith::CmpIOp::create(b, predicate, x, y);
  }
  Value min(Value x, Value y) { return arith::MinSIOp::create(b, x, y); }
  Value max(Value x, Value y) { return arith::MaxSIOp::create(b, x, y); }
  Value nonNegative(const IntRange &x) {
    return compare(arith::CmpIPredicate::sge, x.lo,
                   arith::ConstantOp::create(b, b.getZeroAttr(x.lo.getType())));
  }
  /// An unsigned rule is applied as the signed one: valid while `x` is >= 0.
  void requireNonNegative(const IntRange &x) { sound = both(sound, nonNegative(x)); }

  void visit(Operation *op) {
    if (auto read = dyn_cast<ReadOp>(op)) {
      ranges[read] = readRange(*asMaskRead(read), tile);
      return;
    }
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      if (constant.getType().isInteger(1)) {
        bool value = cast<IntegerAttr>(constant.getValue()).getValue().getBoolValue();
        truths[constant] = {constantBool(value), constantBool(!value)};
      } else {
        Value clone = b.clone(*op)->getResult(0);
        ranges[constant] = {clone, clone};
      }
      return;
    }
    if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
      truths[cmp] = compareRanges(cmp.getPredicate(), ranges.lookup(cmp.getLhs()),
                                  ranges.lookup(cmp.getRhs()));
      return;
    }
    if (op->getResult(0).getType().isInteger(1)) {
      truths[op->getResult(0)] = logic(op);
      return;
    }
    ranges[op->getResult(0)] = arithmetic(op);
  }

  /// Monotone in both operands: [f(lo, lo), f(hi, hi)].
  template <typename OpTy> IntRange monotone(const IntRange &x, const IntRange &y) {
    return {OpTy::create(b, x.lo, y.lo), OpTy::create(b, x.hi, y.hi)};
  }

  IntRange arithmetic(Operation *op) {
    auto operand = [&](unsigned n) { return ranges.lookup(op->getOperand(n)); };
    Type type = op->getResult(0).getType();
    if (isa<arith::AddIOp>(op))
      return monotone<arith::AddIOp>(operand(0), operand(1));
    if (isa<arith::SubIOp>(op))
      return {arith::SubIOp::create(b, operand(0).lo, operand(1).hi),
              arith::SubIOp::create(b, operand(0).hi, operand(1).lo)};
    if (isa<arith::MulIOp>(op)) {
      IntRange x = operand(0), y = operand(1);
      Value products[] = {
          arith::MulIOp::create(b, x.lo, y.lo), arith::MulIOp::create(b, x.lo, y.hi),
          arith::MulIOp::create(b, x.hi, y.lo), arith::MulIOp::create(b, x.hi, y.hi)};
      return {min(min(products[0], products[1]), min(products[2], products[3])),
              max(max(products[0], products[1]), max(products[2], products[3]))};
    }
    if (isa<arith::MinSIOp, arith::MinUIOp>(op)) {
      if (isa<arith::MinUIOp>(op)) {
        requireNonNegative(operand(0));
        requireNonNegative(operand(1));
      }
      return monotone<arith::MinSIOp>(operand(0), operand(1));
    }
    if (isa<arith::MaxSIOp, arith::MaxUIOp>(op)) {
      if (isa<arith::MaxUIOp>(op)) {
        requireNonNegative(operand(0));
        requireNonNegative(operand(1));
      }
      return monotone<arith::MaxSIOp>(operand(0), operand(1));
    }
    // x / c and x % c by a constant c > 0 (signed division truncates, still
    // monotone; the remainder's range is exact only within one quotient).
    if (isa<arith::DivUIOp, arith::DivSIOp>(op)) {
      if (isa<arith::DivUIOp>(op))
        requireNonNegative(operand(0));
      Value c = operand(1).lo;
      return {arith::DivSIOp::create(b, operand(0).lo, c),
              arith::DivSIOp::create(b, operand(0).hi, c)};
    }
    if (isa<arith::RemUIOp, arith::RemSIOp>(op)) {
      // Exact within one quotient (for remui: of a non-negative x); else any
      // remainder: [0, c - 1], or [1 - c, c - 1] for remsi of a negative x.
      IntRange x = operand(0);
      Value c = operand(1).lo;
      Value one = arith::ConstantOp::create(b, b.getOneAttr(type));
      Value zero = arith::ConstantOp::create(b, b.getZeroAttr(type));
      Value last = arith::SubIOp::create(b, c, one);
      Value exact = compare(arith::CmpIPredicate::eq, arith::DivSIOp::create(b, x.lo, c),
                            arith::DivSIOp::create(b, x.hi, c));
      Value anyLo = zero;
      if (isa<arith::RemUIOp>(op))
        exact = both(exact, nonNegative(x));
      else
        anyLo = arith::SelectOp::create(b, nonNegative(x), zero, arith::SubIOp::create(b, one, c));
      return {arith::SelectOp::create(b, exact, arith::RemSIOp::create(b, x.lo, c), anyLo),
              arith::SelectOp::create(b, exact, arith::RemSIOp::create(b, x.hi, c), last)};
    }
    if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp, arith::ExtUIOp>(op)) {
      IntRange x = operand(0);
      if (isa<arith::IndexCastUIOp, arith::ExtUIOp>(op))
        requireNonNegative(x);
      auto cast = [&](Value v) -> Value {
        OperationState state(op->getLoc(), op->getName(), ValueRange{v}, TypeRange{type});
        return b.create(state)->getResult(0);
      };
      return {cast(x.lo), cast(x.hi)};
    }
    auto select = cast<arith::SelectOp>(op);
    Truth cond = truths.lookup(select.getCondition());
    IntRange x = operand(1), y = operand(2);
    // Only the branches the condition may take count.
    auto pick = [&](Value fromBoth, Value fromTrue, Value fromFalse) -> Value {
      return arith::SelectOp::create(b, cond.mayTrue,
                                     arith::SelectOp::create(b, cond.mayFalse, fromBoth, fromTrue),
                                     fromFalse);
    };
    return {pick(min(x.lo, y.lo), x.lo, y.lo), pick(max(x.hi, y.hi), x.hi, y.hi)};
  }

  Truth compareRanges(arith::CmpIPredicate predicate, IntRange x, IntRange y) {
    using P = arith::CmpIPredicate;
    // An unsigned compare is the signed one on non-negative operands; otherwise
    // it may go either way.
    std::optional<P> asSigned;
    switch (predicate) {
    case P::ult:
      asSigned = P::slt;
      break;
    case P::ule:
      asSigned = P::sle;
      break;
    case P::ugt:
      asSigned = P::sgt;
      break;
    case P::uge:
      asSigned = P::sge;
      break;
    default:
      break;
    }
    if (asSigned) {
      Value unknown = negate(both(nonNegative(x), nonNegative(y)));
      Truth signedTruth = compareRanges(*asSigned, x, y);
      return {either(signedTruth.mayTrue, unknown), either(signedTruth.mayFalse, unknown)};
    }
    switch (predicate) {
    case P::eq:
    case P::ne: {
      Value overlap = both(compare(P::sle, x.lo, y.hi), compare(P::sle, y.lo, x.hi));
      // Always equal only when both are the same single value.
      Value single = both(both(compare(P::eq, x.lo, x.hi), compare(P::eq, y.lo, y.hi)),
                          compare(P::eq, x.lo, y.lo));
      Truth equal{overlap, negate(single)};
      return predicate == P::eq ? equal : Truth{equal.mayFalse, equal.mayTrue};
    }
    case P::slt:
      return {compare(P::slt, x.lo, y.hi), compare(P::sge, x.hi, y.lo)};
    case P::sle:
      return {compare(P::sle, x.lo, y.hi), compare(P::sgt, x.hi, y.lo)};
    case P::sgt:
      return compareRanges(P::slt, y, x);
    case P::sge:
      return compareRanges(P::sle, y, x);
    default:
      llvm_unreachable("unsigned predicates are handled above");
    }
  }

  Truth logic(Operation *op) {
    auto operand = [&](unsigned n) { return truths.lookup(op->getOperand(n)); };
    if (isa<arith::AndIOp>(op))
      return {both(operand(0).mayTrue, operand(1).mayTrue),
              either(operand(0).mayFalse, operand(1).mayFalse)};
    if (isa<arith::OrIOp>(op))
      return {either(operand(0).mayTrue, operand(1).mayTrue),
              both(operand(0).mayFalse, operand(1).mayFalse)};
    if (isa<arith::XOrIOp>(op)) {
      Truth x = operand(0), y = operand(1);
      return {either(both(x.mayTrue, y.mayFalse), both(x.mayFalse, y.mayTrue)),
              either(both(x.mayTrue, y.mayTrue), both(x.mayFalse, y.mayFalse))};
    }
    auto select = cast<arith::SelectOp>(op);
    Truth cond = truths.lookup(select.getCondition());
    Truth x = operand(1), y = operand(2);
    return {either(both(cond.mayTrue, x.mayTrue), both(cond.mayFalse, y.mayTrue)),
            either(both(cond.mayTrue, x.mayFalse), both(cond.mayFalse, y.mayFalse))};
  }

  ImplicitLocOpBuilder &b;
  const TileRanges &tile;
  ReadRange readRange;
  DenseMap<Value, IntRange> ranges;
  DenseMap<Value, Truth> truths;
  /// Every unsigned rule applied held (its operands were non-negative).
  Value sound;
};
} // namespace

BlockSparsity mlir::attn::analyzeBlockSparsity(MaskOp mask) {
  bool readsTables = false;
  for (Operation &op : mask.getBody().front().without_terminator()) {
    if (!hasIntervalRule(&op))
      return BlockSparsity::Dense;
    readsTables |= isa<ReadOp>(op);
  }
  return readsTables ? BlockSparsity::Tables : BlockSparsity::Indices;
}

SmallVector<MaskRead> mlir::attn::maskReads(MaskOp mask) {
  SmallVector<MaskRead> reads;
  mask.getBody().walk([&](ReadOp read) {
    if (std::optional<MaskRead> maskRead = asMaskRead(read))
      reads.push_back(*maskRead);
  });
  return reads;
}

Value mlir::attn::fixedReadIndex(ImplicitLocOpBuilder &b, Value index, Value batch, Value head) {
  if (isBlockArg(index, BatchArg))
    return batch;
  if (isBlockArg(index, HeadArg))
    return head;
  return b.clone(*index.getDefiningOp())->getResult(0);
}

TileClass mlir::attn::emitTileClass(ImplicitLocOpBuilder &b, MaskOp mask, const TileRanges &tile,
                                    ReadRange readRange) {
  return IntervalEmitter(b, tile, readRange).run(mask);
}
