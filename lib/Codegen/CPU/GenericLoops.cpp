//===- GenericLoops.cpp - CPU loops for any head dim and stride -----------===//
//
// The schedule: forward walks query rows i in [q_begin, q_end) and keys j once,
// one pair at a time, the output row in memory; backward recomputes s_ij from q,
// k and the saved row statistics (nothing N×N is stored), accumulating dV, dK
// and dQ in memory. Every contraction is supported here: dot and scaled dot
// (through the feature map) and additive (tanh-dots of projected rows). A row's
// keys run in blocks of kGenericKeyBlock that the mask's block sparsity
// classifies (BlockSparsity.cpp): blocks it keeps no key of are skipped, blocks
// it keeps whole run without evaluating it.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/CPU/CPUKernelBuilder.h"

#include "lib/Analysis/KernelSignature.h"

#include "mlir/Dialect/Math/IR/Math.h"


using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

/// Keys per block a row's key loop classifies.
static constexpr int64_t kGenericKeyBlock = 64;

void CPUKernelBuilder::rowOffsetGrads(const BackwardRow &row, Value i, Value kvBegin,
                                      function_ref<void(unsigned, Value)> addParam) {
  auto ifFirstChunk = scf::IfOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, kvBegin, index(0)),
      /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifFirstChunk.thenBlock()->getTerminator());
  for (unsigned p = 0; p < paramValues.size(); ++p)
    if (Value grad = scalarMath->offsetParamGrad(p, row, rowAt(i)))
      addParam(p, grad);
  for (unsigned site = 0; site < fns.tableGrads.size(); ++site)
    if (!isPairSite(site)) {
      AttentionMath::TableGrad table = scalarMath->offsetTableGrad(site, row, rowAt(i));
      scatterTableGrad(fns.tableGrads[site].input, table.position, table.value);
    }
}

void CPUKernelBuilder::axpyRow(Value memref, Value row, Value factor, Value source, Value sourceRow,
                               Value n) {
  loop(index(0), n, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
    accumulate(memref, {row, c}, mul(factor, load(source, {sourceRow, c})));
    return {};
  });
}

void CPUKernelBuilder::zeroRow(Value memref, Value row, Value n) {
  Value zero = constant(0.0);
  loop(index(0), n, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
    store(zero, memref, {row, c});
    return {};
  });
}

Value CPUKernelBuilder::rowDot(Value x, Value i, Value y, Value j, Value n) {
  return loop(index(0), n, {constant(0.0)}, [&](Value col, ValueRange acc) -> SmallVector<Value> {
    return {add(acc[0], mul(load(x, {i, col}), load(y, {j, col})))};
  })[0];
}

void CPUKernelBuilder::zeroBackwardOutputs(const BackwardArgs &args) {
  auto zeroRows = [&](Value m, Value begin, Value end, Value cols) {
    loop(begin, end, {}, [&](Value r, ValueRange) -> SmallVector<Value> {
      zeroRow(m, r, cols);
      return {};
    });
  };
  Value valueDim = dim(args.v, 1);
  zeroRows(args.dq, args.qBegin, args.qEnd, headDim);
  zeroRows(args.dk, args.kvBegin, keys.kvEnd, headDim);
  zeroRows(args.dv, args.kvBegin, keys.kvEnd, valueDim);
  Value zero = constant(0.0);
  for (unsigned p = 0; p < paramValues.size(); ++p)
    store(zero, args.dParams, {index(p)});
}

void CPUKernelBuilder::addPairGradients(const BackwardArgs &args,
                                        AttentionMath::PairGradient &grad, Value i, Value j) {
  Value dRaw = grad.rawGrad();
  for (unsigned p = 0; p < paramValues.size(); ++p)
    accumulate(args.dParams, {index(p)}, grad.paramGrad(p));
  for (unsigned site = 0; site < fns.tableGrads.size(); ++site)
    if (isPairSite(site)) {
      AttentionMath::TableGrad table = grad.tableGrad(site);
      scatterTableGrad(fns.tableGrads[site].input, table.position, table.value);
    }
  // raw = scale · Σ_c φ(q_ic)·φ(k_jc), or additive Σ_c v_c·tanh(q_ic + k_jc)
  Value dDot = mul(dRaw, scale);
  loop(index(0), headDim, {}, [&](Value col, ValueRange) -> SmallVector<Value> {
    Value x = load(args.q, {i, col}), y = load(args.k, {j, col});
    if (isAdditive()) {
      Value t = math::TanhOp::create(b, add(x, y));
      Value vIndex = additiveWeightIndex(col);
      accumulate(args.dParams, {vIndex}, mul(dRaw, t));
      Value dPre = mul(mul(dRaw, load(args.params, {vIndex})), sub(constant(1.0), mul(t, t)));
      accumulate(args.dq, {i, col}, dPre);
      accumulate(args.dk, {j, col}, dPre);
      return {};
    }
    accumulate(args.dq, {i, col}, scalarMath->featureGrad(mul(dDot, scalarMath->feature(y)), x));
    accumulate(args.dk, {j, col}, scalarMath->featureGrad(mul(dDot, scalarMath->feature(x)), y));
    return {};
  });
}

PairValues CPUKernelBuilder::pairAt(Value raw, Value i, Value j) {
  return PairValues{raw, indicesAt(i, j), Value()};
}

SmallVector<Value>
CPUKernelBuilder::rowKeyBlocks(Value i, Value begin, Value end, ValueRange acc,
                               function_ref<SmallVector<Value>(Value, ValueRange)> keptPair) {
  return llvm::to_vector(loop(
      begin, end, acc,
      [&](Value j0, ValueRange blockAcc) -> SmallVector<Value> {
        Value blockEnd =
            arith::MinSIOp::create(b, arith::AddIOp::create(b, j0, index(kGenericKeyBlock)), end);
        IntRange rowRange{i, i}, keyRange{j0, arith::SubIOp::create(b, blockEnd, index(1))};
        return classifiedTile(rowRange, keyRange, blockAcc, [&](bool evaluateMask) {
          return llvm::to_vector(
              loop(j0, blockEnd, blockAcc, [&](Value j, ValueRange pairAcc) -> SmallVector<Value> {
                if (!evaluateMask)
                  return keptPair(j, pairAcc);
                return llvm::to_vector(branch(
                    scalarMath->maskKeeps(indicesAt(i, j)), pairAcc.getTypes(),
                    [&] { return keptPair(j, pairAcc); },
                    [&] { return SmallVector<Value>(pairAcc.begin(), pairAcc.end()); }));
              }));
        });
      },
      index(kGenericKeyBlock)));
}

Value CPUKernelBuilder::additiveWeightIndex(Value c) {
  return arith::AddIOp::create(b, c, index(kernelWeights(kernel)[2].offset)); // W_q, W_k, v
}

Value CPUKernelBuilder::contract(Value q, Value k, Value i, Value j) {
  if (isAdditive()) {
    // q, k are the projections W_q q, W_k k: raw = Σ_a v_a·tanh(q_ia + k_ja).
    return loop(index(0), headDim, {constant(0.0)},
                [&](Value a, ValueRange acc) -> SmallVector<Value> {
                  Value t = math::TanhOp::create(b, add(load(q, {i, a}), load(k, {j, a})));
                  Value va = load(paramsBuffer, {additiveWeightIndex(a)});
                  return {add(acc[0], mul(va, t))};
                })[0];
  }
  Value dot =
      loop(index(0), headDim, {constant(0.0)}, [&](Value c, ValueRange acc) -> SmallVector<Value> {
        Value x = scalarMath->feature(load(q, {i, c}));
        Value y = scalarMath->feature(load(k, {j, c}));
        return {add(acc[0], mul(x, y))};
      })[0];
  return mul(dot, scale);
}

void CPUKernelBuilder::buildForward(StringRef name) {
  OpBuilder::InsertionGuard guard(b);
  ForwardArgs args = beginForward(name, matrixType, /*lanewiseMath=*/false);
  Value q = args.q, k = args.k, v = args.v, o = args.o;
  Value valueDim = dim(v, 1);
  Value zero = constant(0.0);
  // Below f64, l and the row's O carry their rounding errors (AttentionMath::
  // accumulate); O's, one per column, live beside it.
  const bool compensated = scalarMath->carriesSumErrors(type);
  RowAlgorithm rows(b, *scalarMath, RowStateLayout(type, compensated, b.getIndexType()));
  Value outputError =
      compensated ? memref::AllocaOp::create(b, MemRefType::get({ShapedType::kDynamic}, type),
                                             ValueRange{valueDim})
                        .getResult()
                  : Value();

  prepareBlockSparsity(kGenericKeyBlock, arith::MaxSIOp::create(b, dim(q, 0), dim(k, 0)));
  loop(args.qBegin, args.qEnd, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
    loop(index(0), valueDim, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
      store(zero, o, {i, c});
      if (compensated)
        store(zero, outputError, {c});
      return {};
    });
    // Carried: the row's state (RowAlgorithm), counting its keys one at a time.
    SmallVector<Value> row = rowKeyBlocks(
        i, args.kvBegin, keys.end(b, i), rows.stateLayout().pack(rows.initial(rowAt(i))),
        [&](Value j, ValueRange acc) -> SmallVector<Value> {
          RowState state = rows.stateLayout().unpack(acc);
          PairValues pair = pairAt(contract(q, k, i, j), i, j);
          RowAlgorithm::PairStep step = rows.pairStep(state, pair, scalarMath->score(pair));
          loop(index(0), valueDim, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
            AttentionMath::RunningSum out =
                rows.foldOutput({load(o, {i, c}), compensated ? load(outputError, {c}) : Value()},
                                step.alpha, mul(step.numerator, load(v, {j, c})));
            store(out.sum, o, {i, c});
            if (compensated)
              store(out.error, outputError, {c});
            return {};
          });
          return rows.stateLayout().pack(rows.foldPair(state, step));
        });
    RowState finished = rows.withFloatCount(rows.stateLayout().unpack(row));
    // O accumulated in place: a partial call leaves it so (abi.h).
    finishRow(args, i, finished, [&](Value outputScale) {
      if (!outputScale)
        return;
      loop(index(0), valueDim, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
        store(mul(load(o, {i, c}), outputScale), o, {i, c});
        return {};
      });
    });
    return {};
  });
  freeBlockSparsity();
  func::ReturnOp::create(b);
}

void CPUKernelBuilder::buildBackward(StringRef name) {
  OpBuilder::InsertionGuard guard(b);
  BackwardArgs args = beginBackward(name, matrixType, /*lanewiseMath=*/false);
  Value q = args.q, k = args.k, v = args.v, o = args.o, dOut = args.dOut, dv = args.dv,
        dParams = args.dParams;
  Value valueDim = dim(v, 1);
  zeroBackwardOutputs(args);
  RowAlgorithm rows(b, *scalarMath);

  prepareBlockSparsity(kGenericKeyBlock, arith::MaxSIOp::create(b, dim(q, 0), dim(k, 0)));
  loop(args.qBegin, args.qEnd, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
    Value c = load(args.rowSum, {i});
    auto ifLive = scf::IfOp::create(b, rows.rowLive(c), /*withElseRegion=*/false);
    OpBuilder::InsertionGuard rowGuard(b);
    b.setInsertionPoint(ifLive.thenBlock()->getTerminator());
    BackwardRow row =
        rows.prepareBackward(load(args.rowMax, {i}), c, rowDot(dOut, i, o, i, valueDim));
    rowOffsetGrads(row, i, args.kvBegin,
                   [&](unsigned p, Value grad) { accumulate(dParams, {index(p)}, grad); });
    rowKeyBlocks(i, args.kvBegin, keys.end(b, i), {}, [&](Value j, ValueRange) -> SmallVector<Value> {
      PairValues pair = pairAt(contract(q, k, i, j), i, j);
      AttentionMath::PairGradient grad =
          scalarMath->gradient(pair, scalarMath->score(pair), row, rowDot(dOut, i, v, j, valueDim));
      axpyRow(dv, j, grad.weight(), dOut, i, valueDim);
      addPairGradients(args, grad, i, j);
      return {};
    });
    return {};
  });
  freeBlockSparsity();
  func::ReturnOp::create(b);
}
