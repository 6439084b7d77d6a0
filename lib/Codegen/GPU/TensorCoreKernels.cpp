//===- TensorCoreKernels.cpp - CUDA kernels on tensor cores ---------------===//
//
// The f16/bf16 schedule (online normalizers, or bf16), FlashAttention-2 style:
// 4 warps of 16 rows, tiles of the other operand in shared memory in the
// storage type, mma.sync m16n8k16 with f32 accumulators, the score-shaped
// accumulators reused as A fragments (P, dS), row max and sums over the 4 lanes
// of a fragment row with gpu.shuffle. Forward: S = φ(Q)·φ(K)ᵀ, O += P·V.
// backward_dq: S, dP = dO·Vᵀ, dQ += dS·φ(K). backward_dkdv (keys as rows):
// Sᵀ = φ(K)·φ(Q)ᵀ, dPᵀ = V·dOᵀ, dV += Pᵀ·dO, dK += dSᵀ·φ(Q). The attention math
// runs on one fragment element at a time (AttentionMath, pairs with a keep mask).
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/GPU/GPUKernelBuilder.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cuda;

SmallVector<Value> GPUKernelBuilder::mmaSync(ArrayRef<Value> a, ArrayRef<Value> bFragment,
                                             ArrayRef<Value> c) {
  SmallVector<Value> d;
  if (storage.isF16()) {
    Value matrixA = vector::FromElementsOp::create(b, VectorType::get({4, 2}, storage), a);
    Value matrixB = vector::FromElementsOp::create(b, VectorType::get({2, 2}, storage), bFragment);
    Value matrixC = vector::FromElementsOp::create(b, VectorType::get({2, 2}, f32), c);
    Value result =
        nvgpu::MmaSyncOp::create(b, matrixA, matrixB, matrixC, ArrayRef<int64_t>{16, 8, 16});
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t col = 0; col < 2; ++col)
        d.push_back(vector::ExtractOp::create(b, result, ArrayRef<int64_t>{r, col}));
    return d;
  }
  // bf16 pairs travel packed in one 32-bit register.
  auto packed = [&](ArrayRef<Value> elements) {
    SmallVector<Value> registers;
    for (size_t e = 0; e < elements.size(); e += 2) {
      Value pair = vector::FromElementsOp::create(b, VectorType::get({2}, storage),
                                                  ValueRange{elements[e], elements[e + 1]});
      registers.push_back(LLVM::BitcastOp::create(b, b.getI32Type(), pair));
    }
    return registers;
  };
  auto resultType = LLVM::LLVMStructType::getLiteral(b.getContext(), SmallVector<Type>(4, f32));
  Value result = NVVM::MmaOp::create(
      b, resultType, packed(a), packed(bFragment), c, ArrayRef<int64_t>{16, 8, 16}, std::nullopt,
      std::nullopt, std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16, NVVM::MMATypes::bf16},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row, NVVM::MMALayout::col});
  for (int64_t e = 0; e < 4; ++e)
    d.push_back(LLVM::ExtractValueOp::create(b, result, ArrayRef<int64_t>{e}));
  return d;
}

SmallVector<SmallVector<Value>>
GPUKernelBuilder::rowFragments(Value source, ArrayRef<BlockRow> rows,
                               function_ref<Value(Value)> transform) {
  // a_e: row half (e / 2) % 2, column 2·quad + e % 2 + 8·(e / 4) of the step.
  SmallVector<SmallVector<Value>> fragments;
  for (int64_t step = 0; step < headDim / 16; ++step) {
    SmallVector<Value> fragment;
    for (int64_t element = 0; element < 8; ++element) {
      int64_t half = (element / 2) % 2, offset = (element / 4) * 8 + element % 2;
      Value col = addIndex(quadColumn, index(step * 16 + offset));
      Value x = transform(loadStored(source, addIndex(rows[half].base, col)));
      fragment.push_back(arith::TruncFOp::create(b, storage, x));
    }
    fragments.push_back(fragment);
  }
  return fragments;
}

SmallVector<SmallVector<Value>> GPUKernelBuilder::productWithRows(ArrayRef<SmallVector<Value>> a,
                                                                  Value tile) {
  // B fragment of tileᵀ: b_e = tile[n = group, c = 2·quad + e % 2 + 8·(e / 2)].
  Value zero = constant(0.0);
  SmallVector<SmallVector<Value>> products;
  for (int64_t n = 0; n < cast<MemRefType>(tile.getType()).getDimSize(0) / 8; ++n) {
    SmallVector<Value> acc(4, zero);
    Value row = addIndex(group, index(n * 8));
    for (int64_t step = 0; step < headDim / 16; ++step) {
      SmallVector<Value> fragment;
      for (int64_t element = 0; element < 4; ++element) {
        Value col = addIndex(quadColumn, index(step * 16 + (element / 2) * 8 + element % 2));
        fragment.push_back(memref::LoadOp::create(b, tile, ValueRange{row, col}));
      }
      acc = mmaSync(a[step], fragment, acc);
    }
    products.push_back(acc);
  }
  return products;
}

void GPUKernelBuilder::accumulateWeighted(MutableArrayRef<Value> acc,
                                          ArrayRef<SmallVector<Value>> weights, Value tile) {
  // Accumulators of 8-row tiles 2s and 2s + 1 are the A fragment of 16-row step s;
  // B fragment: b_e = tile[n = 2·quad + e % 2 + 8·(e / 2) of the step, col group].
  for (int64_t step = 0; step < static_cast<int64_t>(weights.size()) / 2; ++step) {
    SmallVector<Value> a(weights[2 * step]);
    llvm::append_range(a, weights[2 * step + 1]);
    for (int64_t t = 0; t < headDim / 8; ++t) {
      Value col = addIndex(group, index(t * 8));
      SmallVector<Value> fragment;
      for (int64_t element = 0; element < 4; ++element) {
        Value row = addIndex(quadColumn, index(step * 16 + (element / 2) * 8 + element % 2));
        fragment.push_back(memref::LoadOp::create(b, tile, ValueRange{row, col}));
      }
      SmallVector<Value> updated = mmaSync(a, fragment, acc.slice(4 * t, 4));
      std::copy(updated.begin(), updated.end(), acc.begin() + 4 * t);
    }
  }
}

void GPUKernelBuilder::buildTensorCoreForward() {
  // (q, k, v, o, row_max, row_sum, params, key_lengths, heads, nq, nk, causal)
  createKernel("forward", ATTN_CUDA_FORWARD_HEADS, ATTN_CUDA_FORWARD_NUM_ARGS, {kMmaKeys, kMmaKeys},
               0, kMmaRows, kMmaThreads, storage, kMmaPad);
  KernelArgs args = forwardArgs();
  Value keyTile = sharedTiles[0], valueTile = sharedTiles[1];
  Value zero = constant(0.0), one = constant(1.0);
  auto feature = [&](Value x) { return math->feature(x); };
  Value minusInf = constant(-std::numeric_limits<double>::infinity());
  auto narrow = [&](Value x) { return arith::TruncFOp::create(b, storage, x).getResult(); };

  mmaCoordinates();
  SmallVector<BlockRow, 2> rows = fragmentRows(queries);
  SmallVector<Value> rowKeyEnd;
  for (const BlockRow &row : rows)
    rowKeyEnd.push_back(keyBounds.end(b, row.index));
  SmallVector<SmallVector<Value>> queryFragments = rowFragments(args.q, rows, feature);
  Value blockEnd = blockKeyEnd(kMmaRows);

  // Carried per row half: running max (row-uniform), this thread's share of Σ h
  // and of the key count; then the output accumulators, 4 per 8-column tile.
  const int64_t outputTiles = headDim / 8;
  SmallVector<Value> inits;
  for (int64_t half = 0; half < 2; ++half)
    inits.append({online ? math->initialMax(rowAt(rows[half].index), f32) : zero, zero, zero});
  inits.append(4 * outputTiles, zero);
  ValueRange carried = buildLoop(
      b, index(0), blockEnd, inits,
      [&](Value j0, ValueRange acc) -> SmallVector<Value> {
        stageRows(keyTile, args.k, keys, j0, blockEnd, feature);
        stageRows(valueTile, args.v, keys, j0, blockEnd, [](Value x) { return x; });
        barrier();
        // Scores: 8 key tiles of 8, each accumulated over the head dim in steps of 16.
        const int64_t keyTiles = kMmaKeys / 8;
        SmallVector<SmallVector<Value>> scores = productWithRows(queryFragments, keyTile);

        // The normaliser on this thread's 2 rows × 16 keys: score c(2·half + e) of
        // key tile t is key j0 + 8t + 2·quad + e of row half.
        SmallVector<Value> next(acc.begin(), acc.end());
        SmallVector<Value> alphas;
        SmallVector<SmallVector<Value>> weights(keyTiles, SmallVector<Value>(4));
        for (int64_t half = 0; half < 2; ++half) {
          Value i = rows[half].index;
          Value m = acc[3 * half], l = acc[3 * half + 1], count = acc[3 * half + 2];
          SmallVector<PairValues> pairs;
          SmallVector<Value> s;
          for (int64_t keyTileIndex = 0; keyTileIndex < keyTiles; ++keyTileIndex)
            for (int64_t e = 0; e < 2; ++e) {
              Value j = addIndex(j0, addIndex(quadColumn, index(keyTileIndex * 8 + e)));
              pairs.push_back(pairAt(mul(scores[keyTileIndex][2 * half + e], scale), i, j,
                                     keyKept(i, j, rowKeyEnd[half])));
              s.push_back(math->score(pairs.back()));
            }
          Value shift = zero, alpha;
          if (online) {
            Value tileMax = minusInf;
            for (auto [pair, score] : llvm::zip(pairs, s))
              tileMax = arith::MaximumFOp::create(b, tileMax, math->stabilizer(pair, score));
            AttentionMath::Rescale step =
                math->rescale(m, quadReduce(tileMax, /*maximum=*/true), /*mayBeEmpty=*/true);
            shift = step.max;
            alpha = step.alpha;
            next[3 * half] = shift;
          }
          Value hSum = zero, kept = zero;
          for (auto [position, pair] : llvm::enumerate(pairs)) {
            weights[position / 2][2 * half + position % 2] =
                narrow(math->numeratorTerm(pair, s[position], shift));
            if (Value h = math->denominatorTerm(pair, s[position], shift))
              hSum = add(hSum, h);
            kept = add(kept, select(pair.keep, one, zero));
          }
          next[3 * half + 1] = math->accumulate({l, Value()}, alpha, hSum).sum;
          next[3 * half + 2] = add(count, kept);
          alphas.push_back(alpha);
        }

        // O = O·e^(m_old - m_new) + P·V.
        SmallVector<Value> outputs;
        for (int64_t t = 0; t < outputTiles; ++t)
          for (int64_t element = 0; element < 4; ++element) {
            Value current = acc[6 + 4 * t + element];
            outputs.push_back(math->rescaled(current, alphas[element / 2]));
          }
        accumulateWeighted(outputs, weights, valueTile);
        std::copy(outputs.begin(), outputs.end(), next.begin() + 6);
        barrier();
        return next;
      },
      index(kMmaKeys));

  for (int64_t half = 0; half < 2; ++half) {
    Value m = carried[3 * half];
    Value l = quadReduce(carried[3 * half + 1], /*maximum=*/false);
    Value count = quadReduce(carried[3 * half + 2], /*maximum=*/false);
    ifThen(rows[half].valid, [&]() {
      AttentionMath::RowResult result = math->finalize(m, l, count, rowAt(rows[half].index));
      for (int64_t t = 0; t < outputTiles; ++t)
        for (int64_t e = 0; e < 2; ++e) {
          Value col = addIndex(quadColumn, index(t * 8 + e));
          storeStored(mul(carried[6 + 4 * t + 2 * half + e], result.outputScale), args.o,
                      addIndex(rows[half].base, col));
        }
      ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, quadColumn, index(0)), [&]() {
        Value statOffset = addIndex(mulIndex(batchHead, queries), rows[half].index);
        storeF32(math->rowMax(result), args.rowMax, statOffset);
        storeF32(math->rowSum(result), args.rowSum, statOffset);
      });
    });
  }
  gpu::ReturnOp::create(b);
}

void GPUKernelBuilder::buildTensorCoreBackwardDq() {
  // (q, k, v, dout, row_max, row_sum, delta, params, key_lengths, dq, heads, nq, nk, causal)
  createKernel("backward_dq", ATTN_CUDA_DQ_HEADS, ATTN_CUDA_DQ_NUM_ARGS, {kMmaKeys, kMmaKeys}, 0,
               kMmaRows, kMmaThreads, storage, kMmaPad);
  KernelArgs args = dqArgs();
  Value keyTile = sharedTiles[0], valueTile = sharedTiles[1];
  Value zero = constant(0.0);
  auto feature = [&](Value x) { return math->feature(x); };
  auto narrow = [&](Value x) { return arith::TruncFOp::create(b, storage, x).getResult(); };

  mmaCoordinates();
  SmallVector<BlockRow, 2> rows = fragmentRows(queries);
  SmallVector<Value> rowKeyEnd;
  SmallVector<BackwardRow> stats;
  for (const BlockRow &row : rows) {
    rowKeyEnd.push_back(keyBounds.end(b, row.index));
    Value statOffset = addIndex(mulIndex(batchHead, queries), row.index);
    // Fully masked rows (C = 0) contribute nothing.
    stats.push_back(math->backwardRow(loadF32(args.rowMax, statOffset),
                                      loadF32(args.rowSum, statOffset),
                                      loadF32(args.delta, statOffset)));
  }
  SmallVector<SmallVector<Value>> queryFragments = rowFragments(args.q, rows, feature);
  SmallVector<SmallVector<Value>> gradFragments =
      rowFragments(args.dOut, rows, [](Value x) { return x; });
  Value blockEnd = blockKeyEnd(kMmaRows);

  const int64_t outputTiles = headDim / 8, keyTiles = kMmaKeys / 8;
  SmallVector<Value> inits(4 * outputTiles, zero);
  ValueRange grad = buildLoop(
      b, index(0), blockEnd, inits,
      [&](Value j0, ValueRange acc) -> SmallVector<Value> {
        stageRows(keyTile, args.k, keys, j0, blockEnd, feature);
        stageRows(valueTile, args.v, keys, j0, blockEnd, [](Value x) { return x; });
        barrier();
        SmallVector<SmallVector<Value>> scores = productWithRows(queryFragments, keyTile);
        SmallVector<SmallVector<Value>> dPs = productWithRows(gradFragments, valueTile);
        // dRaw = (g'·dP - h'·D)/C · mod'(raw) for this thread's 2 rows × 16 keys.
        SmallVector<SmallVector<Value>> scoreGrads(keyTiles, SmallVector<Value>(4));
        for (int64_t half = 0; half < 2; ++half)
          for (int64_t t = 0; t < keyTiles; ++t)
            for (int64_t e = 0; e < 2; ++e) {
              Value i = rows[half].index;
              Value j = addIndex(j0, addIndex(quadColumn, index(t * 8 + e)));
              Value keep = both(stats[half].live, keyKept(i, j, rowKeyEnd[half]));
              PairValues pair = pairAt(mul(scores[t][2 * half + e], scale), i, j, keep);
              AttentionMath::PairGradient grad =
                  math->gradient(pair, math->score(pair), stats[half], dPs[t][2 * half + e]);
              scoreGrads[t][2 * half + e] = narrow(grad.rawGrad());
            }
        // dQ += dRaw·φ(K).
        SmallVector<Value> next(acc.begin(), acc.end());
        accumulateWeighted(next, scoreGrads, keyTile);
        barrier();
        return next;
      },
      index(kMmaKeys));

  // dQ = scale·Σ_j dRaw·φ(k_j), times φ'(q) with a feature map.
  for (int64_t half = 0; half < 2; ++half)
    ifThen(rows[half].valid, [&]() {
      for (int64_t t = 0; t < outputTiles; ++t)
        for (int64_t e = 0; e < 2; ++e) {
          Value at = addIndex(rows[half].base, addIndex(quadColumn, index(t * 8 + e)));
          Value value = mul(grad[4 * t + 2 * half + e], scale);
          storeStored(math->featureGrad(value, loadStored(args.q, at)), args.dq, at);
        }
    });
  gpu::ReturnOp::create(b);
}

void GPUKernelBuilder::buildTensorCoreBackwardDkDv() {
  // (q, k, v, dout, row_max, row_sum, delta, params, key_lengths, dk, dv, dparams,
  //  heads, nq, nk, causal)
  createKernel("backward_dkdv", ATTN_CUDA_DKDV_HEADS, ATTN_CUDA_DKDV_NUM_ARGS,
               {kMmaBackwardQueries, kMmaBackwardQueries}, 3, kMmaRows, kMmaThreads, storage,
               kMmaPad);
  KernelArgs args = dkdvArgs();
  Value queryTile = sharedTiles[0], gradTile = sharedTiles[1];
  Value maxTile = sharedVectors[0], sumTile = sharedVectors[1], deltaTile = sharedVectors[2];
  Value zero = constant(0.0);
  auto narrow = [&](Value x) { return arith::TruncFOp::create(b, storage, x).getResult(); };
  auto feature = [&](Value x) { return math->feature(x); };
  unsigned numParams = paramValues.size();

  // Each warp owns 16 keys (the mma rows); keys past nk repeat the last key and
  // store nothing; keys at or past key_lengths are masked for every query.
  mmaCoordinates();
  SmallVector<BlockRow, 2> keyRows = fragmentRows(keys);
  SmallVector<Value> keyLive;
  for (const BlockRow &key : keyRows)
    keyLive.push_back(both(key.valid, less(key.index, keyBounds.kvEnd)));
  // Causal: only queries i >= j see key j, so the block starts at its first key.
  Value queryBegin = select(keyBounds.isCausal, minIndex(tileBase, queries), index(0));

  // Carried: dK accumulators, dV accumulators (4 per 8-column tile each), then
  // this thread's share of each dθ.
  const int64_t outputTiles = headDim / 8, queryTiles = kMmaBackwardQueries / 8;
  SmallVector<Value> inits(8 * outputTiles + numParams, zero);
  ValueRange acc = buildLoop(
      b, queryBegin, queries, inits,
      [&](Value i0, ValueRange accIn) -> SmallVector<Value> {
        stageRows(queryTile, args.q, queries, i0, queries, feature);
        stageRows(gradTile, args.dOut, queries, i0, queries, [](Value x) { return x; });
        stageStatistics(i0, {args.rowMax, args.rowSum, args.delta}, {maxTile, sumTile, deltaTile});
        barrier();
        // Transposed tiles: rows are this thread's keys, columns the staged queries.
        // φ(K)'s and V's fragments are reloaded (from cache) per tile rather than
        // held: next to the dK and dV accumulators they make the d = 128 kernel spill.
        SmallVector<SmallVector<Value>> scores =
            productWithRows(rowFragments(args.k, keyRows, feature), queryTile);
        SmallVector<SmallVector<Value>> dPs =
            productWithRows(rowFragments(args.v, keyRows, [](Value x) { return x; }), gradTile);
        SmallVector<Value> next(accIn.begin(), accIn.end());
        SmallVector<SmallVector<Value>> weights(queryTiles, SmallVector<Value>(4)),
            scoreGrads(queryTiles, SmallVector<Value>(4));
        for (int64_t half = 0; half < 2; ++half)
          for (int64_t t = 0; t < queryTiles; ++t)
            for (int64_t e = 0; e < 2; ++e) {
              Value j = keyRows[half].index;
              Value local = addIndex(quadColumn, index(t * 8 + e));
              Value i = addIndex(i0, local);
              BackwardRow row =
                  math->backwardRow(memref::LoadOp::create(b, maxTile, ValueRange{local}),
                                    memref::LoadOp::create(b, sumTile, ValueRange{local}),
                                    memref::LoadOp::create(b, deltaTile, ValueRange{local}));
              Value keep = both(both(keyLive[half], row.live),
                                both(keyBounds.causalKeeps(b, i, j), math->maskKeeps(indicesAt(i, j))));
              PairValues pair = pairAt(mul(scores[t][2 * half + e], scale), i, j, keep);
              AttentionMath::PairGradient grad =
                  math->gradient(pair, math->score(pair), row, dPs[t][2 * half + e]);
              weights[t][2 * half + e] = narrow(grad.weight());
              scoreGrads[t][2 * half + e] = narrow(grad.rawGrad());
              for (unsigned p = 0; p < numParams; ++p)
                next[8 * outputTiles + p] = add(next[8 * outputTiles + p], grad.paramGrad(p));
            }
        // dK += dRaw·φ(Q) (scaled at the end), dV += W·dO.
        accumulateWeighted(MutableArrayRef<Value>(next).slice(0, 4 * outputTiles), scoreGrads,
                           queryTile);
        accumulateWeighted(MutableArrayRef<Value>(next).slice(4 * outputTiles, 4 * outputTiles),
                           weights, gradTile);
        barrier();
        return next;
      },
      index(kMmaBackwardQueries));

  for (int64_t half = 0; half < 2; ++half)
    ifThen(keyRows[half].valid, [&]() {
      // With a feature map dK holds d/dφ(k); chain through φ'(k).
      for (int64_t t = 0; t < outputTiles; ++t)
        for (int64_t e = 0; e < 2; ++e) {
          Value at = addIndex(keyRows[half].base, addIndex(quadColumn, index(t * 8 + e)));
          Value grad = mul(acc[4 * t + 2 * half + e], scale);
          storeStored(math->featureGrad(grad, loadStored(args.k, at)), args.dk, at);
          storeStored(acc[4 * outputTiles + 4 * t + 2 * half + e], args.dv, at);
        }
    });
  // dθ: the warp's 16 keys × the queries, summed over its lanes, one atomic per param.
  SmallVector<Value> paramGrads;
  for (unsigned p = 0; p < numParams; ++p)
    paramGrads.push_back(warpSum(acc[8 * outputTiles + p]));
  if (numParams != 0)
    ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, index(0)), [&]() {
      for (unsigned p = 0; p < numParams; ++p)
        LLVM::AtomicRMWOp::create(b, LLVM::AtomicBinOp::fadd, element(args.dParams, index(p), f32),
                                  paramGrads[p], LLVM::AtomicOrdering::monotonic);
    });
  gpu::ReturnOp::create(b);
}
