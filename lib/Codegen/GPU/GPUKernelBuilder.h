//===- GPUKernelBuilder.h - the CUDA schedules of one kernel ------*- C++ -*-===//
//
// Internal to lib/Codegen/GPU. One GPUKernelBuilder generates the four CUDA
// kernels of one (storage type, head dim); its schedules live in
//   GPULowering.cpp        kernel signatures, staging, problem values, the driver
//   SimtKernels.cpp        one warp per row, dot products by shuffles
//   TensorCoreKernels.cpp  mma.sync m16n8k16 tiles (f16/bf16 storage)
// and take the attention math from lib/Codegen/AttentionMath.h, evaluated on
// f32 scalars with the scalar functions inlined.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_CODEGEN_GPU_GPUKERNELBUILDER_H
#define ATTN_LIB_CODEGEN_GPU_GPUKERNELBUILDER_H

#include "lib/Codegen/AttentionMath.h"
#include "lib/Codegen/LoopBuilders.h"

#include "attn/abi.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <optional>

namespace mlir::attn::cuda {

constexpr int64_t kWarpSize = 32;
constexpr int64_t kWarpsPerBlock = 8;
constexpr int64_t kThreads = kWarpSize * kWarpsPerBlock;
constexpr int64_t kStagedRows = 32;

// Tensor-core forward (f16/bf16): kMmaWarps warps of 16 query rows each, key
// tiles of kMmaKeys keys, mma.sync m16n8k16 with f32 accumulators. Shared rows
// are padded by kMmaPad elements so the 8 rows a fragment load touches fall in
// distinct banks.
constexpr int64_t kMmaWarps = 4;
constexpr int64_t kMmaThreads = kWarpSize * kMmaWarps;
constexpr int64_t kMmaRows = 16 * kMmaWarps;
constexpr int64_t kMmaKeys = 64;
constexpr int64_t kMmaPad = 8;
// backward_dkdv holds dK and dV accumulators besides the score and dP tiles, so it
// stages 32 queries at a time to stay within the 255 registers of a thread.
constexpr int64_t kMmaBackwardQueries = 32;

/// Builds the kernels of one (storage type, head dim).
class GPUKernelBuilder {
public:
  GPUKernelBuilder(KernelOp kernel, const ScalarFunctions &fns, bool online, FloatType storage,
                   int64_t headDim, ImplicitLocOpBuilder &b)
      : kernel(kernel), normalizer(kernel.getNormalizerOp()), fns(fns), online(online),
        storage(storage), headDim(headDim), columnsPerLane(headDim / kWarpSize), b(b) {
    f32 = b.getF32Type();
    ptrType = LLVM::LLVMPointerType::get(b.getContext(), /*addressSpace=*/1);
    sharedSpace = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  }

  void buildForward();
  /// The forward with both contractions (Q·φ(K)ᵀ and P·V) on tensor cores
  /// (f16/bf16 storage only).
  void buildTensorCoreForward();
  void buildBackwardPrep();
  void buildBackwardDkDv();
  void buildBackwardDq();
  /// backward_dkdv / backward_dq with every product on tensor cores (f16/bf16).
  void buildTensorCoreBackwardDkDv();
  void buildTensorCoreBackwardDq();

private:
  /// A kernel `attn_<role>_<dtype>_d<D>` taking `numArgs` arguments, device
  /// pointers before `firstScalar`, i64 from there on (the heads count first;
  /// positions from runtime/include/attn/abi.h), with one f32 [rows x D] shared tile per entry of
  /// `sharedTiles` plus `sharedVectors` f32 [kStagedRows] ones; the builder is
  /// left at the start of its body, which sets the common values below.
  gpu::GPUFuncOp createKernel(StringRef role, unsigned firstScalar, unsigned numArgs,
                              ArrayRef<int64_t> sharedTiles, unsigned sharedVectors,
                              int64_t tileRows = kWarpsPerBlock, int64_t threads = kThreads,
                              Type sharedType = {}, int64_t sharedPad = 0);

  // --- small builders -------------------------------------------------------
  Value index(int64_t value) { return arith::ConstantIndexOp::create(b, value); }
  Value constant(double value) {
    return arith::ConstantOp::create(b, f32, b.getFloatAttr(f32, value));
  }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, x, y); }
  Value addIndex(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value mulIndex(Value x, Value y) { return arith::MulIOp::create(b, x, y); }
  Value minIndex(Value x, Value y) { return arith::MinSIOp::create(b, x, y); }
  Value less(Value x, Value y) { return arith::CmpIOp::create(b, arith::CmpIPredicate::slt, x, y); }
  Value both(Value x, Value y) { return arith::AndIOp::create(b, x, y); }
  Value select(Value cond, Value x, Value y) { return arith::SelectOp::create(b, cond, x, y); }
  Value toIndex(Value i64) { return arith::IndexCastOp::create(b, b.getIndexType(), i64); }

  /// Address of element `offset` (an index) of `pointer`, whose elements are `type`.
  Value element(Value pointer, Value offset, Type type) {
    Value i64Offset = arith::IndexCastOp::create(b, b.getI64Type(), offset);
    return LLVM::GEPOp::create(b, ptrType, type, pointer, ValueRange{i64Offset});
  }
  /// A storage-typed element widened to f32.
  Value loadStored(Value pointer, Value offset) {
    Value value = LLVM::LoadOp::create(b, storage, element(pointer, offset, storage));
    return storage == f32 ? value : arith::ExtFOp::create(b, f32, value).getResult();
  }
  void storeStored(Value value, Value pointer, Value offset) {
    if (storage != f32)
      value = arith::TruncFOp::create(b, storage, value);
    LLVM::StoreOp::create(b, value, element(pointer, offset, storage));
  }
  Value loadF32(Value pointer, Value offset) {
    return LLVM::LoadOp::create(b, f32, element(pointer, offset, f32));
  }
  void storeF32(Value value, Value pointer, Value offset) {
    LLVM::StoreOp::create(b, value, element(pointer, offset, f32));
  }
  /// Offset of row `row` of this block's (batch, head) in a tensor of `rows` rows
  /// of `width` elements.
  Value rowOffset(Value rows, Value row, int64_t width) {
    return mulIndex(addIndex(mulIndex(batchHead, rows), row), index(width));
  }
  /// The column lane `lane` owns at position t.
  Value column(int64_t t) { return addIndex(lane, index(t * kWarpSize)); }

  /// Sum over the warp; every lane gets the result.
  Value warpSum(Value partial) {
    for (int64_t offset = kWarpSize / 2; offset >= 1; offset /= 2)
      partial =
          add(partial, gpu::ShuffleOp::create(b, partial, offset, kWarpSize, gpu::ShuffleMode::XOR)
                           .getShuffleResult());
    return partial;
  }
  /// Σ_t x[t]·tile[row, column(t)], summed over the warp.
  Value rowDot(ArrayRef<Value> x, Value tile, Value row) {
    Value partial = constant(0.0);
    for (int64_t t = 0; t < columnsPerLane; ++t)
      partial =
          add(partial, mul(x[t], memref::LoadOp::create(b, tile, ValueRange{row, column(t)})));
    return warpSum(partial);
  }

  /// D = A·B + C for one m16n8k16 tile on tensor cores: `a` the 8 storage-typed
  /// elements a thread holds of A (row-major fragment, a0..a7), `bFragment` its 4
  /// of B (column fragment), `c` its 4 f32 accumulators. f16 goes through
  /// nvgpu.mma.sync; bf16 through nvvm.mma.sync with explicit bf16 operand types,
  /// since MLIR 22's nvgpu-to-nvvm cannot infer PTX types for bf16 operands.
  SmallVector<Value> mmaSync(ArrayRef<Value> a, ArrayRef<Value> bFragment, ArrayRef<Value> c);
  /// Tensor-core fragment coordinates of this thread (set by mmaCoordinates):
  /// lane = 4·group + quad; it holds rows group and group + 8 of its warp's 16
  /// and, per 8-column tile, columns 2·quad and 2·quad + 1 (quadColumn).
  Value group, quadColumn;
  void mmaCoordinates() {
    group = arith::DivUIOp::create(b, lane, index(4));
    quadColumn = mulIndex(arith::RemUIOp::create(b, lane, index(4)), index(2));
  }
  /// A fragments (a0..a7, storage type) of rows rows[0] (group) and rows[1]
  /// (group + 8) of `source` through `transform`, one per 16 columns.
  struct BlockRow;
  SmallVector<SmallVector<Value>> rowFragments(Value source, ArrayRef<BlockRow> rows,
                                               function_ref<Value(Value)> transform);
  /// Accumulators [rows / 8][4] of A·tileᵀ: Σ_c A[row, c]·tile[n, c] for the
  /// shared tile's rows n; `a` from rowFragments.
  SmallVector<SmallVector<Value>> productWithRows(ArrayRef<SmallVector<Value>> a, Value tile);
  /// acc[4·t + e] += Σ_n W[row, n]·tile[n, 8t + col] over the shared tile's rows,
  /// W given in accumulator layout [rows / 8][4] (storage type), which is the A
  /// fragment layout of 16-row steps.
  void accumulateWeighted(MutableArrayRef<Value> acc, ArrayRef<SmallVector<Value>> weights,
                          Value tile);
  /// Max (or sum) over the 4 lanes that share a row of an mma fragment.
  Value quadReduce(Value x, bool maximum) {
    for (int64_t offset : {1, 2}) {
      Value other =
          gpu::ShuffleOp::create(b, x, offset, kWarpSize, gpu::ShuffleMode::XOR).getShuffleResult();
      x = maximum ? arith::MaximumFOp::create(b, x, other).getResult() : add(x, other);
    }
    return x;
  }

  /// Whether key j takes part in row i: below the row's key end and kept by
  /// the mask region.
  Value keyKept(Value i, Value j, Value rowKeyEnd) {
    return both(less(j, rowKeyEnd), math->maskKeeps(i, j));
  }
  /// The pair (i, j) of contracted score `raw` (no row inputs on the GPU).
  PairValues pairAt(Value raw, Value i, Value j, Value keep = {}) {
    return PairValues{raw, i, j, {}, keep};
  }
  /// The rows [first, first + tile rows) of the (batch, head) slice of `source`
  /// ([rows, D]) into the shared `tile` through `transform` (in f32, then in the
  /// tile's element type); rows at or past `limit` (<= rows, > first) become 0.
  /// Every thread of the block takes part.
  void stageRows(Value tile, Value source, Value rows, Value first, Value limit,
                 function_ref<Value(Value)> transform);
  /// row_max, row_sum and delta (`statistics`) of queries [first, first + n) into
  /// the shared f32 vectors `tiles` of n entries; rows past nq get C = 0, which
  /// marks them as contributing nothing.
  void stageStatistics(Value first, ArrayRef<Value> statistics, ArrayRef<Value> tiles) {
    int64_t rows = cast<MemRefType>(tiles.front().getType()).getDimSize(0);
    ifThen(less(thread, index(rows)), [&]() {
      Value row = addIndex(first, thread);
      Value valid = less(row, queries);
      Value statOffset = addIndex(mulIndex(batchHead, queries), select(valid, row, first));
      memref::StoreOp::create(b, loadF32(statistics[0], statOffset), tiles[0], ValueRange{thread});
      memref::StoreOp::create(b, select(valid, loadF32(statistics[1], statOffset), constant(0.0)),
                              tiles[1], ValueRange{thread});
      memref::StoreOp::create(b, loadF32(statistics[2], statOffset), tiles[2], ValueRange{thread});
    });
  }
  void barrier() { gpu::BarrierOp::create(b); }
  void ifThen(Value cond, function_ref<void()> body) {
    auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    body();
  }

  KernelOp kernel;
  NormalizerOp normalizer;
  const ScalarFunctions &fns;
  bool online;
  FloatType storage;
  Type f32;
  Type ptrType;
  gpu::AddressSpaceAttr sharedSpace;
  int64_t headDim, columnsPerLane;
  ImplicitLocOpBuilder &b;

  // Values of the kernel being built (set by createKernel / readProblem).
  SmallVector<Value> arguments, sharedTiles, sharedVectors, paramValues;
  Value thread, lane, warp, tileBase, batch, batchHead, scale;
  int64_t blockThreads = kThreads;
  Value queries, keys;
  KeyBounds keyBounds; // key_lengths[b] (capped at nk) and causal
  /// The attention math on f32 scalars, the scalar functions inlined.
  std::optional<AttentionMath> math;

  /// Reads nq, nk, causal, key_lengths and params; sets queries, keys, keyBounds,
  /// paramValues and math.
  void readProblem(Value params, Value keyLengths, Value nq, Value nk, Value causal);

  /// A kernel's arguments by name (positions: attn/abi.h); those its role does
  /// not take are null.
  struct KernelArgs {
    Value q, k, v, o, dOut, rowMax, rowSum, delta, dq, dk, dv, dParams;
  };
  /// After createKernel, the arguments of a forward, backward_dq or
  /// backward_dkdv kernel, with the problem read (readProblem).
  KernelArgs forwardArgs();
  KernelArgs dqArgs();
  KernelArgs dkdvArgs();

  /// A row (query or key) of this block's (batch, head) that threads own: its
  /// index, clamped to the last of `rows` rows (rows past the end repeat it: they
  /// stage tiles and meet the barriers but store nothing), whether it exists,
  /// and the offset of its first element.
  struct BlockRow {
    Value index, valid, base;
  };
  BlockRow blockRow(Value unclamped, Value rows);
  /// SIMT: the row of this thread's warp.
  BlockRow warpRow(Value rows) { return blockRow(addIndex(tileBase, warp), rows); }
  /// Tensor cores: the two rows (group and group + 8 of the warp's 16) this
  /// thread holds in mma fragments (after mmaCoordinates).
  SmallVector<BlockRow, 2> fragmentRows(Value rows);
  /// SIMT: `body(j, jj, state)` for every key j below `blockEnd`, in blocks of
  /// kStagedRows keys that the whole block stages in shared memory between
  /// barriers (φ(k) into `keyTile`, v into `valueTile`; jj is j's tile row),
  /// carrying `inits`.
  ValueRange forEachStagedKey(const KernelArgs &args, Value blockEnd, Value keyTile,
                              Value valueTile, ValueRange inits,
                              function_ref<SmallVector<Value>(Value, Value, ValueRange)> body);
  /// The key end of the block's last query row: keys a block of `blockRows`
  /// query rows stages.
  Value blockKeyEnd(int64_t blockRows) {
    return keyBounds.end(b, minIndex(addIndex(tileBase, index(blockRows - 1)),
                                     arith::SubIOp::create(b, queries, index(1))));
  }
};

} // namespace mlir::attn::cuda

#endif
