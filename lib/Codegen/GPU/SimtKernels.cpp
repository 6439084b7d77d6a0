//===- SimtKernels.cpp - CUDA kernels, one warp per row -------------------===//
//
// The SIMT schedule: a block of kWarpsPerBlock warps handles kWarpsPerBlock
// query rows (forward, backward_prep, backward_dq) or key rows (backward_dkdv)
// of one (batch, head). Lane l owns the columns l, l + 32, ... of its row; a dot
// product over the head dim is a lane-local partial sum and a gpu.shuffle xor
// butterfly, after which every lane holds the score, so the normaliser state is
// warp-uniform and the control flow per key is uniform within a warp. The other
// operand's rows are staged in shared memory, kStagedRows at a time.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/GPU/GPUKernelBuilder.h"


using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cuda;

ValueRange GPUKernelBuilder::forEachStagedKey(
    const KernelArgs &args, Value blockEnd, Value keyTile, Value valueTile, ValueRange inits,
    function_ref<SmallVector<Value>(Value, Value, ValueRange)> body) {
  return buildLoop(
      b, index(0), blockEnd, inits,
      [&](Value j0, ValueRange acc) -> SmallVector<Value> {
        stageRows(keyTile, args.k, keys, j0, blockEnd, [&](Value x) { return math->feature(x); });
        stageRows(valueTile, args.v, keys, j0, blockEnd, [](Value x) { return x; });
        barrier();
        Value keysHere = minIndex(index(kStagedRows), arith::SubIOp::create(b, blockEnd, j0));
        SmallVector<Value> next = llvm::to_vector(buildLoop(
            b, index(0), keysHere, acc, [&](Value jj, ValueRange state) -> SmallVector<Value> {
              return body(addIndex(j0, jj), jj, state);
            }));
        barrier();
        return next;
      },
      index(kStagedRows));
}

void GPUKernelBuilder::buildForward() {
  // (q, k, v, o, row_max, row_sum, params, key_lengths, heads, nq, nk, causal)
  createKernel("forward", ATTN_CUDA_FORWARD_HEADS, ATTN_CUDA_FORWARD_NUM_ARGS,
               {kStagedRows, kStagedRows}, 0);
  KernelArgs args = forwardArgs();
  Value keyTile = sharedTiles[0], valueTile = sharedTiles[1];
  Value zero = constant(0.0);
  auto feature = [&](Value x) { return math->feature(x); };

  BlockRow warpQuery = warpRow(queries);
  Value i = warpQuery.index, qBase = warpQuery.base;
  SmallVector<Value> query;
  for (int64_t t = 0; t < columnsPerLane; ++t)
    query.push_back(mul(feature(loadStored(args.q, addIndex(qBase, column(t)))), scale));
  Value rowKeyEnd = keyBounds.end(b, i);
  Value blockEnd = blockKeyEnd(kWarpsPerBlock);

  // Carried: running max m (online), Σ h, unmasked-key count, the lane's outputs.
  SmallVector<Value> inits{online ? math->initialMax(rowAt(i), f32) : zero, zero, zero};
  inits.append(columnsPerLane, zero);
  SmallVector<Type> carriedTypes(inits.size(), f32);
  ValueRange row = forEachStagedKey(
      args, blockEnd, keyTile, valueTile, inits,
      [&](Value j, Value jj, ValueRange state) -> SmallVector<Value> {
        PairValues pair = pairAt(rowDot(query, keyTile, jj), i, j);
        return llvm::to_vector(buildBranch(
            b, keyKept(i, j, rowKeyEnd), carriedTypes,
            [&]() -> SmallVector<Value> {
              Value s = math->score(pair);
              // e^(m - m_new) is 0 for the first key (m = -inf, nothing accumulated yet).
              Value m = state[0];
              AttentionMath::Rescale step = math->pairRescale(m, pair, s);
              Value shift = step.max, alpha = step.alpha;
              Value g = math->numeratorTerm(pair, s, shift);
              SmallVector<Value> updated{
                  online ? shift : m,
                  math->accumulate({state[1], Value()}, alpha, math->denominatorTerm(pair, s, shift)).sum,
                  add(state[2], constant(1.0))};
              for (int64_t t = 0; t < columnsPerLane; ++t) {
                Value value = memref::LoadOp::create(b, valueTile, ValueRange{jj, column(t)});
                updated.push_back(add(math->rescaled(state[3 + t], alpha), mul(g, value)));
              }
              return updated;
            },
            [&]() -> SmallVector<Value> { return llvm::to_vector(state); }));
      });

  ifThen(warpQuery.valid, [&]() {
    AttentionMath::RowResult result = math->finalize(row[0], row[1], row[2], rowAt(i));
    for (int64_t t = 0; t < columnsPerLane; ++t)
      storeStored(mul(row[3 + t], result.outputScale), args.o, addIndex(qBase, column(t)));
    ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, index(0)), [&]() {
      Value statOffset = addIndex(mulIndex(batchHead, queries), i);
      storeF32(math->rowMax(result), args.rowMax, statOffset);
      storeF32(math->rowSum(result), args.rowSum, statOffset);
    });
  });
  gpu::ReturnOp::create(b);
}

void GPUKernelBuilder::buildBackwardPrep() {
  // (o, dout, delta, heads, nq)
  createKernel("backward_prep", ATTN_CUDA_PREP_HEADS, ATTN_CUDA_PREP_NUM_ARGS, {}, 0);
  Value o = arguments[ATTN_CUDA_PREP_O], dOut = arguments[ATTN_CUDA_PREP_DOUT],
        delta = arguments[ATTN_CUDA_PREP_DELTA];
  queries = toIndex(arguments[ATTN_CUDA_PREP_NQ]);
  Value i = addIndex(tileBase, warp);
  ifThen(less(i, queries), [&]() {
    Value base = rowOffset(queries, i, headDim);
    Value partial = constant(0.0);
    for (int64_t t = 0; t < columnsPerLane; ++t) {
      Value at = addIndex(base, column(t));
      partial = add(partial, mul(loadStored(dOut, at), loadStored(o, at)));
    }
    Value sum = warpSum(partial);
    ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, index(0)),
           [&]() { storeF32(sum, delta, addIndex(mulIndex(batchHead, queries), i)); });
  });
  gpu::ReturnOp::create(b);
}

void GPUKernelBuilder::buildBackwardDq() {
  // (q, k, v, dout, row_max, row_sum, delta, params, key_lengths, dq, heads, nq, nk, causal)
  createKernel("backward_dq", ATTN_CUDA_DQ_HEADS, ATTN_CUDA_DQ_NUM_ARGS, {kStagedRows, kStagedRows},
               0);
  KernelArgs args = dqArgs();
  Value keyTile = sharedTiles[0], valueTile = sharedTiles[1];
  Value zero = constant(0.0);
  auto feature = [&](Value x) { return math->feature(x); };

  BlockRow warpQuery = warpRow(queries);
  Value i = warpQuery.index, qBase = warpQuery.base;
  SmallVector<Value> query, rowGrad, queryRaw;
  for (int64_t t = 0; t < columnsPerLane; ++t) {
    Value at = addIndex(qBase, column(t));
    queryRaw.push_back(loadStored(args.q, at));
    query.push_back(mul(feature(queryRaw.back()), scale));
    rowGrad.push_back(loadStored(args.dOut, at));
  }
  Value statOffset = addIndex(mulIndex(batchHead, queries), i);
  // Fully masked rows (C = 0) contribute nothing.
  BackwardRow row =
      math->backwardRow(loadF32(args.rowMax, statOffset), loadF32(args.rowSum, statOffset),
                        loadF32(args.delta, statOffset));
  Value rowKeyEnd = keyBounds.end(b, i);
  Value blockEnd = blockKeyEnd(kWarpsPerBlock);

  SmallVector<Value> inits(columnsPerLane, zero);
  SmallVector<Type> carriedTypes(inits.size(), f32);
  ValueRange grad = forEachStagedKey(
      args, blockEnd, keyTile, valueTile, inits,
      [&](Value j, Value jj, ValueRange dqNow) -> SmallVector<Value> {
        PairValues pair = pairAt(rowDot(query, keyTile, jj), i, j);
        Value dP = rowDot(rowGrad, valueTile, jj);
        Value keep = both(row.live, keyKept(i, j, rowKeyEnd));
        return llvm::to_vector(buildBranch(
            b, keep, carriedTypes,
            [&]() -> SmallVector<Value> {
              Value dRaw = math->gradient(pair, math->score(pair), row, dP).rawGrad();
              SmallVector<Value> updated;
              for (int64_t t = 0; t < columnsPerLane; ++t)
                updated.push_back(
                    add(dqNow[t],
                        mul(dRaw, memref::LoadOp::create(b, keyTile, ValueRange{jj, column(t)}))));
              return updated;
            },
            [&]() -> SmallVector<Value> { return llvm::to_vector(dqNow); }));
      });

  // dQ = scale·Σ_j dRaw·φ(k_j), times φ'(q) with a feature map.
  ifThen(warpQuery.valid, [&]() {
    for (int64_t t = 0; t < columnsPerLane; ++t)
      storeStored(math->featureGrad(mul(grad[t], scale), queryRaw[t]), args.dq,
                  addIndex(qBase, column(t)));
  });
  gpu::ReturnOp::create(b);
}

void GPUKernelBuilder::buildBackwardDkDv() {
  // (q, k, v, dout, row_max, row_sum, delta, params, key_lengths, dk, dv, dparams,
  //  heads, nq, nk, causal)
  createKernel("backward_dkdv", ATTN_CUDA_DKDV_HEADS, ATTN_CUDA_DKDV_NUM_ARGS,
               {kStagedRows, kStagedRows}, 3);
  KernelArgs args = dkdvArgs();
  Value queryTile = sharedTiles[0], gradTile = sharedTiles[1];
  Value maxTile = sharedVectors[0], sumTile = sharedVectors[1], deltaTile = sharedVectors[2];
  Value zero = constant(0.0);
  unsigned numParams = paramValues.size();

  // One warp per key j.
  BlockRow warpKey = warpRow(keys);
  Value j = warpKey.index, kBase = warpKey.base;
  SmallVector<Value> key, value, keyRaw;
  for (int64_t t = 0; t < columnsPerLane; ++t) {
    Value at = addIndex(kBase, column(t));
    keyRaw.push_back(loadStored(args.k, at));
    key.push_back(math->feature(keyRaw.back()));
    value.push_back(loadStored(args.v, at));
  }
  // Keys at or past key_lengths are masked for every query; causal: only
  // queries i >= j see key j, so the block starts at its first key.
  Value keyLive = both(warpKey.valid, less(j, keyBounds.kvEnd));
  Value queryBegin = select(keyBounds.isCausal, minIndex(tileBase, queries), index(0));

  // Carried: the lane's dK and dV columns, then the warp-uniform dθ.
  SmallVector<Value> inits(2 * columnsPerLane + numParams, zero);
  SmallVector<Type> carriedTypes(inits.size(), f32);
  ValueRange acc = buildLoop(
      b, queryBegin, queries, inits,
      [&](Value i0, ValueRange accIn) -> SmallVector<Value> {
        stageRows(queryTile, args.q, queries, i0, queries,
                  [&](Value x) { return mul(math->feature(x), scale); });
        stageRows(gradTile, args.dOut, queries, i0, queries, [](Value x) { return x; });
        stageStatistics(i0, {args.rowMax, args.rowSum, args.delta}, {maxTile, sumTile, deltaTile});
        barrier();
        Value rowsHere = minIndex(index(kStagedRows), arith::SubIOp::create(b, queries, i0));
        SmallVector<Value> next = llvm::to_vector(buildLoop(
            b, index(0), rowsHere, accIn, [&](Value ii, ValueRange state) -> SmallVector<Value> {
              Value i = addIndex(i0, ii);
              PairValues pair = pairAt(rowDot(key, queryTile, ii), i, j);
              Value dP = rowDot(value, gradTile, ii);
              Value c = memref::LoadOp::create(b, sumTile, ValueRange{ii});
              Value keep = both(both(keyLive, math->rowLive(c)),
                                both(keyBounds.causalKeeps(b, i, j), math->maskKeeps(indicesAt(i, j))));
              return llvm::to_vector(buildBranch(
                  b, keep, carriedTypes,
                  [&]() -> SmallVector<Value> {
                    BackwardRow row =
                        math->backwardRow(memref::LoadOp::create(b, maxTile, ValueRange{ii}), c,
                                          memref::LoadOp::create(b, deltaTile, ValueRange{ii}));
                    AttentionMath::PairGradient grad =
                        math->gradient(pair, math->score(pair), row, dP);
                    Value w = grad.weight(), dRaw = grad.rawGrad();
                    SmallVector<Value> updated;
                    for (int64_t t = 0; t < columnsPerLane; ++t)
                      updated.push_back(
                          add(state[t], mul(dRaw, memref::LoadOp::create(
                                                      b, queryTile, ValueRange{ii, column(t)}))));
                    for (int64_t t = 0; t < columnsPerLane; ++t)
                      updated.push_back(add(
                          state[columnsPerLane + t],
                          mul(w, memref::LoadOp::create(b, gradTile, ValueRange{ii, column(t)}))));
                    for (unsigned p = 0; p < numParams; ++p)
                      updated.push_back(add(state[2 * columnsPerLane + p], grad.paramGrad(p)));
                    return updated;
                  },
                  [&]() -> SmallVector<Value> { return llvm::to_vector(state); }));
            }));
        barrier();
        return next;
      },
      index(kStagedRows));

  ifThen(warpKey.valid, [&]() {
    // With a feature map dK holds d/dφ(k); chain through φ'(k).
    for (int64_t t = 0; t < columnsPerLane; ++t) {
      Value at = addIndex(kBase, column(t));
      storeStored(math->featureGrad(acc[t], keyRaw[t]), args.dk, at);
      storeStored(acc[columnsPerLane + t], args.dv, at);
    }
    if (numParams == 0)
      return;
    ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, index(0)), [&]() {
      for (unsigned p = 0; p < numParams; ++p)
        LLVM::AtomicRMWOp::create(b, LLVM::AtomicBinOp::fadd, element(args.dParams, index(p), f32),
                                  acc[2 * columnsPerLane + p], LLVM::AtomicOrdering::monotonic);
    });
  });
  gpu::ReturnOp::create(b);
}
