//===- ThresholdLoops.cpp - CPU loops of implicit normalizers -------------===//
//
// An implicit normalizer (sparsemax, α-entmax: `denominator threshold c`)
// weights w_ij = g(s_ij − τ_i) with τ_i the root of Σ_j g(s_ij − τ_i) = c
// (docs/normalizer-classes.md). g is 0 for x <= 0 and non-decreasing
// (ThresholdAnalysis.h), so with m_i = max_j s_ij the root lies in
// [m_i − x_c, m_i] for any x_c with Σ_j g(s_ij − m_i + x_c) >= c, found by
// doubling x_c from 1. Per query row the forward
//   1. stores the scores of the kept keys in a scratch of Nk (−inf where masked)
//      and the max of each block of kThresholdKeyBlock keys;
//   2. brackets τ_i and refines the bracket by Newton steps from its lower end,
//      lo + (Σ_j g − c)/Σ_j g', falling back to bisection where a step leaves the
//      bracket (solveThreshold); for sparsemax exact once the support is found;
//   3. accumulates O_i = Σ_j w_ij v_j over the keys above τ_i.
// Every sum over keys skips the blocks whose max is <= τ: g is 0 on all of them.
// row_max gets τ_i and row_sum Σ_j w_ij (≈ c; both 0 for a row without keys),
// so the backward does not solve again. The backward differentiates
// Σ_j g(s_ij − τ_i) = c implicitly: with g'_ij = g'(s_ij − τ_i), dP_ij = dO_i·v_j,
//   ds_ij = g'_ij (dP_ij − r_i),   r_i = Σ_k g'_ik dP_ik / Σ_k g'_ik,
// and a param θ of g gets Σ_ij ∂g/∂θ (dP_ij − r_i) (dτ_i/dθ = Σ_j ∂g/∂θ / Σ_j g'),
// likewise a tensor input g reads: each is the generic backward's gradient at
// s − τ_i with C = 1 and dP − r_i for dP (AttentionMath::PairGradient). One pass
// over the row's keys finds r_i (keeping raw scores and dP in scratches), one
// more takes the gradients.
// τ_i needs every key of its row: the runtime never splits an implicit kernel's
// keys into chunks (KernelSplits.h: rows both ways; there is no merge entry),
// so kv_begin is 0 and `partial` is never set.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/CPU/CPUKernelBuilder.h"

#include <cmath>

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

/// Keys per block whose max score decides whether a sum visits it.
static constexpr int64_t kThresholdKeyBlock = 64;
/// Doublings of x_c from 1 before a row's bracket is given up (τ_i = NaN, and the
/// row's outputs with it): ThresholdAnalysis refuses a g that never reaches c at
/// its initial params.
static constexpr int64_t kBracketDoublings = 64;

namespace {
/// The per-call scratches of the threshold loops: one value per key, and one per
/// block of keys.
struct ThresholdScratch {
  Value perKey, perBlock;
};
} // namespace

static Value allocVector(ImplicitLocOpBuilder &b, FloatType type, Value size) {
  return memref::AllocOp::create(b, MemRefType::get({ShapedType::kDynamic}, type),
                                 ValueRange{size});
}

static ThresholdScratch allocScratch(ImplicitLocOpBuilder &b, FloatType type, Value keys) {
  Value blocks = arith::CeilDivUIOp::create(
      b, keys, arith::ConstantIndexOp::create(b, kThresholdKeyBlock));
  return {allocVector(b, type, keys), allocVector(b, type, blocks)};
}

/// The block of key j among blocks from `begin`.
static Value blockOf(ImplicitLocOpBuilder &b, Value j, Value begin) {
  return arith::DivUIOp::create(b, arith::SubIOp::create(b, j, begin),
                                arith::ConstantIndexOp::create(b, kThresholdKeyBlock));
}

CPUKernelBuilder::ThresholdSums
CPUKernelBuilder::thresholdSums(Value i, Value begin, Value end, Value scores, Value blockMaxima,
                                Value tau, bool withSlopes) {
  Value zero = constant(0.0), one = constant(1.0);
  BackwardRow unit{zero, one, zero, Value()};
  SmallVector<Value> inits{zero};
  if (withSlopes)
    inits.push_back(zero);
  ValueRange sums = loop(
      begin, end, inits,
      [&](Value j0, ValueRange acc) -> SmallVector<Value> {
        Value above = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT,
                                            load(blockMaxima, {blockOf(b, j0, begin)}), tau);
        return llvm::to_vector(branch(
            above, acc.getTypes(),
            [&] {
              Value blockEnd = arith::MinSIOp::create(
                  b, arith::AddIOp::create(b, j0, index(kThresholdKeyBlock)), end);
              return llvm::to_vector(
                  loop(j0, blockEnd, acc, [&](Value j, ValueRange keyAcc) -> SmallVector<Value> {
                    Value x = sub(load(scores, {j}), tau);
                    Value positive = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, x, zero);
                    PairIndices at = indicesAt(i, j);
                    // g is 0 for x <= 0; the select keeps a g that is NaN at −inf
                    // (a masked key) out of the sum.
                    auto where = [&](Value value) {
                      return arith::SelectOp::create(b, positive, value, zero).getResult();
                    };
                    SmallVector<Value> next{
                        add(keyAcc[0], where(scalarMath->numerator(x, zero, at)))};
                    if (withSlopes) {
                      Value slope = scalarMath->gradient(PairValues{x, at, Value()}, x, unit, one)
                                        .scoreGrad();
                      next.push_back(add(keyAcc[1], where(slope)));
                    }
                    return next;
                  }));
            },
            [&] { return SmallVector<Value>(acc.begin(), acc.end()); }));
      },
      index(kThresholdKeyBlock));
  return {sums[0], withSlopes ? sums[1] : Value()};
}

Value CPUKernelBuilder::solveThreshold(Value i, Value begin, Value end, Value scores,
                                       Value blockMaxima, Value maxScore) {
  Value c = constant(normalizer.getDenominatorConstant()->convertToDouble());
  Value one = constant(1.0), half = constant(0.5);
  auto reaches = [&](Value tau) {
    Value sum = thresholdSums(i, begin, end, scores, blockMaxima, tau, false).weights;
    return arith::CmpFOp::create(b, arith::CmpFPredicate::OGE, sum, c).getResult();
  };
  Value notYet = arith::ConstantIntOp::create(b, 0, 1);
  ValueRange width = loop(
      index(0), index(kBracketDoublings), {one, notYet},
      [&](Value, ValueRange acc) -> SmallVector<Value> {
        return llvm::to_vector(branch(
            acc[1], acc.getTypes(), [&] { return SmallVector<Value>(acc.begin(), acc.end()); },
            [&]() -> SmallVector<Value> {
              Value reached = reaches(sub(maxScore, acc[0]));
              return {arith::SelectOp::create(b, reached, acc[0], add(acc[0], acc[0])), reached};
            }));
      });
  Value lo = arith::SelectOp::create(b, width[1], sub(maxScore, width[0]), constant(NAN));
  // Safeguarded Newton on F(τ) = Σ_j g(s_ij − τ) − c, decreasing, with F(lo) >= 0 >
  // F(hi) throughout: from lo, τ = lo + F(lo)/F'(lo) where that lies inside (lo, hi),
  // else (and after a step that moved hi: a concave g overshoots) the midpoint. For
  // a convex g (α <= 2) every Newton step stays below the root and the iteration
  // converges from below, for sparsemax exactly once the support is found; it stops
  // when a step makes no progress or hits F = 0, after at most 2·(mantissa bits + 2)
  // steps, by which the midpoints alone have reached the float's resolution.
  ThresholdSums atLo = thresholdSums(i, begin, end, scores, blockMaxima, lo, true);
  Value no = arith::ConstantIntOp::create(b, 0, 1);
  int64_t steps = 2 * (type.getFPMantissaWidth() + 2);
  ValueRange solved = loop(
      index(0), index(steps), {lo, maxScore, atLo.weights, atLo.slopes, no, no},
      [&](Value, ValueRange acc) -> SmallVector<Value> {
        return llvm::to_vector(branch(
            acc[5], acc.getTypes(), [&] { return SmallVector<Value>(acc.begin(), acc.end()); },
            [&]() -> SmallVector<Value> {
              Value lo = acc[0], hi = acc[1], hiMoved = acc[4];
              auto between = [&](Value x) {
                return arith::AndIOp::create(
                           b, arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, x, lo),
                           arith::CmpFOp::create(b, arith::CmpFPredicate::OLT, x, hi))
                    .getResult();
              };
              Value newton = add(lo, arith::DivFOp::create(b, sub(acc[2], c), acc[3]));
              Value useNewton = arith::AndIOp::create(
                  b, between(newton),
                  arith::XOrIOp::create(b, hiMoved, arith::ConstantIntOp::create(b, 1, 1)));
              Value next =
                  arith::SelectOp::create(b, useNewton, newton, mul(half, add(lo, hi)));
              ThresholdSums at = thresholdSums(i, begin, end, scores, blockMaxima, next, true);
              Value reached = arith::CmpFOp::create(b, arith::CmpFPredicate::OGE, at.weights, c);
              Value exact = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, at.weights, c);
              Value stalled = arith::XOrIOp::create(b, between(next),
                                                    arith::ConstantIntOp::create(b, 1, 1));
              auto pick = [&](Value ifReached, Value otherwise) {
                return arith::SelectOp::create(b, reached, ifReached, otherwise).getResult();
              };
              return {pick(next, lo),
                      pick(hi, next),
                      pick(at.weights, acc[2]),
                      pick(at.slopes, acc[3]),
                      arith::XOrIOp::create(b, reached, arith::ConstantIntOp::create(b, 1, 1)),
                      arith::OrIOp::create(b, stalled, exact)};
            }));
      });
  return solved[0];
}

void CPUKernelBuilder::buildThresholdForward(StringRef name) {
  OpBuilder::InsertionGuard guard(b);
  ForwardArgs args = beginForward(name, matrixType, /*lanewiseMath=*/false);
  Value q = args.q, k = args.k, v = args.v, o = args.o;
  Value valueDim = dim(v, 1);
  Value zero = constant(0.0), lowest = constant(-INFINITY);
  ThresholdScratch scratch = allocScratch(b, type, dim(k, 0));
  Value scores = scratch.perKey, blockMaxima = scratch.perBlock;

  prepareBlockSparsity(kThresholdKeyBlock, arith::MaxSIOp::create(b, dim(q, 0), dim(k, 0)));
  loop(args.qBegin, args.qEnd, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
    loop(index(0), valueDim, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
      store(zero, o, {i, c});
      return {};
    });
    Value begin = args.kvBegin, end = keys.end(b, i);
    // The row's max score and kept-key count; scores and block maxima stored.
    ValueRange row = loop(
        begin, end, {lowest, index(0)},
        [&](Value j0, ValueRange acc) -> SmallVector<Value> {
          Value blockEnd = arith::MinSIOp::create(
              b, arith::AddIOp::create(b, j0, index(kThresholdKeyBlock)), end);
          loop(j0, blockEnd, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
            store(lowest, scores, {j});
            return {};
          });
          ValueRange block = rowKeyBlocks(
              i, j0, blockEnd, {lowest, acc[1]}, [&](Value j, ValueRange pairAcc) -> SmallVector<Value> {
                Value s = scalarMath->score(pairAt(contract(q, k, i, j), i, j));
                store(s, scores, {j});
                return {arith::MaximumFOp::create(b, pairAcc[0], s),
                        arith::AddIOp::create(b, pairAcc[1], index(1))};
              });
          store(block[0], blockMaxima, {blockOf(b, j0, begin)});
          return {arith::MaximumFOp::create(b, acc[0], block[0]), block[1]};
        },
        index(kThresholdKeyBlock));
    Value anyKey = arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, row[1], index(0));
    // τ_i and Σ_j w_ij; a row without keys keeps O = 0 and stores 0, 0.
    ValueRange stats = branch(
        anyKey, {type, type},
        [&]() -> SmallVector<Value> {
          Value tau = solveThreshold(i, begin, end, scores, blockMaxima, row[0]);
          Value total = loop(
              begin, end, {zero},
              [&](Value j0, ValueRange acc) -> SmallVector<Value> {
                Value above = arith::CmpFOp::create(
                    b, arith::CmpFPredicate::OGT, load(blockMaxima, {blockOf(b, j0, begin)}), tau);
                return llvm::to_vector(branch(
                    above, {type},
                    [&] {
                      Value blockEnd = arith::MinSIOp::create(
                          b, arith::AddIOp::create(b, j0, index(kThresholdKeyBlock)), end);
                      return llvm::to_vector(loop(
                          j0, blockEnd, acc, [&](Value j, ValueRange keyAcc) -> SmallVector<Value> {
                            Value x = sub(load(scores, {j}), tau);
                            Value positive =
                                arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, x, zero);
                            return llvm::to_vector(branch(
                                positive, {type},
                                [&]() -> SmallVector<Value> {
                                  Value w = scalarMath->numerator(x, zero, indicesAt(i, j));
                                  axpyRow(o, i, w, v, j, valueDim);
                                  return {add(keyAcc[0], w)};
                                },
                                [&] { return SmallVector<Value>{keyAcc[0]}; }));
                          }));
                    },
                    [&] { return SmallVector<Value>{acc[0]}; }));
              },
              index(kThresholdKeyBlock))[0];
          return {tau, total};
        },
        [&]() -> SmallVector<Value> { return {zero, zero}; });
    store(stats[0], args.rowMax, {i});
    store(stats[1], args.rowSum, {i});
    return {};
  });
  freeBlockSparsity();
  memref::DeallocOp::create(b, scores);
  memref::DeallocOp::create(b, blockMaxima);
  func::ReturnOp::create(b);
}

void CPUKernelBuilder::buildThresholdBackward(StringRef name) {
  OpBuilder::InsertionGuard guard(b);
  BackwardArgs args = beginBackward(name, matrixType, /*lanewiseMath=*/false);
  Value q = args.q, k = args.k, v = args.v, dOut = args.dOut;
  Value valueDim = dim(v, 1);
  zeroBackwardOutputs(args);
  RowAlgorithm rows(b, *scalarMath);
  Value zero = constant(0.0), one = constant(1.0);
  Value keyCount = dim(k, 0);
  Value raws = allocVector(b, type, keyCount), dPs = allocVector(b, type, keyCount);
  // C = 1: PairGradient's weight is g(s − τ) itself.
  BackwardRow unit{zero, one, zero, Value()};

  prepareBlockSparsity(kThresholdKeyBlock, arith::MaxSIOp::create(b, dim(q, 0), dim(k, 0)));
  loop(args.qBegin, args.qEnd, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
    auto ifLive = scf::IfOp::create(b, rows.rowLive(load(args.rowSum, {i})),
                                    /*withElseRegion=*/false);
    OpBuilder::InsertionGuard rowGuard(b);
    b.setInsertionPoint(ifLive.thenBlock()->getTerminator());
    Value tau = load(args.rowMax, {i});
    Value begin = args.kvBegin, end = keys.end(b, i);
    auto aboveThreshold = [&](Value x) {
      return arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, x, zero).getResult();
    };
    // r_i = Σ_j g'·dP / Σ_j g' over the keys above τ_i, keeping each kept key's
    // raw score and dP for the gradients.
    ValueRange sums = rowKeyBlocks(
        i, begin, end, {zero, zero}, [&](Value j, ValueRange acc) -> SmallVector<Value> {
          Value raw = contract(q, k, i, j);
          store(raw, raws, {j});
          PairValues pair = pairAt(raw, i, j);
          Value x = sub(scalarMath->score(pair), tau);
          return llvm::to_vector(branch(
              aboveThreshold(x), acc.getTypes(),
              [&]() -> SmallVector<Value> {
                Value dP = rowDot(dOut, i, v, j, valueDim);
                store(dP, dPs, {j});
                Value slope = scalarMath->gradient(pair, x, unit, one).scoreGrad();
                return {add(acc[0], mul(slope, dP)), add(acc[1], slope)};
              },
              [&] { return SmallVector<Value>(acc.begin(), acc.end()); }));
        });
    Value hasSlope = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, sums[1], zero);
    Value r = arith::SelectOp::create(
        b, hasSlope, arith::DivFOp::create(b, sums[0], sums[1]), zero);
    rowKeyBlocks(i, begin, end, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
      PairValues pair = pairAt(load(raws, {j}), i, j);
      Value x = sub(scalarMath->score(pair), tau);
      branch(
          aboveThreshold(x), {},
          [&]() -> SmallVector<Value> {
            AttentionMath::PairGradient grad =
                scalarMath->gradient(pair, x, unit, sub(load(dPs, {j}), r));
            axpyRow(args.dv, j, grad.weight(), dOut, i, valueDim);
            addPairGradients(args, grad, i, j);
            return {};
          },
          [&] { return SmallVector<Value>{}; });
      return {};
    });
    return {};
  });
  freeBlockSparsity();
  memref::DeallocOp::create(b, raws);
  memref::DeallocOp::create(b, dPs);
  func::ReturnOp::create(b);
}
