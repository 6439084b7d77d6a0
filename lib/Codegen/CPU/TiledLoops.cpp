//===- TiledLoops.cpp - register-blocked CPU tiles -------------------------===//
//
// The schedule for head dims 32/64/128 with contiguous rows (head dim == value
// dim): a block of `rows` query rows against panels of packed φ(k)ᵀ (and vᵀ)
// keys, the score (and dP) tiles as FMA vector products held in registers (the
// additive contraction: Σ_c v_c·tanh(q_rc + k_jc) on the same panels), the
// attention math on vector<lanes x T> lanes of one row (AttentionMath), row
// reductions with vector.reduction, causal tiles skipped by the loop bounds,
// tiles the mask region keeps no pair of skipped and those it keeps whole run
// without it (BlockSparsity.cpp).
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/CPU/CPUKernelBuilder.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

/// What the matrices of one block of keys may take so that they stay in L2 while
/// the rows pass (recent x86 cores have 1-2 MiB each): the forward's key and value
/// panels; the backward's, and the dK and dV rows they accumulate into.
static constexpr int64_t kForwardKeyBlockBytes = 256 * 1024;
static constexpr int64_t kBackwardKeyBlockBytes = 512 * 1024;
/// Row tiles per forward query panel: each key block is read from L2 by every tile
/// of the panel, and once per panel from farther away.
static constexpr int64_t kForwardPanelTiles = 32;
/// How many keys ahead of the one it scores the decode forward prefetches K's row:
/// the L2 streamer stops at every 4 KiB page and learns the stream again from misses,
/// and a decoder step reads each row of K once (32 rows: 8-16 KiB at d = 64-128 in
/// f32). Measured 3-8% on decoder steps (bench/few_rows.py rows), 1 and 2 threads.
static constexpr int64_t kDecodePrefetchKeys = 32;
/// One prefetch per cache line of a row.
static constexpr int64_t kCacheLineBytes = 64;
/// Register tiles of rows per backward row block: the dK, dV and dQ updates sum
/// over all of them, so each key tile's operands come from L2 once per block.
static constexpr int64_t kBackwardRowTiles = 4;
/// Vectors of each target row a backward update step holds in registers.
static constexpr int64_t kUpdateVectors = 4;

/// Keys per block when `matrices` [keys x headDim] matrices of `type` may take
/// `bytes`: a multiple of the tile's `blockKeys`, at least one tile.
static int64_t keyBlockFor(int64_t bytes, int64_t matrices, int64_t headDim, Type type,
                           int64_t blockKeys) {
  int64_t perKey = matrices * headDim * static_cast<int64_t>(type.getIntOrFloatBitWidth()) / 8;
  return std::max<int64_t>(blockKeys, bytes / perKey / blockKeys * blockKeys);
}

Value CPUKernelBuilder::allocPanels(Value paddedKeys, int64_t headDim, int64_t blockKeys) {
  Value rows = arith::MulIOp::create(b, arith::DivUIOp::create(b, paddedKeys, index(blockKeys)),
                                     index(headDim));
  return memref::AllocOp::create(b, MemRefType::get({ShapedType::kDynamic, blockKeys}, type),
                                 ValueRange{rows}, b.getI64IntegerAttr(64));
}

Value CPUKernelBuilder::panelBase(Value j, int64_t headDim, int64_t blockKeys) {
  return arith::MulIOp::create(b, arith::DivUIOp::create(b, j, index(blockKeys)), index(headDim));
}

SmallVector<Value> CPUKernelBuilder::panelIndex(Value j, Value c, int64_t headDim,
                                                int64_t blockKeys) {
  return {arith::AddIOp::create(b, panelBase(j, headDim, blockKeys), c),
          arith::RemUIOp::create(b, j, index(blockKeys))};
}

CPUKernelBuilder::RowKeys CPUKernelBuilder::rowKeysAt(Value j0, Value rowEnd, int64_t tileKeys) {
  Value span = arith::MaxSIOp::create(
      b, arith::MinSIOp::create(b, arith::SubIOp::create(b, rowEnd, j0), index(tileKeys)),
      index(0));
  Value span32 = arith::IndexCastOp::create(b, b.getI32Type(), span);
  return {j0, span,
          vector::BroadcastOp::create(b, VectorType::get({lanes}, b.getI32Type()), span32)};
}

CPUKernelBuilder::RowKeys CPUKernelBuilder::wholeRowKeys(Value j0, int64_t tileKeys) {
  auto spanType = VectorType::get({lanes}, b.getI32Type());
  return {j0, index(tileKeys),
          arith::ConstantOp::create(
              b, DenseElementsAttr::get(spanType, static_cast<int32_t>(tileKeys)))};
}

CPUKernelBuilder::KeyLanes CPUKernelBuilder::keyLanesAt(const RowKeys &row, int64_t vector,
                                                        Value i, bool evaluateMask) {
  // Lane l of vector h is key j0 + h·lanes + l: kept while that offset is below
  // the row's span, one compare with a constant per vector.
  SmallVector<int32_t> offsets;
  for (int64_t lane = 0; lane < lanes; ++lane)
    offsets.push_back(static_cast<int32_t>(vector * lanes + lane));
  auto offsetType = VectorType::get({lanes}, b.getI32Type());
  Value keep = arith::CmpIOp::create(
      b, arith::CmpIPredicate::sgt, row.spanLanes,
      arith::ConstantOp::create(b, DenseElementsAttr::get(offsetType, ArrayRef(offsets))));
  // Every region may read the key index; unused lanes fold away after inlining.
  Value jLanes = arith::AddIOp::create(
      b, splat(arith::AddIOp::create(b, row.j0, index(vector * lanes))),
      vector::StepOp::create(b, VectorType::get({lanes}, b.getIndexType())));
  if (evaluateMask)
    keep = arith::AndIOp::create(b, keep, laneMath->maskKeeps(indexLanes(i, jLanes)));
  return {keep, jLanes};
}

PairIndices CPUKernelBuilder::indexLanes(Value i, Value jLanes) {
  return {splat(batchIndex), splat(headIndex), splat(queryAt(i)), keyAt(jLanes)};
}

PairValues CPUKernelBuilder::pairLanes(Value raw, Value i, const KeyLanes &keyLanes, Value keep) {
  return PairValues{raw, indexLanes(i, keyLanes.jLanes), keep};
}

void CPUKernelBuilder::freePacked(const PackedKeys &packed, Value k) {
  for (Value buffer : {packed.keysT, packed.valuesT, packed.keyRows})
    if (buffer && buffer != k)
      memref::DeallocOp::create(b, buffer);
}

SmallVector<Value> CPUKernelBuilder::panelProduct(int64_t rows, int64_t scoreVectors,
                                                  int64_t headDim, Value panels, Value panel,
                                                  function_ref<Value(int64_t, Value)> rowScalar) {
  SmallVector<Value> init(rows * scoreVectors, splatConstant(0.0));
  return llvm::to_vector(
      loop(index(0), index(headDim), init, [&](Value c, ValueRange t) -> SmallVector<Value> {
        SmallVector<Value> columns;
        Value row = arith::AddIOp::create(b, panel, c);
        for (int64_t h = 0; h < scoreVectors; ++h)
          columns.push_back(
              vector::LoadOp::create(b, laneType, panels, ValueRange{row, index(h * lanes)}));
        SmallVector<Value> next;
        for (int64_t r = 0; r < rows; ++r) {
          Value x = splat(rowScalar(r, c));
          for (int64_t h = 0; h < scoreVectors; ++h)
            next.push_back(vector::FMAOp::create(b, x, columns[h], t[r * scoreVectors + h]));
        }
        return next;
      }));
}

void CPUKernelBuilder::updateInChunks(
    Value target, ArrayRef<Value> targetRows, int64_t headDim, int64_t vectorsPerStep,
    function_ref<SmallVector<Value>(ArrayRef<Value>, ValueRange)> update) {
  loop(
      index(0), index(headDim), {},
      [&](Value chunk, ValueRange) -> SmallVector<Value> {
        SmallVector<Value> column, acc;
        for (int64_t c = 0; c < vectorsPerStep; ++c)
          column.push_back(arith::AddIOp::create(b, chunk, index(c * lanes)));
        for (Value row : targetRows)
          for (int64_t c = 0; c < vectorsPerStep; ++c)
            acc.push_back(
                vector::LoadOp::create(b, laneType, target, ValueRange{row, column[c]}));
        SmallVector<Value> sums = update(column, acc);
        for (auto [t, row] : llvm::enumerate(targetRows))
          for (int64_t c = 0; c < vectorsPerStep; ++c)
            vector::StoreOp::create(b, sums[t * vectorsPerStep + c], target,
                                    ValueRange{row, column[c]});
        return {};
      },
      index(vectorsPerStep * lanes));
}

void CPUKernelBuilder::accumulateKeyRows(Value target, Value j0, Value keyCount, Value tile,
                                         Value rowGroups, int64_t groupRows, int64_t headDim,
                                         int64_t keysPerStep, int64_t vectorsPerStep,
                                         function_ref<Value(Value, Value)> rowVector) {
  auto update = [&](int64_t keysNow) {
    return [&, keysNow](Value jj, ValueRange) -> SmallVector<Value> {
      SmallVector<Value> tileKey, key;
      for (int64_t k = 0; k < keysNow; ++k) {
        tileKey.push_back(arith::AddIOp::create(b, jj, index(k)));
        key.push_back(arith::AddIOp::create(b, j0, tileKey.back()));
      }
      updateInChunks(
          target, key, headDim, vectorsPerStep,
          [&](ArrayRef<Value> column, ValueRange acc) -> SmallVector<Value> {
            return llvm::to_vector(loop(
                index(0), rowGroups, acc,
                [&](Value group, ValueRange carried) -> SmallVector<Value> {
                  SmallVector<Value> next(carried.begin(), carried.end());
                  Value firstRow = arith::MulIOp::create(b, group, index(groupRows));
                  for (int64_t r = 0; r < groupRows; ++r) {
                    Value row = arith::AddIOp::create(b, firstRow, index(r));
                    SmallVector<Value> coefficient;
                    for (int64_t k = 0; k < keysNow; ++k)
                      coefficient.push_back(splat(load(tile, {row, tileKey[k]})));
                    for (int64_t c = 0; c < vectorsPerStep; ++c) {
                      Value x = rowVector(row, column[c]);
                      for (int64_t k = 0; k < keysNow; ++k)
                        next[k * vectorsPerStep + c] = vector::FMAOp::create(
                            b, coefficient[k], x, next[k * vectorsPerStep + c]);
                    }
                  }
                  return next;
                }));
          });
      return {};
    };
  };
  Value stepped = arith::SubIOp::create(
      b, keyCount, arith::RemUIOp::create(b, keyCount, index(keysPerStep)));
  loop(index(0), stepped, {}, update(keysPerStep), index(keysPerStep));
  if (keysPerStep > 1)
    loop(stepped, keyCount, {}, update(1));
}

void CPUKernelBuilder::accumulateTileRows(Value rowTarget, Value keyRows, Value j0, Value keyCount,
                                          Value tile, Value rowCount, int64_t headDim,
                                          int64_t rowsPerStep, int64_t vectorsPerStep) {
  loop(
      index(0), rowCount, {},
      [&](Value r0, ValueRange) -> SmallVector<Value> {
        SmallVector<Value> rowAt;
        for (int64_t r = 0; r < rowsPerStep; ++r)
          rowAt.push_back(arith::AddIOp::create(b, r0, index(r)));
        updateInChunks(
            rowTarget, rowAt, headDim, vectorsPerStep,
            [&](ArrayRef<Value> column, ValueRange init) -> SmallVector<Value> {
              return llvm::to_vector(loop(
                  index(0), keyCount, init, [&](Value jj, ValueRange acc) -> SmallVector<Value> {
                    Value key = arith::AddIOp::create(b, j0, jj);
                    SmallVector<Value> keyVectors;
                    for (int64_t c = 0; c < vectorsPerStep; ++c)
                      keyVectors.push_back(vector::LoadOp::create(b, laneType, keyRows,
                                                                  ValueRange{key, column[c]}));
                    SmallVector<Value> next(acc.begin(), acc.end());
                    for (int64_t r = 0; r < rowsPerStep; ++r) {
                      Value coefficient = splat(load(tile, {rowAt[r], jj}));
                      for (int64_t c = 0; c < vectorsPerStep; ++c)
                        next[r * vectorsPerStep + c] = vector::FMAOp::create(
                            b, coefficient, keyVectors[c], next[r * vectorsPerStep + c]);
                    }
                    return next;
                  }));
            });
        return {};
      },
      index(rowsPerStep));
}

CPUKernelBuilder::TileRows CPUKernelBuilder::tileRows(Value i0, Value lastRow, int64_t rows,
                                                      Value blockStart, int64_t keyBlock) {
  TileRows tile;
  Value tileKeyEnd = index(0);
  for (int64_t r = 0; r < rows; ++r) {
    tile.index.push_back(
        arith::MinSIOp::create(b, arith::AddIOp::create(b, i0, index(r)), lastRow));
    tile.keyEnd.push_back(keys.end(b, tile.index.back()));
    tileKeyEnd = arith::MaxSIOp::create(b, tileKeyEnd, tile.keyEnd.back());
  }
  tile.blockKeyEnd = blockKeyEnd(tileKeyEnd, blockStart, keyBlock);
  return tile;
}

Value CPUKernelBuilder::blockKeyEnd(Value tileKeyEnd, Value blockStart, int64_t keyBlock) {
  return arith::MinSIOp::create(b, arith::AddIOp::create(b, blockStart, index(keyBlock)),
                                tileKeyEnd);
}

Value CPUKernelBuilder::rowReductions(ArrayRef<Value> rowLanes, vector::CombiningKind kind,
                                      arith::FastMathFlags flags) {
  const int64_t rows = rowLanes.size();
  auto combine = [&](Value x, Value y) -> Value {
    if (kind == vector::CombiningKind::ADD)
      return arith::AddFOp::create(b, x, y, flags);
    assert(kind == vector::CombiningKind::MAXIMUMF && "row reductions add or take maxima");
    return arith::MaximumFOp::create(b, x, y, flags);
  };
  if (!llvm::isPowerOf2_64(rows) || rows > lanes) {
    SmallVector<Value> totals;
    for (Value x : rowLanes)
      totals.push_back(vector::ReductionOp::create(b, kind, x, flags));
    return vector::FromElementsOp::create(b, VectorType::get({rows}, type), totals);
  }
  // Merging two vectors whose lanes form segments of `segment` lanes, each a part
  // of one row, halves every segment and interleaves the two vectors' segments:
  // after log2(rows) merges one vector holds rows segments, of which
  // `segmentRows` says whose each is.
  SmallVector<Value> level(rowLanes.begin(), rowLanes.end());
  SmallVector<SmallVector<int64_t>> segmentRows;
  for (int64_t r = 0; r < rows; ++r)
    segmentRows.push_back({r});
  int64_t segment = lanes;
  while (level.size() > 1) {
    const int64_t half = segment / 2;
    SmallVector<Value> merged;
    SmallVector<SmallVector<int64_t>> mergedRows;
    for (size_t pair = 0; pair < level.size(); pair += 2) {
      SmallVector<int64_t> low, high, order;
      for (int64_t t = 0; t < lanes / segment; ++t)
        for (int64_t side = 0; side < 2; ++side) {
          for (int64_t lane = 0; lane < half; ++lane) {
            low.push_back(side * lanes + t * segment + lane);
            high.push_back(side * lanes + t * segment + half + lane);
          }
          order.push_back(segmentRows[pair + side][t]);
        }
      Value lowHalves = vector::ShuffleOp::create(b, level[pair], level[pair + 1], low);
      Value highHalves = vector::ShuffleOp::create(b, level[pair], level[pair + 1], high);
      merged.push_back(combine(lowHalves, highHalves));
      mergedRows.push_back(order);
    }
    level = merged;
    segmentRows = mergedRows;
    segment = half;
  }
  // Within each segment, every lane combines with its partner `width` lanes away
  // until each lane holds the segment's total.
  Value x = level.front();
  for (int64_t width = segment / 2; width >= 1; width /= 2) {
    SmallVector<int64_t> partners;
    for (int64_t lane = 0; lane < lanes; ++lane)
      partners.push_back(lane ^ width);
    x = combine(x, vector::ShuffleOp::create(b, x, x, partners));
  }
  SmallVector<int64_t> firstLanes(rows);
  for (int64_t t = 0; t < rows; ++t)
    firstLanes[segmentRows.front()[t]] = t * segment;
  return vector::ShuffleOp::create(b, x, x, firstLanes);
}

Value CPUKernelBuilder::contractedQuery(Value q, Value i, Value c) {
  Value x = load(q, {i, c});
  return isAdditive() ? x : mul(scalarMath->feature(x), scale);
}

SmallVector<Value> CPUKernelBuilder::scoreTile(int64_t rows, int64_t scoreVectors, int64_t headDim,
                                               Value panels, Value panel, Value queryTile,
                                               Value tanhTile) {
  auto queryAt = [&](int64_t r, Value c) { return load(queryTile, {index(r), c}); };
  if (!isAdditive())
    return panelProduct(rows, scoreVectors, headDim, panels, panel, queryAt);
  SmallVector<Value> init(rows * scoreVectors, splatConstant(0.0));
  return llvm::to_vector(
      loop(index(0), index(headDim), init, [&](Value c, ValueRange t) -> SmallVector<Value> {
        Value row = arith::AddIOp::create(b, panel, c);
        SmallVector<Value> keyColumns;
        for (int64_t h = 0; h < scoreVectors; ++h)
          keyColumns.push_back(
              vector::LoadOp::create(b, laneType, panels, ValueRange{row, index(h * lanes)}));
        Value weight = splat(load(paramsBuffer, {additiveWeightIndex(c)}));
        SmallVector<Value> next;
        for (int64_t r = 0; r < rows; ++r) {
          Value x = splat(queryAt(r, c));
          for (int64_t h = 0; h < scoreVectors; ++h) {
            Value tanh = math::TanhOp::create(b, add(x, keyColumns[h]));
            if (tanhTile)
              vector::StoreOp::create(
                  b, tanh, tanhTile,
                  ValueRange{c, index((r * scoreVectors + h) * lanes)});
            next.push_back(vector::FMAOp::create(b, weight, tanh, t[r * scoreVectors + h]));
          }
        }
        return next;
      }));
}

SmallVector<Value> CPUKernelBuilder::keyRowScores(int64_t scoreVectors, int64_t headDim, Value k,
                                                  Value j0, Value lastKey, Value queryTile,
                                                  Value scratch) {
  const int64_t vectorsPerRow = headDim / lanes;
  const int64_t lineColumns = std::max<int64_t>(
      lanes, kCacheLineBytes * 8 / static_cast<int64_t>(type.getIntOrFloatBitWidth()));
  SmallVector<Value> query;
  for (int64_t c = 0; c < vectorsPerRow; ++c)
    query.push_back(
        vector::LoadOp::create(b, laneType, queryTile, ValueRange{index(0), index(c * lanes)}));
  // Per vector of `lanes` keys: each key's products with the row, lanes still to
  // add, then one shuffle tree (rowReductions) adds all of them into the lanes of
  // the score vector. Keys past `lastKey` reread it: in bounds, their lanes are
  // past the row's span (prefetches past it fetch it again). A loop over the
  // vectors, through `scratch`, keeps one copy of that code per tile kind (it is
  // most of a decode tile's code).
  loop(index(0), index(scoreVectors), {}, [&](Value h, ValueRange) -> SmallVector<Value> {
    Value first = arith::AddIOp::create(b, j0, arith::MulIOp::create(b, h, index(lanes)));
    SmallVector<Value> products;
    for (int64_t t = 0; t < lanes; ++t) {
      Value key = arith::MinSIOp::create(b, arith::AddIOp::create(b, first, index(t)), lastKey);
      Value ahead = arith::MinSIOp::create(
          b, arith::AddIOp::create(b, first, index(t + kDecodePrefetchKeys)), lastKey);
      for (int64_t c = 0; c < headDim; c += lineColumns)
        memref::PrefetchOp::create(b, k, ValueRange{ahead, index(c)}, /*isWrite=*/false,
                                   /*localityHint=*/3, /*isDataCache=*/true);
      Value product;
      for (int64_t c = 0; c < vectorsPerRow; ++c) {
        Value x = laneMath->feature(
            vector::LoadOp::create(b, laneType, k, ValueRange{key, index(c * lanes)}));
        product = product ? vector::FMAOp::create(b, query[c], x, product).getResult()
                          : mul(query[c], x);
      }
      products.push_back(product);
    }
    vector::StoreOp::create(
        b, rowReductions(products, vector::CombiningKind::ADD, arith::FastMathFlags::reassoc),
        scratch, ValueRange{h, index(0)});
    return {};
  });
  SmallVector<Value> scores;
  for (int64_t h = 0; h < scoreVectors; ++h)
    scores.push_back(vector::LoadOp::create(b, laneType, scratch, ValueRange{index(h), index(0)}));
  return scores;
}

void CPUKernelBuilder::additiveTileGrads(int64_t rows, int64_t scoreVectors, int64_t headDim,
                                         Value panel, Value scoreGradTile, Value tanhTile,
                                         Value queryGrads, Value keyGradPanels,
                                         Value weightGrads) {
  Value zeroLanes = splatConstant(0.0), oneLanes = splatConstant(1.0);
  auto addTo = [&](Value memref, ValueRange at, Value lanesValue) {
    Value current = vector::LoadOp::create(b, laneType, memref, at);
    vector::StoreOp::create(b, add(current, lanesValue), memref, at);
  };
  // ∂raw/∂q_rc = ∂raw/∂k_jc = v_c·(1 − t²) and ∂raw/∂v_c = t, t = tanh(q_rc + k_jc).
  loop(index(0), index(headDim), {}, [&](Value c, ValueRange) -> SmallVector<Value> {
    SmallVector<Value> keyGrads(scoreVectors, zeroLanes);
    Value weightGrad = zeroLanes;
    for (int64_t r = 0; r < rows; ++r) {
      Value queryGrad = zeroLanes;
      for (int64_t h = 0; h < scoreVectors; ++h) {
        Value rawGrad = vector::LoadOp::create(b, laneType, scoreGradTile,
                                               ValueRange{index(r), index(h * lanes)});
        Value tanh = vector::LoadOp::create(
            b, laneType, tanhTile, ValueRange{c, index((r * scoreVectors + h) * lanes)});
        Value u = mul(rawGrad, sub(oneLanes, mul(tanh, tanh)));
        queryGrad = add(queryGrad, u);
        keyGrads[h] = add(keyGrads[h], u);
        weightGrad = vector::FMAOp::create(b, rawGrad, tanh, weightGrad);
      }
      Value row = arith::AddIOp::create(b, arith::MulIOp::create(b, index(r), index(headDim)), c);
      addTo(queryGrads, {row, index(0)}, queryGrad);
    }
    Value row = arith::AddIOp::create(b, panel, c);
    for (int64_t h = 0; h < scoreVectors; ++h)
      addTo(keyGradPanels, {row, index(h * lanes)}, keyGrads[h]);
    addTo(weightGrads, {c, index(0)}, weightGrad);
    return {};
  });
}

CPUKernelBuilder::PackedKeys CPUKernelBuilder::packKeys(Value k, Value v, Value firstKey,
                                                        Value keyLimit, int64_t headDim,
                                                        int64_t blockKeys, bool packAll,
                                                        function_ref<Value(Value)> heldKeys) {
  PackedKeys packed;
  packed.count = arith::MaxSIOp::create(b, arith::SubIOp::create(b, keyLimit, firstKey), index(0));
  packed.paddedKeys = arith::MulIOp::create(
      b, arith::CeilDivSIOp::create(b, packed.count, index(blockKeys)), index(blockKeys));
  Value held = heldKeys ? heldKeys(packed.paddedKeys) : packed.paddedKeys;
  packed.keysT = allocPanels(held, headDim, blockKeys);
  if (v)
    packed.valuesT = allocPanels(held, headDim, blockKeys);
  packed.keyRows = k;
  if (v && fns.feature)
    packed.keyRows =
        memref::AllocOp::create(b, MemRefType::get({ShapedType::kDynamic, headDim}, type),
                                ValueRange{held}, b.getI64IntegerAttr(64));
  if (packAll)
    packKeyRange(packed, k, v, firstKey, index(0), packed.paddedKeys, headDim, blockKeys);
  return packed;
}

SmallVector<Value> CPUKernelBuilder::transposeLanes(ArrayRef<Value> rows) {
  // Swaps the off-diagonal h × h blocks of every 2h × 2h block, for h = lanes/2
  // down to 1: log2(lanes) rounds of one two-source shuffle per vector.
  SmallVector<Value> result(rows);
  for (int64_t h = lanes / 2; h >= 1; h /= 2) {
    SmallVector<int64_t> low, high;
    for (int64_t lane = 0; lane < lanes; ++lane) {
      const bool upper = lane & h;
      low.push_back(upper ? lanes + lane - h : lane);
      high.push_back(upper ? lanes + lane : lane + h);
    }
    for (int64_t r = 0; r < lanes; ++r)
      if (!(r & h)) {
        Value top = result[r], bottom = result[r + h];
        result[r] = vector::ShuffleOp::create(b, top, bottom, low);
        result[r + h] = vector::ShuffleOp::create(b, top, bottom, high);
      }
  }
  return result;
}

void CPUKernelBuilder::packKeyRange(const PackedKeys &packed, Value k, Value v, Value firstKey,
                                    Value from, Value to, int64_t headDim, int64_t blockKeys) {
  const bool keyRowsPacked = packed.keyRows != k;
  // Packed position j holds key firstKey + j. A square of `lanes` keys by `lanes`
  // columns at a time: its rows loaded as vectors, transposed in registers and
  // stored as the panels' rows (element by element, the transposition had been
  // scatters, most of a decoder step's time).
  loop(
      from, to, {},
      [&](Value j0, ValueRange) -> SmallVector<Value> {
        SmallVector<Value> positions, rows, inRange;
        for (int64_t t = 0; t < lanes; ++t) {
          Value j = arith::AddIOp::create(b, j0, index(t));
          Value in = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, j, packed.count);
          positions.push_back(j);
          inRange.push_back(splat(in));
          rows.push_back(
              arith::SelectOp::create(b, in, arith::AddIOp::create(b, j, firstKey), firstKey));
        }
        auto packSquare = [&](Value matrix, Value panels, Value c0, bool feature) {
          SmallVector<Value> square;
          for (int64_t t = 0; t < lanes; ++t) {
            Value x = vector::LoadOp::create(b, laneType, matrix, ValueRange{rows[t], c0});
            if (feature) {
              x = laneMath->feature(x);
              if (keyRowsPacked)
                vector::StoreOp::create(b, x, packed.keyRows, ValueRange{positions[t], c0});
            }
            square.push_back(arith::SelectOp::create(b, inRange[t], x, splatConstant(0.0)));
          }
          SmallVector<Value> columns = transposeLanes(square);
          for (int64_t u = 0; u < lanes; ++u)
            vector::StoreOp::create(
                b, columns[u], panels,
                panelIndex(j0, arith::AddIOp::create(b, c0, index(u)), headDim, blockKeys));
        };
        loop(
            index(0), index(headDim), {},
            [&](Value c0, ValueRange) -> SmallVector<Value> {
              packSquare(k, packed.keysT, c0, /*feature=*/true);
              if (v)
                packSquare(v, packed.valuesT, c0, /*feature=*/false);
              return {};
            },
            index(lanes));
        return {};
      },
      index(lanes));
}

void CPUKernelBuilder::packKeyBlock(const PackedKeys &packed, Value k, Value v, Value kb,
                                    Value blockEnd, Value keyLimit, int64_t headDim,
                                    int64_t blockKeys) {
  PackedKeys block = packed;
  block.count = arith::MaxSIOp::create(b, arith::SubIOp::create(b, keyLimit, kb), index(0));
  Value positions = arith::MulIOp::create(
      b,
      arith::CeilDivSIOp::create(b, arith::SubIOp::create(b, blockEnd, kb), index(blockKeys)),
      index(blockKeys));
  packKeyRange(block, k, v, kb, index(0), positions, headDim, blockKeys);
}

void CPUKernelBuilder::buildTiledForward(StringRef name, CpuScheduleAttr tile) {
  useLanes(tile);
  const int64_t headDim = tile.getHeadDim();
  const int64_t vectorsPerRow = headDim / lanes;
  // A decode schedule serves calls of at most tile.getRows() rows, one row per
  // tile (no tile repeats a row) against keys read from K itself: a key packed
  // into panels would be read, written and read again for those few rows.
  const bool decode = tile.getVariant() == CpuVariant::Decode;
  // A block of `rows` query rows against `blockKeys` keys: the score tile holds
  // rows × scoreVectors vectors; the W·V product takes as many accumulators, so
  // it runs over `outputChunk` vectors of each output row at a time.
  const int64_t rows = decode ? 1 : tile.getRows();
  const int64_t blockKeys = tile.getForwardKeys();
  const int64_t scoreVectors = blockKeys / lanes;
  const int64_t outputChunk = std::clamp<int64_t>(scoreVectors, 1, vectorsPerRow);

  OpBuilder::InsertionGuard guard(b);
  ForwardArgs args = beginForward(name, rowMajorType, /*lanewiseMath=*/true);
  Value q = args.q, k = args.k, v = args.v, o = args.o, qBegin = args.qBegin, qEnd = args.qEnd;
  Value zeroLanes = splatConstant(0.0), oneLanes = splatConstant(1.0);

  // Query panels of `panelRows` rows: per block of `keyBlock` keys (whose panels
  // stay in L2) every row tile of the panel passes, so a key's panel comes from
  // L2 once per tile and from farther once per panel, not once per tile. Per
  // panel: the contracted query rows, O, and each row's running state; per tile
  // the block's weights.
  const int64_t panelRows = decode ? tile.getRows() : rows * kForwardPanelTiles;
  const int64_t keyBlock = keyBlockFor(kForwardKeyBlockBytes, 2, headDim, type, blockKeys);
  // φ(k)ᵀ packed, so a score tile row is `scoreVectors` contiguous vector loads
  // per d: once per call, before the first panel, where several panels read it. A
  // call of one panel (a decoder step, a short sequence) reads each key once: its
  // blocks are packed as the panel reaches them, into one block's panels, which
  // stay in L2 (packing them all first had written and read the whole of φ(k)ᵀ
  // through fresh memory, 2.5× the DRAM traffic of a decoder step).
  Value keyLimit = keys.end(b, arith::SubIOp::create(b, qEnd, index(1)));
  Value kvBegin = args.kvBegin;
  Value callRows = arith::SubIOp::create(b, qEnd, qBegin);
  Value onePanel =
      arith::CmpIOp::create(b, arith::CmpIPredicate::sle, callRows, index(panelRows));
  PackedKeys packed;
  if (!decode)
    packed = packKeys(k, Value(), kvBegin, keyLimit, headDim, blockKeys,
                      /*packAll=*/false, [&](Value paddedKeys) -> Value {
                        return arith::SelectOp::create(
                            b, onePanel, arith::MinSIOp::create(b, paddedKeys, index(keyBlock)),
                            paddedKeys);
                      });
  Value keysT = packed.keysT;
  if (!decode) {
    auto packAll = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, callRows, index(panelRows)),
        /*withElseRegion=*/false);
    OpBuilder::InsertionGuard packGuard(b);
    b.setInsertionPoint(packAll.thenBlock()->getTerminator());
    packKeyRange(packed, k, Value(), kvBegin, index(0), packed.paddedKeys, headDim, blockKeys);
  }
  // Where the panels' position 0 is: the block's first key or the call's.
  auto panelOrigin = [&](Value kb) {
    return arith::SelectOp::create(b, onePanel, kb, kvBegin).getResult();
  };
  prepareBlockSparsity(blockKeys, arith::MaxSIOp::create(b, dim(q, 0), dim(k, 0)));
  Value queryPanel = memref::AllocaOp::create(b, MemRefType::get({panelRows, headDim}, type));
  // A tile's weights for a whole key block: its W·V product runs once per block
  // rather than once per score tile, so O is read, rescaled and written once per
  // block (at d = 128, 32 vectors of O per 64 keys had cost as much as the
  // rescale's exps). Weights stay relative to the max they were computed with:
  // where a row's max grows, the weights stored so far join O first, which is
  // rare once the first keys have passed (and per tile, as before, where the max
  // grows along the keys, as ALiBi's does; rescaling the stored weights instead
  // cost that case 3× in work and denormal assists).
  Value weightTile = memref::AllocaOp::create(b, MemRefType::get({rows, keyBlock}, type));
  Value outputPanel = memref::AllocaOp::create(b, MemRefType::get({panelRows, headDim}, type));
  // Below f64, l and O carry their rounding errors (AttentionMath::accumulate): l's
  // in the row's state, O's in a panel beside O. l is compensated at every step, O
  // at every block's W·V product. The rows' states (RowAlgorithm) count their keys
  // as floats (a tile's kept lanes).
  const bool compensated = scalarMath->carriesSumErrors(type);
  RowAlgorithm rowAlgorithm(b, *scalarMath, RowStateLayout(type, compensated, type));
  const RowStateLayout &stateLayout = rowAlgorithm.stateLayout();
  const int64_t rowState = stateLayout.size();
  RowAlgorithm laneRows(b, *laneMath);
  Value outputErrorPanel;
  if (compensated)
    outputErrorPanel = memref::AllocaOp::create(b, MemRefType::get({panelRows, headDim}, type));
  Value statePanel = memref::AllocaOp::create(b, MemRefType::get({panelRows, rowState}, type));
  Value scoreScratch;
  if (decode)
    scoreScratch = memref::AllocaOp::create(b, MemRefType::get({scoreVectors, lanes}, type));

  Value lastRow = arith::SubIOp::create(b, qEnd, index(1));
  loop(
      qBegin, qEnd, {},
      [&](Value p0, ValueRange) -> SmallVector<Value> {
        // Rows past q_end repeat the last row (in bounds, never stored).
        auto panelRow = [&](Value offset) {
          return arith::MinSIOp::create(b, arith::AddIOp::create(b, p0, offset), lastRow);
        };
        loop(index(0), index(panelRows), {}, [&](Value r, ValueRange) -> SmallVector<Value> {
          Value i = panelRow(r);
          loop(index(0), index(headDim), {}, [&](Value c, ValueRange) -> SmallVector<Value> {
            store(contractedQuery(q, i, c), queryPanel, {r, c});
            return {};
          });
          for (int64_t c = 0; c < vectorsPerRow; ++c) {
            vector::StoreOp::create(b, zeroLanes, outputPanel, ValueRange{r, index(c * lanes)});
            if (compensated)
              vector::StoreOp::create(b, zeroLanes, outputErrorPanel,
                                      ValueRange{r, index(c * lanes)});
          }
          stateLayout.store(b, rowAlgorithm.initial(rowAt(i)), statePanel, r);
          return {};
        });
        // Keys end no later for a row than for the rows after it (KeyBounds::end).
        Value panelKeyEnd = keys.end(b, panelRow(index(panelRows - 1)));
        loop(
            kvBegin, panelKeyEnd, {},
            [&](Value kb, ValueRange) -> SmallVector<Value> {
              if (!decode) {
                auto packBlock = scf::IfOp::create(b, onePanel, /*withElseRegion=*/false);
                OpBuilder::InsertionGuard packGuard(b);
                b.setInsertionPoint(packBlock.thenBlock()->getTerminator());
                Value blockEnd = arith::MinSIOp::create(
                    b, panelKeyEnd, arith::AddIOp::create(b, kb, index(keyBlock)));
                enterIfAnyKept(IntRange{p0, lastRow},
                               IntRange{kb, arith::SubIOp::create(b, blockEnd, index(1))});
                packKeyBlock(packed, k, Value(), kb, blockEnd, keyLimit, headDim, blockKeys);
              }
              loop(
                  index(0), index(panelRows), {},
                  [&](Value tileRow, ValueRange) -> SmallVector<Value> {
                    Value i0 = arith::AddIOp::create(b, p0, tileRow);
                    TileRows tile = tileRows(i0, lastRow, rows, kb, keyBlock);
                    SmallVector<Value> &rowIndex = tile.index, &rowKeyEnd = tile.keyEnd;
                    Value keyEnd = tile.blockKeyEnd;
                    Value live = arith::AndIOp::create(
                        b, arith::CmpIOp::create(b, arith::CmpIPredicate::slt, i0, qEnd),
                        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, kb, keyEnd));
                    auto ifLive = scf::IfOp::create(b, live, /*withElseRegion=*/false);
                    OpBuilder::InsertionGuard tileGuard(b);
                    b.setInsertionPoint(ifLive.thenBlock()->getTerminator());
                    enterIfAnyKept(IntRange{i0, rowIndex.back()},
                                   IntRange{kb, arith::SubIOp::create(b, keyEnd, index(1))});
                    auto tileOf = [&](Value panel) {
                      return panel
                                 ? memref::SubViewOp::create(
                                       b, panel, ArrayRef<OpFoldResult>{tileRow, b.getIndexAttr(0)},
                                       ArrayRef<OpFoldResult>{b.getIndexAttr(rows),
                                                              b.getIndexAttr(headDim)},
                                       ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)})
                                       .getResult()
                                 : Value();
                    };
                    Value queryTile = tileOf(queryPanel), outputTile = tileOf(outputPanel),
                          outputError = tileOf(outputErrorPanel);
                    SmallVector<Value> inits;
                    for (int64_t r = 0; r < rows; ++r)
                      inits.append(stateLayout.pack(stateLayout.load(
                          b, statePanel, arith::AddIOp::create(b, tileRow, index(r)))));
                    // Row r's state in the values carried across the block's tiles.
                    auto stateOf = [&](ValueRange carried, int64_t r) {
                      return stateLayout.unpack(carried.slice(rowState * r, rowState));
                    };
                    // After the state: each row's product of the rescale factors
                    // since O last took the stored weights, then the first key whose
                    // weights are stored and not yet in O and where the last scored
                    // tile ends (the W·V product skips a window's tiles before and
                    // after those).
                    const int64_t blockScales = rowState * rows;
                    const int64_t firstScored = blockScales + (online ? rows : 0);
                    const int64_t scoredEnd = firstScored + 1;
                    const int64_t carriedValues = scoredEnd + 1;
                    if (online)
                      inits.append(rows, constant(1.0));
                    inits.push_back(keyEnd);
                    inits.push_back(kb);
                    // O = O·scale + W·V over the stored weights of keys [from, to),
                    // `outputChunk` vectors of every row at a time.
                    auto foldStoredWeights = [&](Value from, Value to, ValueRange scales) {
                      for (int64_t c0 = 0; c0 < vectorsPerRow; c0 += outputChunk) {
                        const int64_t chunk = std::min(outputChunk, vectorsPerRow - c0);
                        SmallVector<Value> outputs(rows * chunk, zeroLanes);
                        ValueRange products = loop(
                            from, to, outputs,
                            [&](Value j, ValueRange out) -> SmallVector<Value> {
                              Value column = arith::SubIOp::create(b, j, kb);
                              SmallVector<Value> valueLanes;
                              for (int64_t c = 0; c < chunk; ++c)
                                valueLanes.push_back(vector::LoadOp::create(
                                    b, laneType, v, ValueRange{j, index((c0 + c) * lanes)}));
                              SmallVector<Value> result;
                              for (int64_t r = 0; r < rows; ++r) {
                                Value w = splat(load(weightTile, {index(r), column}));
                                for (int64_t c = 0; c < chunk; ++c)
                                  result.push_back(vector::FMAOp::create(b, w, valueLanes[c],
                                                                         out[r * chunk + c]));
                              }
                              return result;
                            });
                        for (int64_t r = 0; r < rows; ++r) {
                          Value scale = online ? splat(scales[r]) : Value();
                          for (int64_t c = 0; c < chunk; ++c) {
                            SmallVector<Value, 2> at{index(r), index((c0 + c) * lanes)};
                            AttentionMath::RunningSum folded = laneRows.foldOutput(
                                {vector::LoadOp::create(b, laneType, outputTile, at),
                                 compensated
                                     ? vector::LoadOp::create(b, laneType, outputError, at)
                                           .getResult()
                                     : Value()},
                                scale, products[r * chunk + c]);
                            vector::StoreOp::create(b, folded.sum, outputTile, at);
                            if (compensated)
                              vector::StoreOp::create(b, folded.error, outputError, at);
                          }
                        }
                      }
                    };
                    ValueRange carried = loop(
                        kb, keyEnd, inits,
                        [&](Value j0, ValueRange acc) -> SmallVector<Value> {
                          Value keysHere = arith::MinSIOp::create(
                              b, index(blockKeys), arith::SubIOp::create(b, keyEnd, j0));
                          Value column = arith::SubIOp::create(b, j0, kb);
                          // The tile's rescale factors follow the carried values (1 in a
                          // tile the mask keeps nothing of).
                          SmallVector<Value> tileAcc(acc.begin(), acc.end());
                          if (online)
                            tileAcc.append(rows, constant(1.0));
                          auto weightsAt = [&](int64_t r, int64_t h) -> SmallVector<Value, 2> {
                            return {index(r), arith::AddIOp::create(b, column, index(h * lanes))};
                          };
                          // Tiles the mask keeps no pair of weigh nothing.
                          auto skipped = [&] {
                            for (int64_t r = 0; r < rows; ++r)
                              for (int64_t h = 0; h < scoreVectors; ++h)
                                vector::StoreOp::create(b, zeroLanes, weightTile, weightsAt(r, h));
                          };
                          IntRange rowRange{i0, rowIndex.back()};
                          IntRange keyRange{
                              j0, arith::SubIOp::create(b, arith::AddIOp::create(b, j0, keysHere),
                                                        index(1))};
                          // `wholeSpans`: every row takes all blockKeys keys (a tile
                          // inside every row's keys), so no lane needs its span compare.
                          auto scoredTile = [&](bool evaluateMask,
                                                bool wholeSpans) -> SmallVector<Value> {
                            // Score tile: rows × blockKeys, as rows × scoreVectors vectors.
                            SmallVector<Value> tile;
                            if (decode) {
                              tile = keyRowScores(scoreVectors, headDim, k, j0,
                                                  arith::SubIOp::create(b, keyEnd, index(1)),
                                                  queryTile, scoreScratch);
                            } else {
                              Value panel = panelBase(arith::SubIOp::create(b, j0, panelOrigin(kb)),
                                                      headDim, blockKeys);
                              tile = scoreTile(rows, scoreVectors, headDim, keysT, panel, queryTile);
                            }

                            SmallVector<Value> next(tileAcc);
                            SmallVector<SmallVector<PairValues>> pairs(rows);
                            SmallVector<SmallVector<Value>> s(rows);
                            // Keys counted per row: the span, or where the mask is
                            // evaluated, the kept lanes summed by rowReductions.
                            SmallVector<Value> kept(rows), keptLanes(rows, zeroLanes),
                                candidates(rows);
                            for (int64_t r = 0; r < rows; ++r) {
                              RowKeys rowKeys = wholeSpans ? wholeRowKeys(j0, blockKeys)
                                                           : rowKeysAt(j0, rowKeyEnd[r], blockKeys);
                              if (!evaluateMask)
                                kept[r] = indexToFloat(rowKeys.span);
                              for (int64_t h = 0; h < scoreVectors; ++h) {
                                KeyLanes keyLanes =
                                    keyLanesAt(rowKeys, h, rowIndex[r], evaluateMask);
                                pairs[r].push_back(pairLanes(tile[r * scoreVectors + h],
                                                             rowIndex[r], keyLanes, keyLanes.keep));
                                s[r].push_back(laneMath->score(pairs[r].back()));
                                if (evaluateMask)
                                  keptLanes[r] = add(keptLanes[r],
                                                     arith::SelectOp::create(b, keyLanes.keep,
                                                                             oneLanes, zeroLanes));
                                if (!online)
                                  continue;
                                Value candidate = laneMath->stabilizer(pairs[r][h], s[r][h]);
                                candidates[r] =
                                    candidates[r]
                                        ? rowAlgorithm.combineCandidates(candidates[r], candidate)
                                        : candidate;
                              }
                            }
                            // The rows' maxima, factors and sums as vectors: one e^ and
                            // one shuffle tree for the tile rather than one per row.
                            auto rowsType = VectorType::get({rows}, type);
                            SmallVector<Value> maxima, alphas(rows);
                            if (online) {
                              SmallVector<Value> running;
                              for (int64_t r = 0; r < rows; ++r)
                                running.push_back(stateOf(acc, r).max);
                              RowAlgorithm::Reduction byMax = RowAlgorithm::maxReduction();
                              RowAlgorithm::Rescale step = rowAlgorithm.advanceMax(
                                  vector::FromElementsOp::create(b, rowsType, running),
                                  rowReductions(candidates, byMax.kind, byMax.flags));
                              for (int64_t r = 0; r < rows; ++r) {
                                maxima.push_back(vector::ExtractOp::create(b, step.max, r));
                                alphas[r] = vector::ExtractOp::create(b, step.alpha, r);
                              }
                            }
                            SmallVector<Value> hLanes(rows, zeroLanes);
                            for (int64_t r = 0; r < rows; ++r) {
                              Value shift = zeroLanes, alpha = alphas[r];
                              if (online) {
                                shift = splat(maxima[r]);
                                next[carriedValues + r] = alpha;
                              }
                              for (int64_t h = 0; h < scoreVectors; ++h) {
                                Value g = laneMath->numeratorTerm(pairs[r][h], s[r][h], shift);
                                vector::StoreOp::create(b, g, weightTile, weightsAt(r, h));
                                if (Value terms =
                                        laneMath->denominatorTerm(pairs[r][h], s[r][h], shift))
                                  hLanes[r] = add(hLanes[r], terms);
                              }
                            }
                            RowAlgorithm::Reduction bySum = RowAlgorithm::sumReduction();
                            Value sums = fns.denominator
                                             ? rowReductions(hLanes, bySum.kind, bySum.flags)
                                             : Value();
                            if (evaluateMask) {
                              Value keptRows = rowReductions(keptLanes, bySum.kind, bySum.flags);
                              for (int64_t r = 0; r < rows; ++r)
                                kept[r] = vector::ExtractOp::create(b, keptRows, r);
                            }
                            for (int64_t r = 0; r < rows; ++r) {
                              RowState state = rowAlgorithm.foldTile(
                                  stateOf(acc, r), online ? maxima[r] : Value(), alphas[r],
                                  sums ? vector::ExtractOp::create(b, sums, r).getResult()
                                       : Value(),
                                  kept[r]);
                              llvm::copy(stateLayout.pack(state), next.begin() + rowState * r);
                            }
                            next[firstScored] = arith::MinSIOp::create(b, acc[firstScored], j0);
                            next[scoredEnd] = arith::AddIOp::create(b, j0, keysHere);
                            return next;
                          };
                          SmallVector<Value> scored = classifiedTile(
                              rowRange, keyRange, tileAcc,
                              [&](bool evaluateMask) {
                                if (evaluateMask)
                                  return scoredTile(true, false);
                                Value wholeSpans = arith::CmpIOp::create(
                                    b, arith::CmpIPredicate::sge,
                                    arith::SubIOp::create(b, rowKeyEnd.front(), j0),
                                    index(blockKeys));
                                return llvm::to_vector(branch(
                                    wholeSpans, TypeRange(ValueRange(tileAcc)),
                                    [&] { return scoredTile(false, true); },
                                    [&] { return scoredTile(false, false); }));
                              },
                              skipped);
                          if (!online)
                            return scored;
                          // Where a row's max grew past stored weights, they join O
                          // (scaled by the factors before this tile) and this tile's
                          // factors start the next product; else the factors multiply.
                          SmallVector<Value> next(scored.begin(), scored.begin() + carriedValues);
                          ArrayRef<Value> tileAlphas(scored.begin() + carriedValues, rows);
                          Value pending = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                                                acc[firstScored], j0);
                          Value smallestFactor = constant(1.0);
                          for (Value alpha : tileAlphas)
                            smallestFactor = arith::MinimumFOp::create(b, smallestFactor, alpha);
                          Value grown = arith::AndIOp::create(
                              b, pending,
                              arith::CmpFOp::create(b, arith::CmpFPredicate::ULT, smallestFactor,
                                                    constant(1.0)));
                          SmallVector<Type> factorTypes(rows, type);
                          factorTypes.push_back(b.getIndexType());
                          ValueRange factors = branch(
                              grown, factorTypes,
                              [&] {
                                foldStoredWeights(acc[firstScored], acc[scoredEnd],
                                                  acc.slice(blockScales, rows));
                                SmallVector<Value> restart(tileAlphas);
                                restart.push_back(j0);
                                return restart;
                              },
                              [&] {
                                SmallVector<Value> product;
                                for (int64_t r = 0; r < rows; ++r)
                                  product.push_back(rowAlgorithm.composeRescales(
                                      acc[blockScales + r], tileAlphas[r]));
                                product.push_back(next[firstScored]);
                                return product;
                              });
                          for (int64_t r = 0; r < rows; ++r)
                            next[blockScales + r] = factors[r];
                          next[firstScored] = factors[rows];
                          return next;
                        },
                        index(blockKeys));
                    for (int64_t r = 0; r < rows; ++r)
                      stateLayout.store(b, stateOf(carried, r), statePanel,
                                        arith::AddIOp::create(b, tileRow, index(r)));
                    foldStoredWeights(carried[firstScored], carried[scoredEnd],
                                      carried.slice(blockScales, online ? rows : 0));
                    return {};
                  },
                  index(rows));
              return {};
            },
            index(keyBlock));

        loop(index(0), index(panelRows), {}, [&](Value r, ValueRange) -> SmallVector<Value> {
          Value valid = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                              arith::AddIOp::create(b, p0, r), qEnd);
          auto ifValid = scf::IfOp::create(b, valid, /*withElseRegion=*/false);
          OpBuilder::InsertionGuard rowGuard(b);
          b.setInsertionPoint(ifValid.thenBlock()->getTerminator());
          Value i = panelRow(r);
          finishRow(args, i, stateLayout.load(b, statePanel, r),
                    [&](Value outputScale) {
                      Value scaleLanes = outputScale ? splat(outputScale) : Value();
                      for (int64_t c = 0; c < vectorsPerRow; ++c) {
                        Value accumulated = vector::LoadOp::create(b, laneType, outputPanel,
                                                                   ValueRange{r, index(c * lanes)});
                        vector::StoreOp::create(
                            b, scaleLanes ? mul(accumulated, scaleLanes) : accumulated, o,
                            ValueRange{i, index(c * lanes)});
                      }
                    });
          return {};
        });
        return {};
      },
      index(panelRows));
  freeBlockSparsity();
  if (!decode)
    freePacked(packed, k);
  func::ReturnOp::create(b);
}

void CPUKernelBuilder::buildTiledBackward(StringRef name, CpuScheduleAttr tile) {
  useLanes(tile);
  const int64_t headDim = tile.getHeadDim();
  const int64_t vectorsPerRow = headDim / lanes;
  const int64_t blockKeys = tile.getBackwardKeys();
  const int64_t scoreVectors = blockKeys / lanes;
  // The score and dP products hold `registerRows` rows in registers; the dK, dV
  // and dQ updates sum over `rows` rows, kBackwardRowTiles such tiles, so that a
  // key tile's panels, key rows and dK and dV rows come from L2 once per `rows`
  // rows. The additive contraction keeps one: its tanh tile grows with the rows.
  const bool additive = isAdditive();
  const int64_t registerRows = tile.getBackwardRows();
  const int64_t rows = registerRows * (additive ? 1 : kBackwardRowTiles);

  OpBuilder::InsertionGuard guard(b);
  BackwardArgs args = beginBackward(name, rowMajorType, /*lanewiseMath=*/true);
  Value q = args.q, k = args.k, v = args.v, o = args.o, dOut = args.dOut, dq = args.dq,
        dk = args.dk, dv = args.dv;
  const unsigned numParams = paramValues.size();
  Value zeroLanes = splatConstant(0.0);
  Value queries = dim(q, 0), numKeys = dim(k, 0), qBegin = args.qBegin, qEnd = args.qEnd,
        kvBegin = args.kvBegin;

  // dK and dV accumulate across row blocks, dQ across key blocks. The call owns
  // dK's and dV's rows of its keys [kvBegin, kv_len) (abi.h).
  loop(kvBegin, keys.kvEnd, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
    for (int64_t c = 0; c < vectorsPerRow; ++c) {
      vector::StoreOp::create(b, zeroLanes, dk, ValueRange{j, index(c * lanes)});
      vector::StoreOp::create(b, zeroLanes, dv, ValueRange{j, index(c * lanes)});
    }
    return {};
  });
  // Packed operands: φ(k)ᵀ and vᵀ panels for the score and dP tiles, φ(k) rows
  // for dQ when there is a feature map.
  Value keyLimit = keys.end(b, arith::SubIOp::create(b, qEnd, index(1)));
  // Key blocks of `keyBlock` keys outermost (below): each is packed as the rows
  // reach it, only those the call's rows may see, into one block's panels, where
  // position j - kb holds key j (panels for every key had been fresh memory each
  // call, whose page faults took a fifth of a decoder step's backward).
  const int64_t keyBlock = keyBlockFor(kBackwardKeyBlockBytes, 4, headDim, type, blockKeys);
  PackedKeys packed =
      packKeys(k, v, kvBegin, keyLimit, headDim, blockKeys, /*packAll=*/false,
               [&](Value paddedKeys) -> Value {
                 return arith::MinSIOp::create(b, paddedKeys, index(keyBlock));
               });
  Value keysT = packed.keysT, valuesT = packed.valuesT, keyRows = packed.keyRows;
  prepareBlockSparsity(blockKeys, arith::MaxSIOp::create(b, queries, numKeys));
  Value queryTile = memref::AllocaOp::create(b, MemRefType::get({rows, headDim}, type));
  Value weightTile = memref::AllocaOp::create(b, MemRefType::get({rows, blockKeys}, type));
  Value scoreGradTile = memref::AllocaOp::create(b, MemRefType::get({rows, blockKeys}, type));
  // Per row: what RowAlgorithm prepares for the backward.
  RowAlgorithm rowAlgorithm(b, *scalarMath);
  Value rowStatsTile =
      memref::AllocaOp::create(b, MemRefType::get({rows, RowAlgorithm::backwardPanelWidth}, type));
  Value queryGradTile = memref::AllocaOp::create(b, MemRefType::get({rows, headDim}, type));
  // The GEMM-shaped updates hold as many accumulators as the score tile.
  const int64_t accumulators = registerRows * scoreVectors;
  // Each holds a square-ish block of them, e.g. 4 keys (or rows) × 4 vectors: per
  // row (or key) as many vector loads as broadcasts, where 2 × 8 at d = 128 took 10
  // loads per 16 FMAs.
  const int64_t updateVectors = std::min<int64_t>(vectorsPerRow, kUpdateVectors);
  const int64_t keysPerStep = std::clamp<int64_t>(accumulators / updateVectors, 1, blockKeys);
  const int64_t rowsPerStep = std::clamp<int64_t>(accumulators / updateVectors, 1, registerRows);
  Value paramGrads =
      memref::AllocaOp::create(b, MemRefType::get({std::max<int64_t>(numParams, 1), lanes}, type));
  // The additive contraction's tanh values of a tile and its gradients' sums
  // (additiveTileGrads): per row block for dQ, per call for dK and dv.
  Value tanhTile, queryGrads, keyGradPanels, weightGrads;
  auto zeroVectors = [&](Value memref, Value count, int64_t width) {
    loop(index(0), count, {}, [&](Value r, ValueRange) -> SmallVector<Value> {
      for (int64_t c = 0; c < width; c += lanes)
        vector::StoreOp::create(b, zeroLanes, memref, ValueRange{r, index(c)});
      return {};
    });
  };
  if (additive) {
    tanhTile = memref::AllocaOp::create(b, MemRefType::get({headDim, rows * blockKeys}, type));
    queryGrads = memref::AllocaOp::create(b, MemRefType::get({rows * headDim, lanes}, type));
    weightGrads = memref::AllocaOp::create(b, MemRefType::get({headDim, lanes}, type));
    zeroVectors(weightGrads, index(headDim), lanes);
    keyGradPanels = allocPanels(packed.paddedKeys, headDim, blockKeys);
    zeroVectors(keyGradPanels, dim(keyGradPanels, 0), blockKeys);
  }
  for (unsigned p = 0; p < numParams; ++p)
    vector::StoreOp::create(b, zeroLanes, paramGrads, ValueRange{index(p), index(0)});
  auto addParamGrad = [&](unsigned p, Value lanesValue) {
    Value current = vector::LoadOp::create(b, laneType, paramGrads, ValueRange{index(p), index(0)});
    vector::StoreOp::create(b, arith::AddFOp::create(b, current, lanesValue), paramGrads,
                            ValueRange{index(p), index(0)});
  };

  // D_i = dO_i·O_i.
  auto rowDelta = [&](Value i) {
    Value dotLanes = zeroLanes;
    for (int64_t col = 0; col < vectorsPerRow; ++col)
      dotLanes = vector::FMAOp::create(
          b, vector::LoadOp::create(b, laneType, dOut, ValueRange{i, index(col * lanes)}),
          vector::LoadOp::create(b, laneType, o, ValueRange{i, index(col * lanes)}), dotLanes);
    return sumLanes(dotLanes);
  };
  // Once per row: dQ's start and the offset region's share of dθ.
  loop(qBegin, qEnd, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
    for (int64_t c = 0; c < vectorsPerRow; ++c)
      vector::StoreOp::create(b, zeroLanes, dq, ValueRange{i, index(c * lanes)});
    BackwardRow row =
        rowAlgorithm.prepareBackward(load(args.rowMax, {i}), load(args.rowSum, {i}), rowDelta(i));
    rowOffsetGrads(row, i, kvBegin, [&](unsigned p, Value grad) {
      addParamGrad(p, vector::InsertOp::create(b, grad, zeroLanes, ArrayRef<int64_t>{0}));
    });
    return {};
  });

  // Key blocks of `keyBlock` keys outermost, so the dK and dV rows a block
  // accumulates into (and its key panels) stay in L2 while every row block
  // passes: row blocks innermost would stream all of dK and dV through the
  // caches once per `rows` queries.
  loop(
      kvBegin, keyLimit, {},
      [&](Value kb, ValueRange) -> SmallVector<Value> {
        {
          OpBuilder::InsertionGuard packGuard(b);
          auto ifRows = scf::IfOp::create(
              b, arith::CmpIOp::create(b, arith::CmpIPredicate::slt, qBegin, qEnd),
              /*withElseRegion=*/false);
          b.setInsertionPoint(ifRows.thenBlock()->getTerminator());
          Value blockEnd =
              arith::MinSIOp::create(b, arith::AddIOp::create(b, kb, index(keyBlock)), keyLimit);
          enterIfAnyKept(IntRange{qBegin, arith::SubIOp::create(b, qEnd, index(1))},
                         IntRange{kb, arith::SubIOp::create(b, blockEnd, index(1))});
          packKeyBlock(packed, k, v, kb, blockEnd, keyLimit, headDim, blockKeys);
        }
        loop(
            qBegin, qEnd, {},
            [&](Value i0, ValueRange) -> SmallVector<Value> {
              Value lastRow = arith::SubIOp::create(b, qEnd, index(1));
              // Rows past q_end repeat the last row (in bounds, never stored).
              auto tileRow = [&](Value r) {
                return arith::MinSIOp::create(b, arith::AddIOp::create(b, i0, r), lastRow);
              };
              // Keys end no later for a row than for the rows after it (KeyBounds::end):
              // the block's last row says where its keys end.
              Value lastTileRow = tileRow(index(rows - 1));
              Value keyEnd = blockKeyEnd(keys.end(b, lastTileRow), kb, keyBlock);
              // The register tiles that hold a row before q_end: the block's last
              // rows may hold none, and a call of a few queries runs one tile.
              Value rowsLeft =
                  arith::MinSIOp::create(b, arith::SubIOp::create(b, qEnd, i0), index(rows));
              Value liveTiles = arith::CeilDivSIOp::create(b, rowsLeft, index(registerRows));
              Value liveRows = arith::MulIOp::create(b, liveTiles, index(registerRows));
              auto ifKeys = scf::IfOp::create(
                  b, arith::CmpIOp::create(b, arith::CmpIPredicate::slt, kb, keyEnd),
                  /*withElseRegion=*/false);
              OpBuilder::InsertionGuard blockGuard(b);
              b.setInsertionPoint(ifKeys.thenBlock()->getTerminator());
              enterIfAnyKept(IntRange{i0, lastTileRow},
                             IntRange{kb, arith::SubIOp::create(b, keyEnd, index(1))});
              // The rows' statistics go to rowStatsTile, where the gradient loop reads
              // them by row.
              loop(index(0), liveRows, {}, [&](Value r, ValueRange) -> SmallVector<Value> {
                Value i = tileRow(r);
                // Rows past the end repeat the last one and must contribute nothing; so do
                // fully masked rows (C = 0).
                BackwardRow row = rowAlgorithm.prepareBackward(
                    load(args.rowMax, {i}), load(args.rowSum, {i}), rowDelta(i),
                    arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                          arith::AddIOp::create(b, i0, r), qEnd));
                rowAlgorithm.storeBackward(row, rowStatsTile, r);
                loop(index(0), index(headDim), {},
                     [&](Value col, ValueRange) -> SmallVector<Value> {
                       store(contractedQuery(q, i, col), queryTile, {r, col});
                       return {};
                     });
                return {};
              });
              // The block's dQ rows accumulate in queryGradTile; the additive
              // contraction's in queryGrads.
              if (additive)
                zeroVectors(queryGrads, index(rows * headDim), lanes);
              else
                zeroVectors(queryGradTile, liveRows, headDim);
              loop(
                  kb, keyEnd, {},
                  [&](Value j0, ValueRange) -> SmallVector<Value> {
                    Value keysHere = arith::MinSIOp::create(b, index(blockKeys),
                                                            arith::SubIOp::create(b, keyEnd, j0));
                    IntRange rowRange{i0, lastTileRow};
                    IntRange keyRange{j0, arith::SubIOp::create(
                                              b, arith::AddIOp::create(b, j0, keysHere), index(1))};
                    return classifiedTile(rowRange, keyRange, {}, [&](bool evaluateMask) {
                      // Tiles rows × blockKeys: raw scores (scoreTile), dP from dO·vᵀ.
                      Value packedKey = arith::SubIOp::create(b, j0, kb);
                      Value panel = panelBase(packedKey, headDim, blockKeys);
                      // Per register tile, its raw scores go to weightTile, then its dP
                      // to scoreGradTile (each product holds registerRows × scoreVectors
                      // accumulators, enough to hide the FMA latency), where the gradient
                      // loop replaces them by the weights and raw-score gradients.
                      loop(index(0), liveTiles, {}, [&](Value t, ValueRange) -> SmallVector<Value> {
                        Value firstRow = arith::MulIOp::create(b, t, index(registerRows));
                        auto storeTile = [&](ArrayRef<Value> vectors, Value target) {
                          for (int64_t r = 0; r < registerRows; ++r)
                            for (int64_t h = 0; h < scoreVectors; ++h)
                              vector::StoreOp::create(
                                  b, vectors[r * scoreVectors + h], target,
                                  ValueRange{arith::AddIOp::create(b, firstRow, index(r)),
                                             index(h * lanes)});
                        };
                        Value queryRows = memref::SubViewOp::create(
                            b, queryTile, ArrayRef<OpFoldResult>{firstRow, b.getIndexAttr(0)},
                            ArrayRef<OpFoldResult>{b.getIndexAttr(registerRows),
                                                   b.getIndexAttr(headDim)},
                            ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
                        storeTile(scoreTile(registerRows, scoreVectors, headDim, keysT, panel,
                                            queryRows, tanhTile),
                                  weightTile);
                        storeTile(panelProduct(registerRows, scoreVectors, headDim, valuesT, panel,
                                               [&](int64_t r, Value c) {
                                                 return load(dOut,
                                                             {tileRow(arith::AddIOp::create(
                                                                  b, firstRow, index(r))),
                                                              c});
                                               }),
                                  scoreGradTile);
                        return {};
                      });
                      // A loop over rows: the derivative code is emitted once per score
                      // vector, where rows × scoreVectors copies of it doubled
                      // attn-compile's time (bench/RESULTS.md, "Compile time").
                      loop(index(0), liveRows, {}, [&](Value r, ValueRange) -> SmallVector<Value> {
                        Value i = tileRow(r);
                        Value rowKeyEnd = keys.end(b, i);
                        BackwardRow prepared = rowAlgorithm.loadBackward(rowStatsTile, r);
                        BackwardRow row{splat(prepared.shift), splat(prepared.inverseC),
                                        splat(prepared.delta), splat(prepared.live)};
                        Value live = row.live;
                        RowKeys rowKeys = rowKeysAt(j0, rowKeyEnd, blockKeys);
                        for (int64_t h = 0; h < scoreVectors; ++h) {
                          Value col = index(h * lanes);
                          Value at[] = {r, col};
                          Value raw = vector::LoadOp::create(b, laneType, weightTile, at);
                          Value dP = vector::LoadOp::create(b, laneType, scoreGradTile, at);
                          KeyLanes keyLanes = keyLanesAt(rowKeys, h, i, evaluateMask);
                          PairValues pair = pairLanes(
                              raw, i, keyLanes, arith::AndIOp::create(b, live, keyLanes.keep));
                          AttentionMath::PairGradient grad =
                              laneMath->gradient(pair, laneMath->score(pair), row, dP);
                          vector::StoreOp::create(b, grad.weight(), weightTile, at);
                          vector::StoreOp::create(b, grad.rawGrad(), scoreGradTile, at);
                          for (unsigned p = 0; p < numParams; ++p)
                            addParamGrad(p, grad.paramGrad(p));
                          for (unsigned site = 0; site < fns.tableGrads.size(); ++site)
                            if (isPairSite(site)) {
                              AttentionMath::TableGrad table = grad.tableGrad(site);
                              scatterTableGrad(fns.tableGrads[site].input, table.position,
                                               table.value);
                            }
                        }
                        return {};
                      });

                      if (additive) {
                        // dK's panels span the call's keys, not one block's.
                        Value callPanel =
                            panelBase(arith::SubIOp::create(b, j0, kvBegin), headDim, blockKeys);
                        additiveTileGrads(rows, scoreVectors, headDim, callPanel, scoreGradTile,
                                          tanhTile, queryGrads, keyGradPanels, weightGrads);
                      }

                      // dV_j += Σ_r w_rj·dO_r; unless the additive contraction
                      // (additiveTileGrads) has them, dK_j += Σ_r dRaw_rj·scale·φ(q_r)
                      // and dQ_r += Σ_j dRaw_rj·φ(k_j).
                      accumulateKeyRows(dv, j0, keysHere, weightTile, liveTiles, registerRows,
                                        headDim, keysPerStep, updateVectors,
                                        [&](Value r, Value column) -> Value {
                                          return vector::LoadOp::create(
                                              b, laneType, dOut, ValueRange{tileRow(r), column});
                                        });
                      if (!additive) {
                        accumulateKeyRows(dk, j0, keysHere, scoreGradTile, liveTiles,
                                          registerRows, headDim, keysPerStep, updateVectors,
                                          [&](Value r, Value column) -> Value {
                                            return vector::LoadOp::create(
                                                b, laneType, queryTile, ValueRange{r, column});
                                          });
                        accumulateTileRows(queryGradTile, keyRows,
                                           keyRows == k ? j0 : packedKey, keysHere,
                                           scoreGradTile, liveRows, headDim, rowsPerStep,
                                           updateVectors);
                      }
                      return SmallVector<Value>{};
                    });
                  },
                  index(blockKeys));

              // dQ += scale·Σ_j dRaw·φ(k_j) over the block's keys, times φ'(q) with a
              // feature map.
              Value scaleLanes = splat(scale);
              loop(index(0), rowsLeft, {}, [&](Value r, ValueRange) -> SmallVector<Value> {
                Value i = arith::AddIOp::create(b, i0, r);
                if (additive) {
                  loop(index(0), index(headDim), {},
                       [&](Value c, ValueRange) -> SmallVector<Value> {
                         Value at = arith::AddIOp::create(
                             b, arith::MulIOp::create(b, r, index(headDim)), c);
                         Value sum = sumLanes(vector::LoadOp::create(b, laneType, queryGrads,
                                                                     ValueRange{at, index(0)}));
                         accumulate(dq, {i, c},
                                    mul(load(paramsBuffer, {additiveWeightIndex(c)}), sum));
                         return {};
                       });
                  return {};
                }
                for (int64_t c = 0; c < vectorsPerRow; ++c) {
                  Value at[] = {i, index(c * lanes)};
                  Value sum = vector::LoadOp::create(b, laneType, queryGradTile,
                                                     ValueRange{r, index(c * lanes)});
                  Value grad = laneMath->featureGrad(mul(sum, scaleLanes),
                                                     vector::LoadOp::create(b, laneType, q, at));
                  vector::StoreOp::create(b, add(vector::LoadOp::create(b, laneType, dq, at), grad),
                                          dq, at);
                }
                return {};
              });
              return {};
            },
            index(rows));
        return {};
      },
      index(keyBlock));

  // The additive contraction's dK_jc = v_c·Σ_r u and dv_c = Σ dRaw·t.
  if (additive) {
    loop(index(0), index(headDim), {}, [&](Value c, ValueRange) -> SmallVector<Value> {
      Value weightIndex = additiveWeightIndex(c);
      Value weight = load(paramsBuffer, {weightIndex});
      loop(kvBegin, keyLimit, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
        store(mul(weight, load(keyGradPanels, panelIndex(arith::SubIOp::create(b, j, kvBegin), c,
                                                         headDim, blockKeys))),
              dk, {j, c});
        return {};
      });
      accumulate(
          args.dParams, {weightIndex},
          sumLanes(vector::LoadOp::create(b, laneType, weightGrads, ValueRange{c, index(0)})));
      return {};
    });
    memref::DeallocOp::create(b, keyGradPanels);
  }
  // With a feature map dK holds d/dφ(k); chain through φ'(k).
  if (lanewise.featureDx)
    loop(kvBegin, keys.kvEnd, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
      for (int64_t c = 0; c < vectorsPerRow; ++c) {
        Value at[] = {j, index(c * lanes)};
        Value kLanes = vector::LoadOp::create(b, laneType, k, at);
        Value dkLanes = vector::LoadOp::create(b, laneType, dk, at);
        vector::StoreOp::create(b, laneMath->featureGrad(dkLanes, kLanes), dk, at);
      }
      return {};
    });
  for (unsigned p = 0; p < numParams; ++p) {
    Value lanesValue =
        vector::LoadOp::create(b, laneType, paramGrads, ValueRange{index(p), index(0)});
    store(sumLanes(lanesValue), args.dParams, {index(p)});
  }
  freeBlockSparsity();
  freePacked(packed, k);
  func::ReturnOp::create(b);
}
