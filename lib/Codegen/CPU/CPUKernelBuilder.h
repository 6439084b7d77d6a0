//===- CPUKernelBuilder.h - the CPU schedules of one kernel -------*- C++ -*-===//
//
// Internal to lib/Codegen/CPU. One CPUKernelBuilder generates the entry points
// of one kernel for one element type; its schedules live in
//   EntryPoints.cpp    entry points, dispatch on head dim and strides, prologue
//   GenericLoops.cpp   scf loops for any head dim and stride, any contraction
//   ThresholdLoops.cpp implicit normalizers: τ_i solved per row, then the weights
//   TiledLoops.cpp     register-blocked vector tiles for head dims 32/64/128
//   RowTransforms.cpp  cosine/bilinear/additive/projected rows before the kernel
//   TensorInputs.cpp   tensor inputs: their descriptors, reads and gradients
//   BlockSparsity.cpp  which tiles the mask skips or keeps whole
//   LinearAttention.*  the kernelised linear-time form
//   ScanLoops.cpp      scan normalizers (stick-breaking): keys last to first
// and take the attention math from lib/Codegen/AttentionMath.h.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_CODEGEN_CPU_CPUKERNELBUILDER_H
#define ATTN_LIB_CODEGEN_CPU_CPUKERNELBUILDER_H

#include "lib/Analysis/MaskIntervals.h"
#include "lib/Codegen/AttentionMath.h"
#include "lib/Codegen/CPU/EntryArguments.h"
#include "lib/Codegen/CPU/ScalarOps.h"
#include "lib/Codegen/RowAlgorithm.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <optional>

namespace mlir::attn::cpu {

/// Generates the entry points of one kernel for one element type, following its
/// schedules (#attn.cpu_schedule) for that type: `fallback` (generic or linear)
/// for any head dim and stride, and one register-blocked specialisation per
/// `tiles` entry.
class CPUKernelBuilder : ScalarOps {
public:
  CPUKernelBuilder(KernelOp kernel, Algorithm algorithm, FloatType type, CpuVariant fallback,
                   ArrayRef<CpuScheduleAttr> tiles, ImplicitLocOpBuilder &b);

  /// The kernel's scalar functions at this type, and on the vectors of each tile.
  LogicalResult resolveFunctions();

  /// The public entry points (runtime/include/attn/abi.h), each with its
  /// generic loops and tiled specialisations.
  void buildForwardEntry();
  /// attn_merge_T: finishes rows from the states of split-K partial forwards.
  void buildMergeEntry();
  void buildBackwardEntry();

private:
  // --- entry points (EntryPoints.cpp) ---------------------------------------------
  SmallVector<Type> forwardInputs(MemRefType matrix);
  SmallVector<Type> backwardInputs(MemRefType matrix);
  /// A private function `name` taking `inputs`; returns its entry block (the
  /// caller moves the builder there under its own insertion guard).
  Block *privateFunction(StringRef name, ArrayRef<Type> inputs);
  /// Starts the private function `name` of the forward (backward) ABI on
  /// `matrix` memrefs: the builder moves into its body (the caller's insertion
  /// guard restores it), the prologue runs, and the arguments come back by name.
  ForwardArgs beginForward(StringRef name, MemRefType matrix, bool lanewiseMath);
  BackwardArgs beginBackward(StringRef name, MemRefType matrix, bool lanewiseMath);
  /// The same for an ABI entry point: public, with MLIR's C interface, and its
  /// #attn.entry (`role` on this builder's type) by which later steps find it.
  Block *entryPoint(StringRef name, ArrayRef<Type> inputs, EntryRole role);
  /// The public `entryName`: calls `<entryName>.d<D>` when q's head dim (arg 0)
  /// and v's value dim (arg 2) both equal D and every matrix argument has unit
  /// inner stride (a `forward` call of at most a decode schedule's rows:
  /// `<entryName>.d<D>.decode`), else `<entryName>.generic`.
  void buildDispatch(StringRef entryName, ArrayRef<Type> inputs, bool isPublic, bool forward);
  /// The name of `tile`'s function under `entryName`.
  static std::string tiledName(StringRef entryName, CpuScheduleAttr tile);
  /// Loads the params and sets up the scalar math for the slice (batch, head)
  /// whose row 0 of q (k) is at position queryStart (keyStart): what every entry
  /// needs, the merge's too.
  void setUpRowMath(Value params, Value batch, Value head, Value queryStart, Value keyStart);
  /// Loads params, scale, bounds shared by forward and backward, and sets up the
  /// scalar math (and, with `lanewiseMath`, the math on vector<lanes x T>).
  void prologue(Value q, Value k, Value params, Value batch, Value head, Value kvLen,
                Value causal, Value queryStart, Value keyStart, bool lanewiseMath);
  /// The linear-time form (LinearAttention.h) as `name`.
  void buildKernelised(StringRef name, bool forward);

  // --- tensor inputs (TensorInputs.cpp) --------------------------------------------
  /// The kernel's tensor inputs as memrefs from the attn_table descriptors at
  /// `pointer` (tableValues).
  void loadTables(Value pointer);
  /// The flat gradient buffers of the learnable inputs (tableGradValues).
  void loadTableGrads(Value pointer);
  /// Adds `value` to the gradient of input `input` at `position`: scalars, or
  /// one element per lane of vectors.
  void scatterTableGrad(unsigned input, Value position, Value value);

  // --- block sparsity (BlockSparsity.cpp) -------------------------------------------
  /// Prepares the tile classification of a function whose tiles are rows ×
  /// `blockKeys` and whose indices stay below `positions`: the kernel's
  /// block_sparsity (attn-analyze-block-sparsity; none or dense: no
  /// classification) and, for a `tables` mask, per block of `blockKeys`
  /// positions the min and max of each read indexed by i or j (O(positions)).
  void prepareBlockSparsity(int64_t blockKeys, Value positions);
  /// Frees what prepareBlockSparsity allocated, at the end of the function.
  void freeBlockSparsity();
  /// The mask on the tile of rows [iLo, iHi] and keys [jLo, jHi] (inclusive),
  /// or nullopt when tiles are not classified.
  std::optional<TileClass> classifyTile(IntRange rows, IntRange keys);
  /// One key tile of a tiled loop carrying `acc`, as classified: skipped (acc
  /// unchanged) when the mask keeps no pair, `step(/*evaluateMask=*/false)`
  /// when it keeps all, else `step(true)`; unclassified: `step(has a mask)`.
  /// `skipped`, when given, runs where the mask keeps no pair.
  SmallVector<Value> classifiedTile(IntRange rows, IntRange keys, ValueRange acc,
                                    function_ref<SmallVector<Value>(bool)> step,
                                    function_ref<void()> skipped = {});
  /// Moves the insertion point into an scf.if on whether the mask may keep a pair
  /// of rows × keys (a whole key block: its per-row setup is skipped with its
  /// tiles); unclassified, leaves it. The caller holds an InsertionGuard.
  void enterIfAnyKept(IntRange rows, IntRange keys);
  /// The table that `read` reads.
  Value tableOf(ReadOp read);
  /// Element `read` at its fixed indices, with `position` at its range dim.
  Value readAt(const MaskRead &read, Value position);
  struct TileClassifier {
    MaskOp mask;
    int64_t blockKeys = 0;
    /// The reads of a `tables` mask and, for those indexed by i or j, their
    /// per-block [min, max] (memref<?x2xiN>; null for the others).
    SmallVector<MaskRead> reads;
    SmallVector<Value> readBlocks;
  };
  /// Set by prepareBlockSparsity while a tiled function is built.
  std::optional<TileClassifier> classifier;

  // --- row transforms (RowTransforms.cpp) ------------------------------------------
  /// Whether q (query side) or k rows are transformed before the kernel proper.
  bool transformsRows(bool querySide);
  /// The projection weight of one side (null for cosine, which normalises), as
  /// W(o, c) = params[offset + o·outStride + c·inStride]: out[r, o] = Σ_c x[r, c]·W(o, c).
  struct Projection {
    Value offset;
    int64_t outDim, outStride, inStride;
  };
  std::optional<Projection> projectionOf(bool querySide);
  /// 1/‖x_r‖_ε = 1/sqrt(x_r·x_r + ε²) of row r of `matrix` (cosine).
  Value inverseEpsilonNorm(Value matrix, Value r);
  /// A fresh contiguous [rows x cols] matrix (as matrixType) and its allocation.
  std::pair<Value, Value> allocMatrix(Value rows, Value cols);
  /// dst[r, :] = transform(src[r, :]) for r in [begin, end).
  void transformRows(bool querySide, Value src, Value dst, Value params, Value begin, Value end);
  /// From the gradient `dTransformed` of the transformed rows [begin, end): those
  /// rows of dSrc (overwritten) and the weight's gradient (accumulated into dParams).
  void chainRows(bool querySide, Value src, Value dTransformed, Value dSrc, Value params,
                 Value dParams, Value begin, Value end);
  /// Public entry points that transform rows, then call `<entryName>.inner`.
  void buildTransformedForward(StringRef entryName);
  void buildTransformedBackward(StringRef entryName);

  // --- generic loops (GenericLoops.cpp) --------------------------------------------
  void buildForward(StringRef name);
  void buildBackward(StringRef name);
  /// The contracted score before the mod: scale · Σ_c φ(q_ic)·φ(k_jc), or the
  /// additive Σ_c v_c·tanh(q_ic + k_jc).
  Value contract(Value q, Value k, Value i, Value j);
  /// Whether the score is the additive contraction (q, k its projected rows).
  bool isAdditive() { return score && score.getContract() == ContractKind::Additive; }
  /// Where the additive contraction's weight v_c lives in the params buffer.
  Value additiveWeightIndex(Value c);
  /// The indices the regions see for query row i and key row j of this call's
  /// (batch, head) slice: their absolute positions (abi.h: query_start, key_start).
  PairIndices indicesAt(Value i, Value j) {
    return {batchIndex, headIndex, queryAt(i), keyAt(j)};
  }
  /// The indices of query row i of this call's (batch, head) slice.
  RowIndices rowAt(Value i) { return {batchIndex, headIndex, queryAt(i)}; }
  /// The positions of query row i and key row j (scalars or index lanes).
  Value queryAt(Value i) { return atPosition(i, queryPosition); }
  Value keyAt(Value j) { return atPosition(j, keyPosition); }
  Value atPosition(Value row, Value start) {
    if (isa<VectorType>(row.getType()))
      start = splat(start);
    return arith::AddIOp::create(b, row, start);
  }
  /// The pair (i, j) of the generic loops, whose keep is a branch.
  PairValues pairAt(Value raw, Value i, Value j);
  /// The generic loops' keys [begin, end) of row i carrying `acc`, in blocks of
  /// kGenericKeyBlock as classifiedTile classifies them: `keptPair(j, acc)` for each
  /// key the mask keeps (not evaluated in a block it keeps whole), acc unchanged for
  /// the others.
  SmallVector<Value> rowKeyBlocks(Value i, Value begin, Value end, ValueRange acc,
                                  function_ref<SmallVector<Value>(Value, ValueRange)> keptPair);
  /// Row i's share of the gradients of its offset region's params (handed to
  /// `addParam` with the param's position) and reads (scattered): once per row,
  /// by the call whose keys start at `kvBegin` = 0 (abi.h: key chunks split a row).
  void rowOffsetGrads(const BackwardRow &row, Value i, Value kvBegin,
                      function_ref<void(unsigned, Value)> addParam);
  /// The table-gradient sites of pairs (those not in the offset region).
  bool isPairSite(unsigned site) {
    return fns.tableGrads[site].role != TableGradRole::Offset;
  }
  /// memref[row, c] += factor · source[sourceRow, c] for c < n.
  void axpyRow(Value memref, Value row, Value factor, Value source, Value sourceRow, Value n);
  /// memref[row, c] = 0 for c < n.
  void zeroRow(Value memref, Value row, Value n);
  /// Σ_c x[i, c]·y[j, c] for c < n.
  Value rowDot(Value x, Value i, Value y, Value j, Value n);
  /// Zeroes what a backward call owns (abi.h, q_begin, kv_begin): dq's rows, dk's
  /// and dv's keys, and dParams.
  void zeroBackwardOutputs(const BackwardArgs &args);
  /// Adds the gradients of pair (i, j) but dv's: its params' to dParams, its reads'
  /// to the learnable inputs, and its contracted score's (before the mod) to dq[i],
  /// dk[j] (and the additive contraction's weights in dParams).
  void addPairGradients(const BackwardArgs &args, AttentionMath::PairGradient &grad, Value i,
                        Value j);

  // --- scans (ScanLoops.cpp) ----------------------------------------------------------
  void buildScanForward(StringRef name);
  void buildScanBackward(StringRef name);
  /// The merge entry's rows [qBegin, qEnd) of a scan: the splits' partial states
  /// (o_parts, S in max_parts) combined nearest first into o, row_max and row_sum.
  void mergeScanRows(Value qBegin, Value qEnd, Value oParts, Value logSurvivalParts, Value o,
                     Value rowMax, Value rowSum);
  /// Row i's keys [begin, end) from the last to the first, carrying `acc`:
  /// `keptPair(j, acc)` for each key the mask keeps, acc unchanged for the others.
  SmallVector<Value> rowKeysLastToFirst(Value i, Value begin, Value end, ValueRange acc,
                                        function_ref<SmallVector<Value>(Value, ValueRange)> keptPair);
  /// `left_over current`: `body(j)` with the key row j at query row i's position,
  /// where that key is below `keyRows` (i + the causal position shift).
  void atCurrentKey(Value i, Value keyRows, function_ref<void(Value)> body);

  // --- implicit normalizers (ThresholdLoops.cpp) ----------------------------------------
  /// Forward and backward of an implicit normalizer, w_ij = g(s_ij − τ_i).
  void buildThresholdForward(StringRef name);
  void buildThresholdBackward(StringRef name);
  /// Row keys [begin, end) in blocks of kThresholdKeyBlock carrying `acc`: `key(j, acc)`
  /// for each key of the blocks whose max in `blockMaxima` lies above tau, acc
  /// unchanged for the other blocks (g is 0 on all of their keys).
  SmallVector<Value> keysAboveThreshold(RowAlgorithm &rows, Value begin, Value end,
                                        Value blockMaxima, Value tau, ValueRange acc,
                                        function_ref<SmallVector<Value>(Value, ValueRange)> key);
  /// The sums of row i's keys at tau over the scores in `scores` (−inf where masked):
  /// Σ_j g(s_ij − tau), with `withSlopes` also Σ_j g'(s_ij − tau).
  RowAlgorithm::ThresholdSums thresholdSums(RowAlgorithm &rows, Value i, Value begin, Value end,
                                            Value scores, Value blockMaxima, Value tau,
                                            bool withSlopes);
  /// The row's τ_i from its scores and largest score `maxScore`: the row algorithm's
  /// bracket and iteration in loops.
  Value solveThreshold(RowAlgorithm &rows, Value i, Value begin, Value end, Value scores,
                       Value blockMaxima, Value maxScore);

  // --- tiles (TiledLoops.cpp) ---------------------------------------------------------
  /// Register-blocked, vectorised forward / backward for head dim == value dim,
  /// blocked as `tile` says.
  void buildTiledForward(StringRef name, CpuScheduleAttr tile);
  void buildTiledBackward(StringRef name, CpuScheduleAttr tile);
  /// Vectors of the tile's lanes from here on (lanes, laneType, lanewise).
  void useLanes(CpuScheduleAttr tile);
  /// Key panels for the score and dP tiles: per block of `blockKeys` keys a
  /// contiguous [headDim][blockKeys] panel (GEMM-style packing), so a tile reads
  /// consecutive cache lines instead of rows a whole key range apart.
  Value allocPanels(Value paddedKeys, int64_t headDim, int64_t blockKeys);
  /// The first panel row of packed position j's panel.
  Value panelBase(Value j, int64_t headDim, int64_t blockKeys);
  /// Where entry (key j, column c) of the panels lives.
  SmallVector<Value> panelIndex(Value j, Value c, int64_t headDim, int64_t blockKeys);
  /// Where a query row's keys end in the tile of `tileKeys` keys from j0: `span`
  /// of them take part before the mask region is asked (rowEnd − j0, clamped to
  /// [0, tileKeys]), and `spanLanes` holds it as i32 lanes.
  struct RowKeys {
    Value j0, span, spanLanes;
  };
  RowKeys rowKeysAt(Value j0, Value rowEnd, int64_t tileKeys);
  /// A row that takes every key of the tile: its lanes' span compares fold away.
  RowKeys wholeRowKeys(Value j0, int64_t tileKeys);
  /// Lanes of keys [j0 + vector·lanes, + lanes) of the row that take part for
  /// query row `i`: within its span and kept by the mask region.
  struct KeyLanes {
    Value keep;   // vector<lanes x i1>
    Value jLanes; // vector<lanes x index>: the key indices
  };
  /// Without `evaluateMask` (a tile the mask keeps whole) only the span counts.
  KeyLanes keyLanesAt(const RowKeys &row, int64_t vector, Value i, bool evaluateMask);
  /// The indices of the pairs of row i with keys `jLanes`, as lanes.
  PairIndices indexLanes(Value i, Value jLanes);
  /// The pair lanes of row i with keys `keys` and contracted scores `raw`.
  PairValues pairLanes(Value raw, Value i, const KeyLanes &keys, Value keep);
  /// φ(k) (and v) of keys [firstKey, keyLimit) packed into zero-padded panels
  /// for the tile products, key firstKey + j at position j; with v and a feature
  /// map also φ(k) as rows (for dQ; otherwise keyRows is k itself). Without
  /// `packAll` only allocated: packKeyRange fills positions as they are needed.
  /// `heldKeys`, given the zero-padded key count, says how many positions the panels
  /// hold (default all), for a caller that packs one block at a time into the same
  /// positions.
  struct PackedKeys {
    Value count, paddedKeys, keysT, valuesT, keyRows;
  };
  PackedKeys packKeys(Value k, Value v, Value firstKey, Value keyLimit, int64_t headDim,
                      int64_t blockKeys, bool packAll = true,
                      function_ref<Value(Value)> heldKeys = nullptr);
  /// Packs positions [from, to) of `packed`, multiples of `lanes`.
  void packKeyRange(const PackedKeys &packed, Value k, Value v, Value firstKey, Value from,
                    Value to, int64_t headDim, int64_t blockKeys);
  /// Packs keys [kb, blockEnd) into positions from 0 of `packed`, zeros from keyLimit.
  void packKeyBlock(const PackedKeys &packed, Value k, Value v, Value kb, Value blockEnd,
                    Value keyLimit, int64_t headDim, int64_t blockKeys);
  void freePacked(const PackedKeys &packed, Value k);
  /// The tile Σ_c rowScalar(r, c)·panels[panel + c, :] for r < rows over one key
  /// panel of `scoreVectors` vectors: rows·scoreVectors vectors, row-major. The
  /// score tile (scale·φ(q) rows × φ(k)ᵀ) and the backward's dP tile (dO × vᵀ).
  SmallVector<Value> panelProduct(int64_t rows, int64_t scoreVectors, int64_t headDim, Value panels,
                                  Value panel, function_ref<Value(int64_t, Value)> rowScalar);
  /// Over the row's columns in chunks of `vectorsPerStep` vectors: loads those
  /// vectors of the `targetRows` of `target` (vector t·vectorsPerStep + c is the
  /// c-th of row t), lets `update(columns, vectors)` add to them, stores them back.
  void updateInChunks(Value target, ArrayRef<Value> targetRows, int64_t headDim,
                      int64_t vectorsPerStep,
                      function_ref<SmallVector<Value>(ArrayRef<Value>, ValueRange)> update);
  /// The backward's GEMM-shaped updates over a block of rows and the `keyCount`
  /// keys from j0 whose coefficients are `tile` [rows][keys]:
  /// target[j0 + j, :] += Σ_r tile[r, j]·(row r), for dV from dO and dK from
  /// scale·φ(q), over `rowGroups` groups of `groupRows` rows. `vectorsPerStep`
  /// vectors of `keysPerStep` target rows accumulate in registers across all the
  /// rows, so each row vector loaded serves that many keys and each target vector
  /// is loaded and stored once per block.
  /// `rowVector(r, column)` is the vector of row r from `column`.
  void accumulateKeyRows(Value target, Value j0, Value keyCount, Value tile, Value rowGroups,
                         int64_t groupRows, int64_t headDim, int64_t keysPerStep,
                         int64_t vectorsPerStep, function_ref<Value(Value, Value)> rowVector);
  /// rowTarget[r, :] += Σ_j tile[r, j]·keyRows[j0 + j, :] (dQ) for the first
  /// `rowCount` rows (a multiple of `rowsPerStep`), `vectorsPerStep` vectors of
  /// `rowsPerStep` rows in registers, so each key vector loaded serves that many rows.
  void accumulateTileRows(Value rowTarget, Value keyRows, Value j0, Value keyCount, Value tile,
                          Value rowCount, int64_t headDim, int64_t rowsPerStep,
                          int64_t vectorsPerStep);
  /// The rows of the tile of `rows` rows from i0 (past `lastRow` they repeat it: in
  /// bounds, never stored), where each row's keys end, and where the tile's keys end in
  /// the block of `keyBlock` keys from `blockStart`.
  struct TileRows {
    SmallVector<Value> index, keyEnd;
    Value blockKeyEnd;
  };
  TileRows tileRows(Value i0, Value lastRow, int64_t rows, Value blockStart, int64_t keyBlock);
  /// Where a row tile whose keys end at `tileKeyEnd` stops in the block of
  /// `keyBlock` keys from `blockStart`.
  Value blockKeyEnd(Value tileKeyEnd, Value blockStart, int64_t keyBlock);
  /// Entry c of query row i as the score tile contracts it: scale·φ(q_ic), or the
  /// additive contraction's q_ic as it is.
  Value contractedQuery(Value q, Value i, Value c);
  /// The raw score tile of the `rows` rows of `queryTile` (contractedQuery)
  /// against one key panel: their dot products (panelProduct), or the additive
  /// Σ_c v_c·tanh(q_rc + k_jc), whose tanh vectors go to `tanhTile` when given (the
  /// backward reads them again), vector r·scoreVectors + h of c at row c for the
  /// queryTile row r.
  SmallVector<Value> scoreTile(int64_t rows, int64_t scoreVectors, int64_t headDim, Value panels,
                               Value panel, Value queryTile, Value tanhTile = {});
  /// The decode schedule's score tile: one row (row 0 of `queryTile`) against the
  /// `scoreVectors`·lanes keys from j0, read as rows of K (φ applied as they are
  /// loaded), keys past `lastKey` reading it instead; scoreVectors vectors, formed
  /// in `scratch` [scoreVectors][lanes].
  SmallVector<Value> keyRowScores(int64_t scoreVectors, int64_t headDim, Value k, Value j0,
                                  Value lastKey, Value queryTile, Value scratch);
  /// The additive contraction's gradients from one backward tile, its raw score
  /// gradients `scoreGradTile` (rows × scoreVectors·lanes) and tanh values: u = dRaw·(1 − t²)
  /// summed over keys into `queryGrads` (vector r·headDim + c, lanes still to sum),
  /// over rows into `keyGradPanels` (laid out as the key panels), and dRaw·t into
  /// `weightGrads` (vector c). v_c multiplies the first two once, at the end.
  void additiveTileGrads(int64_t rows, int64_t scoreVectors, int64_t headDim, Value panel,
                         Value scoreGradTile, Value tanhTile, Value queryGrads,
                         Value keyGradPanels, Value weightGrads);
  /// `matrix` with its unit inner stride made static (checked by the caller),
  /// so vector loads apply. A reinterpret_cast, unlike memref.cast, is not
  /// folded away into the loads.
  Value asRowMajor(Value matrix);

  // --- small builders (and those of ScalarOps) -----------------------------------------
  Value splat(Value scalar) {
    return vector::BroadcastOp::create(b, VectorType::get({lanes}, scalar.getType()), scalar);
  }
  Value splatConstant(double value) { return splat(constant(value)); }
  Value innerStride(Value memref) {
    return memref::ExtractStridedMetadataOp::create(b, memref).getStrides()[1];
  }
  /// vector<rows x T> of each row's `kind` (add or maximum) over its vector in
  /// `rowLanes`, by one shuffle tree for all rows.
  Value rowReductions(ArrayRef<Value> rowLanes, vector::CombiningKind kind,
                      arith::FastMathFlags flags);
  /// The `lanes` vectors of `rows` (a lanes × lanes square) transposed.
  SmallVector<Value> transposeLanes(ArrayRef<Value> rows);
  /// Horizontal sum; reassociation lets it lower to a log-depth shuffle tree.
  Value sumLanes(Value lanesValue) {
    return vector::ReductionOp::create(b, vector::CombiningKind::ADD, lanesValue,
                                       arith::FastMathFlags::reassoc);
  }
  /// The end of forward row i from its `state` (a float count): a partial call
  /// (abi.h) stores its max, sum and count as they are and `writeOutput(null)` the
  /// accumulated O; else the row is finalised, `writeOutput(scale)` stores O times
  /// the output scale, and row_max and row_sum get the row's statistics.
  void finishRow(const ForwardArgs &args, Value i, const RowState &state,
                 function_ref<void(Value)> writeOutput);
  /// Finalises row i (RowAlgorithm::finalize): `writeOutput(scale)` stores its O
  /// times the output scale; rowMax and rowSum get its statistics.
  void finalizeRow(Value i, const RowState &state, Value rowMax, Value rowSum,
                   function_ref<void(Value)> writeOutput);
  ValueRange branch(Value cond, TypeRange types, function_ref<SmallVector<Value>()> thenBody,
                    function_ref<SmallVector<Value>()> elseBody) {
    return buildBranch(b, cond, types, thenBody, elseBody);
  }

  KernelOp kernel;
  NormalizerOp normalizer;
  ScoreOp score;
  CpuVariant fallback;
  SmallVector<CpuScheduleAttr> tiles;
  MemRefType matrixType, rowMajorType, vectorType;
  ScalarFunctions fns;
  /// The functions on vector<n x _>, per lane count n of the tiles.
  llvm::DenseMap<int64_t, ScalarFunctions> lanewiseFunctions;
  bool online;
  /// A scan normalizer (ScanLoops.cpp): generic loops only, its own merge rows.
  bool scan;
  bool implicit; // Algorithm::Implicit: ThresholdLoops.cpp instead of the generic loops

  // The vectors of the tile being built (set by useLanes).
  int64_t lanes = 0;
  VectorType laneType;
  ScalarFunctions lanewise; // the functions on vector<lanes x _>

  // Values of the function being built (set by prologue).
  SmallVector<Value> paramValues;
  Value scale, headDim, paramsBuffer;
  Value batchIndex, headIndex; // the call's (batch, head) slice
  Value queryPosition, keyPosition; // the positions of q's and k's row 0
  KeyBounds keys;
  /// The tensor inputs as memrefs (tableType) and, in backward, the flat
  /// gradient buffer of each learnable one (null for the others).
  SmallVector<Value> tableValues, tableGradValues;
  /// The attention math on scalars and, in tiled entries, on vector<lanes x T>.
  std::optional<AttentionMath> scalarMath, laneMath;
};

} // namespace mlir::attn::cpu

#endif
