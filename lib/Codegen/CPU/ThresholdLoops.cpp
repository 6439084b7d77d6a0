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
//      bracket; for sparsemax exact once the support is found;
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
// The bracket, the iteration, how a key folds into its sums and r_i are
// RowEquations.h's (ThresholdState), through RowAlgorithm, as the Triton kernels'
// are; these loops supply the passes over the keys, the scratches and the block
// maxima.
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

SmallVector<Value>
CPUKernelBuilder::keysAboveThreshold(RowAlgorithm &rows, Value begin, Value end, Value blockMaxima,
                                     Value tau, ValueRange acc,
                                     function_ref<SmallVector<Value>(Value, ValueRange)> key) {
  return llvm::to_vector(loop(
      begin, end, acc,
      [&](Value j0, ValueRange blockAcc) -> SmallVector<Value> {
        Value above = rows.thresholdBlockAbove(load(blockMaxima, {blockOf(b, j0, begin)}), tau);
        return llvm::to_vector(branch(
            above, blockAcc.getTypes(),
            [&] {
              Value blockEnd = arith::MinSIOp::create(
                  b, arith::AddIOp::create(b, j0, index(kThresholdKeyBlock)), end);
              return llvm::to_vector(loop(j0, blockEnd, blockAcc, key));
            },
            [&] { return SmallVector<Value>(blockAcc.begin(), blockAcc.end()); }));
      },
      index(kThresholdKeyBlock)));
}

RowAlgorithm::ThresholdSums CPUKernelBuilder::thresholdSums(RowAlgorithm &rows, Value i,
                                                            Value begin, Value end, Value scores,
                                                            Value blockMaxima, Value tau,
                                                            bool withSlopes) {
  return RowAlgorithm::unpackThresholdSums(keysAboveThreshold(
      rows, begin, end, blockMaxima, tau,
      RowAlgorithm::pack(rows.thresholdSumsInitial(type, withSlopes)),
      [&](Value j, ValueRange acc) -> SmallVector<Value> {
        Value s = load(scores, {j});
        return RowAlgorithm::pack(rows.thresholdFoldKey(RowAlgorithm::unpackThresholdSums(acc),
                                                        s, tau, indicesAt(i, j)));
      }));
}

Value CPUKernelBuilder::solveThreshold(RowAlgorithm &rows, Value i, Value begin, Value end,
                                       Value scores, Value blockMaxima, Value maxScore) {
  auto sumsAt = [&](Value tau, bool withSlopes) {
    return thresholdSums(rows, i, begin, end, scores, blockMaxima, tau, withSlopes);
  };
  RowAlgorithm::ThresholdBracket initial = rows.thresholdBracketInitial(type);
  ValueRange bracket = loop(
      index(0), index(thresholdBracketDoublings), {initial.width, initial.found},
      [&](Value, ValueRange acc) -> SmallVector<Value> {
        return llvm::to_vector(branch(
            acc[1], acc.getTypes(), [&] { return SmallVector<Value>(acc.begin(), acc.end()); },
            [&]() -> SmallVector<Value> {
              RowAlgorithm::ThresholdBracket next =
                  rows.thresholdBracketStep({acc[0], acc[1]}, maxScore, sumsAt);
              return {next.width, next.found};
            }));
      });
  RowAlgorithm::ThresholdState start =
      rows.thresholdInitial(maxScore, {bracket[0], bracket[1]}, sumsAt);
  ValueRange solved = loop(
      index(0), index(RowAlgorithm::thresholdSteps(type)), RowAlgorithm::pack(start),
      [&](Value, ValueRange acc) -> SmallVector<Value> {
        RowAlgorithm::ThresholdState state = RowAlgorithm::unpackThresholdState(acc);
        return llvm::to_vector(branch(
            state.converged, acc.getTypes(),
            [&] { return SmallVector<Value>(acc.begin(), acc.end()); },
            [&] { return RowAlgorithm::pack(rows.thresholdStep(state, sumsAt)); }));
      });
  return rows.thresholdRoot(RowAlgorithm::unpackThresholdState(solved));
}

void CPUKernelBuilder::buildThresholdForward(StringRef name) {
  OpBuilder::InsertionGuard guard(b);
  ForwardArgs args = beginForward(name, matrixType, /*lanewiseMath=*/false);
  Value q = args.q, k = args.k, v = args.v, o = args.o;
  Value valueDim = dim(v, 1);
  Value zero = constant(0.0), lowest = constant(-INFINITY);
  ThresholdScratch scratch = allocScratch(b, type, dim(k, 0));
  Value scores = scratch.perKey, blockMaxima = scratch.perBlock;
  RowAlgorithm rows(b, *scalarMath);

  prepareBlockSparsity(kThresholdKeyBlock, arith::MaxSIOp::create(b, dim(q, 0), dim(k, 0)));
  loop(args.qBegin, args.qEnd, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
    zeroRow(o, i, valueDim);
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
          Value tau = solveThreshold(rows, i, begin, end, scores, blockMaxima, row[0]);
          // O_i = Σ_j w_ij v_j and Σ_j w_ij over the keys above τ_i.
          Value total = keysAboveThreshold(
              rows, begin, end, blockMaxima, tau, {zero},
              [&](Value j, ValueRange acc) -> SmallVector<Value> {
                Value x = rows.thresholdArgument(load(scores, {j}), tau);
                return llvm::to_vector(branch(
                    rows.thresholdAbove(x), {type},
                    [&]() -> SmallVector<Value> {
                      Value w = rows.thresholdWeight(x, indicesAt(i, j));
                      axpyRow(o, i, w, v, j, valueDim);
                      return {add(acc[0], w)};
                    },
                    [&] { return SmallVector<Value>{acc[0]}; }));
              })[0];
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
  Value keyCount = dim(k, 0);
  Value raws = allocVector(b, type, keyCount), dPs = allocVector(b, type, keyCount);

  prepareBlockSparsity(kThresholdKeyBlock, arith::MaxSIOp::create(b, dim(q, 0), dim(k, 0)));
  loop(args.qBegin, args.qEnd, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
    auto ifLive = scf::IfOp::create(b, rows.rowLive(load(args.rowSum, {i})),
                                    /*withElseRegion=*/false);
    OpBuilder::InsertionGuard rowGuard(b);
    b.setInsertionPoint(ifLive.thenBlock()->getTerminator());
    Value tau = load(args.rowMax, {i});
    Value begin = args.kvBegin, end = keys.end(b, i);
    // r_i over the keys above τ_i, keeping each kept key's raw score and dP for
    // the gradients.
    RowAlgorithm::ThresholdGradientSums initial = rows.thresholdGradientInitial(type);
    ValueRange sums = rowKeyBlocks(
        i, begin, end, {initial.slopeDP, initial.slopes},
        [&](Value j, ValueRange acc) -> SmallVector<Value> {
          Value raw = contract(q, k, i, j);
          store(raw, raws, {j});
          PairValues pair = pairAt(raw, i, j);
          Value x = rows.thresholdArgument(scalarMath->score(pair), tau);
          return llvm::to_vector(branch(
              rows.thresholdAbove(x), acc.getTypes(),
              [&]() -> SmallVector<Value> {
                Value dP = rowDot(dOut, i, v, j, valueDim);
                store(dP, dPs, {j});
                RowAlgorithm::ThresholdGradientSums next =
                    rows.thresholdGradientFold({acc[0], acc[1]}, rows.thresholdSlope(pair, x), dP);
                return {next.slopeDP, next.slopes};
              },
              [&] { return SmallVector<Value>(acc.begin(), acc.end()); }));
        });
    Value r = rows.thresholdCorrection({sums[0], sums[1]});
    rowKeyBlocks(i, begin, end, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
      PairValues pair = pairAt(load(raws, {j}), i, j);
      Value x = rows.thresholdArgument(scalarMath->score(pair), tau);
      branch(
          rows.thresholdAbove(x), {},
          [&]() -> SmallVector<Value> {
            AttentionMath::PairGradient grad =
                rows.thresholdPairGradient(pair, x, load(dPs, {j}), r);
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
