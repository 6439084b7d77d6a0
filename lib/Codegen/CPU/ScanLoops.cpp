//===- ScanLoops.cpp - CPU loops of scan normalizers (stick-breaking) -----===//
//
// A scan normalizer (`denominator log_survival { d }`, docs/normalizer-classes.md)
// discounts each kept key's g(s_ij) by the survivals of the kept keys after it:
//
//   w_ij = g(s_ij)·e^(S_ij),  S_ij = Σ_{k kept, k > j} d(s_ik) <= 0,  O_i = Σ_j w_ij v_j
//   (+ r_i·v_i, r_i = e^(S_i), S_i the sum over every kept key: `left_over current`)
//
// Forward walks a row's keys from the last to the first carrying S (a sum of
// log-survivals, never a product of survivals: it stays exact where the
// product would underflow). Backward walks them in the same order carrying S and
// B = Σ_{j >= k} w_ij dP_ij; with D = dO_i·O_i = Σ_j w_ij dP_ij (+ r_i dP_i,
// the left-over's), D − B is the suffix sum the chain rule needs:
//
//   ds_ik = g'(s_ik)·e^(S_ik)·dP_ik + d'(s_ik)·(D − B_ik)
//
// which is AttentionMath's pair gradient (g'·dP − h'·D)/C at C = 1, dP·e^S for dP
// and B − D for D: params and learnable reads of either region follow alike.
// The row's state and its combine are RowAlgorithm's ScanState, the backward's
// (S, B) its ScanBackwardState. The forward takes
// key chunks [kv_begin, kv_len) as partial calls (row_max = S of the chunk, row_count
// the keys kept), which mergeScanRows (attn_merge_T) combines nearest chunk first:
// O = O_near + e^(S_near)·O_far. A kernel with a left-over has no merge entry (the
// chunk that adds r_i·v_i, the farthest, cannot tell whether key i is padding), and
// the backward takes every key of its rows: B of a chunk needs D − B of the chunks
// before it (KernelSplits.h: forward key_chunks, backward rows).
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/CPU/CPUKernelBuilder.h"


using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

SmallVector<Value> CPUKernelBuilder::rowKeysLastToFirst(
    Value i, Value begin, Value end, ValueRange acc,
    function_ref<SmallVector<Value>(Value, ValueRange)> keptPair) {
  Value last = arith::SubIOp::create(b, end, index(1));
  Value count = arith::MaxSIOp::create(b, arith::SubIOp::create(b, end, begin), index(0));
  return llvm::to_vector(loop(index(0), count, acc, [&](Value t, ValueRange pairAcc) {
    Value j = arith::SubIOp::create(b, last, t);
    return llvm::to_vector(branch(
        scalarMath->maskKeeps(indicesAt(i, j)), pairAcc.getTypes(),
        [&] { return keptPair(j, pairAcc); },
        [&] { return SmallVector<Value>(pairAcc.begin(), pairAcc.end()); }));
  }));
}

void CPUKernelBuilder::atCurrentKey(Value i, Value keyRows, function_ref<void(Value)> body) {
  Value j = keys.positionShift ? arith::AddIOp::create(b, i, keys.positionShift).getResult() : i;
  Value inside = arith::AndIOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::sge, j, index(0)),
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, j, keyRows));
  branch(inside, {}, [&]() -> SmallVector<Value> {
    body(j);
    return {};
  }, [] { return SmallVector<Value>(); });
}

void CPUKernelBuilder::buildScanForward(StringRef name) {
  OpBuilder::InsertionGuard guard(b);
  ForwardArgs args = beginForward(name, matrixType, /*lanewiseMath=*/false);
  Value q = args.q, k = args.k, v = args.v, o = args.o;
  Value valueDim = dim(v, 1);
  Value zero = constant(0.0), one = constant(1.0);
  RowAlgorithm rows(b, *scalarMath);
  loop(args.qBegin, args.qEnd, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
    zeroRow(o, i, valueDim);
    // Carried: the row's ScanState and the keys kept.
    SmallVector<Value> row = rowKeysLastToFirst(
        i, args.kvBegin, keys.end(b, i), {rows.scanInitial(type).logSurvival, zero},
        [&](Value j, ValueRange acc) -> SmallVector<Value> {
          PairValues pair = pairAt(contract(q, k, i, j), i, j);
          RowAlgorithm::ScanStep step = rows.scanPair({acc[0]}, pair, scalarMath->score(pair));
          axpyRow(o, i, step.weight, v, j, valueDim);
          return {step.next.logSurvival, add(acc[1], one)};
        });
    ScanState state{row[0]};
    // Only a kernel without a left-over has a merge entry, so only its calls are
    // partial (lowerKernelToLoops).
    if (normalizer.getLeftOverToCurrent())
      atCurrentKey(i, keys.kvEnd, [&](Value current) {
        axpyRow(o, i, rows.scanLeftOver(state), v, current, valueDim);
      });
    // row_max: S (log r_i when the call takes all the row's keys; 0 without keys);
    // row_sum: C = 1; a partial call's row_count: the keys kept.
    store(state.logSurvival, args.rowMax, {i});
    store(one, args.rowSum, {i});
    branch(args.partial, {}, [&]() -> SmallVector<Value> {
      store(row[1], args.rowCount, {i});
      return {};
    }, [] { return SmallVector<Value>(); });
    return {};
  });
  func::ReturnOp::create(b);
}

void CPUKernelBuilder::mergeScanRows(Value qBegin, Value qEnd, Value oParts, Value logSurvivalParts,
                                     Value o, Value rowMax, Value rowSum) {
  Value queries = dim(o, 0), valueDim = dim(o, 1);
  Value splits = arith::DivUIOp::create(b, dim(oParts, 0), queries);
  RowAlgorithm rows(b, *scalarMath);
  loop(qBegin, qEnd, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
    zeroRow(o, i, valueDim);
    // Split s holds keys below split s + 1's: each split is nearer than the ones
    // folded before it, O in place.
    ValueRange row = loop(
        index(0), splits, {rows.scanInitial(type).logSurvival},
        [&](Value split, ValueRange acc) -> SmallVector<Value> {
          Value at = arith::AddIOp::create(b, arith::MulIOp::create(b, split, queries), i);
          RowAlgorithm::ScanCombined step =
              rows.scanCombine({acc[0]}, {load(logSurvivalParts, {at})});
          loop(index(0), valueDim, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
            store(rows.scanCombineOutput(step, load(o, {i, c}), load(oParts, {at, c})), o, {i, c});
            return {};
          });
          return {step.state.logSurvival};
        });
    store(row[0], rowMax, {i});
    store(constant(1.0), rowSum, {i});
    return {};
  });
}

void CPUKernelBuilder::buildScanBackward(StringRef name) {
  OpBuilder::InsertionGuard guard(b);
  BackwardArgs args = beginBackward(name, matrixType, /*lanewiseMath=*/false);
  Value q = args.q, k = args.k, v = args.v, dOut = args.dOut;
  Value valueDim = dim(v, 1);
  RowAlgorithm rows(b, *scalarMath);
  zeroBackwardOutputs(args);
  loop(args.qBegin, args.qEnd, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
    Value delta = rowDot(dOut, i, args.o, i, valueDim);
    // Carried: the row's ScanBackwardState (S, B).
    RowAlgorithm::ScanBackwardState initial = rows.scanBackwardInitial(type);
    SmallVector<Value> row = rowKeysLastToFirst(
        i, args.kvBegin, keys.end(b, i), {initial.scan.logSurvival, initial.suffix},
        [&](Value j, ValueRange acc) -> SmallVector<Value> {
          RowAlgorithm::ScanBackwardState state{{acc[0]}, acc[1]};
          PairValues pair = pairAt(contract(q, k, i, j), i, j);
          Value s = scalarMath->score(pair);
          RowAlgorithm::ScanStep step = rows.scanPair(state.scan, pair, s);
          Value dP = rowDot(dOut, i, v, j, valueDim);
          RowAlgorithm::ScanBackwardStep next =
              rows.scanBackwardFold(state, step, pair, s, dP, delta);
          axpyRow(args.dv, j, step.weight, dOut, i, valueDim);
          addPairGradients(args, next.gradient, i, j);
          return {next.next.scan.logSurvival, next.next.suffix};
        });
    if (normalizer.getLeftOverToCurrent())
      atCurrentKey(i, keys.kvEnd, [&](Value current) {
        axpyRow(args.dv, current, rows.scanLeftOver({row[0]}), dOut, i, valueDim);
      });
    return {};
  });
  func::ReturnOp::create(b);
}
