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
// Both carry the whole row: a call takes every key of its rows (runtime
// SliceCalls::QueryRows), so there is no partial state and no merge entry.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/CPU/CPUKernelBuilder.h"

#include "mlir/Dialect/Math/IR/Math.h"

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
  Value zero = constant(0.0);
  loop(args.qBegin, args.qEnd, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
    loop(index(0), valueDim, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
      store(zero, o, {i, c});
      return {};
    });
    // Carried: S, the log-survival of the kept keys after j.
    SmallVector<Value> row = rowKeysLastToFirst(
        i, args.kvBegin, keys.end(b, i), {zero},
        [&](Value j, ValueRange acc) -> SmallVector<Value> {
          PairValues pair = pairAt(contract(q, k, i, j), i, j);
          Value s = scalarMath->score(pair);
          Value w = mul(scalarMath->numerator(s, zero, pair.at), math::ExpOp::create(b, acc[0]));
          axpyRow(o, i, w, v, j, valueDim);
          return {add(acc[0], scalarMath->denominator(s, zero, pair.at))};
        });
    Value logLeftOver = row[0];
    if (normalizer.getLeftOverToCurrent())
      atCurrentKey(i, keys.kvEnd, [&](Value current) {
        axpyRow(o, i, math::ExpOp::create(b, logLeftOver), v, current, valueDim);
      });
    // row_max: log r_i (0 without keys); row_sum: C = 1. A scan's calls are never
    // partial (no row_count).
    store(logLeftOver, args.rowMax, {i});
    store(constant(1.0), args.rowSum, {i});
    return {};
  });
  func::ReturnOp::create(b);
}

void CPUKernelBuilder::buildScanBackward(StringRef name) {
  OpBuilder::InsertionGuard guard(b);
  BackwardArgs args = beginBackward(name, matrixType, /*lanewiseMath=*/false);
  Value q = args.q, k = args.k, v = args.v, dOut = args.dOut;
  Value valueDim = dim(v, 1);
  Value zero = constant(0.0);
  Value always = arith::ConstantIntOp::create(b, 1, 1);
  zeroBackwardOutputs(args);
  loop(args.qBegin, args.qEnd, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
    Value delta = rowDot(dOut, i, args.o, i, valueDim);
    // Carried: S and B = Σ_{j >= k} w_ij dP_ij.
    SmallVector<Value> row = rowKeysLastToFirst(
        i, args.kvBegin, keys.end(b, i), {zero, zero},
        [&](Value j, ValueRange acc) -> SmallVector<Value> {
          Value logSurvival = acc[0];
          PairValues pair = pairAt(contract(q, k, i, j), i, j);
          Value s = scalarMath->score(pair);
          Value survival = math::ExpOp::create(b, logSurvival);
          Value w = mul(scalarMath->numerator(s, zero, pair.at), survival);
          Value dP = rowDot(dOut, i, v, j, valueDim);
          Value suffix = add(acc[1], mul(w, dP));
          // (g'·dP·e^S − d'·(B − D))/1: the pair gradient at C = 1.
          BackwardRow scanRow{zero, constant(1.0), sub(suffix, delta), always};
          AttentionMath::PairGradient grad =
              scalarMath->gradient(pair, s, scanRow, mul(dP, survival));
          axpyRow(args.dv, j, w, dOut, i, valueDim);
          addPairGradients(args, grad, i, j);
          return {add(logSurvival, scalarMath->denominator(s, zero, pair.at)), suffix};
        });
    if (normalizer.getLeftOverToCurrent())
      atCurrentKey(i, keys.kvEnd, [&](Value current) {
        axpyRow(args.dv, current, math::ExpOp::create(b, row[0]), dOut, i, valueDim);
      });
    return {};
  });
  func::ReturnOp::create(b);
}
