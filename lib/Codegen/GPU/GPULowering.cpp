//===- GPULowering.cpp - CUDA kernels of an attn.kernel -------------------===//
//
// SIMT kernels, one warp per row: a block of kWarpsPerBlock warps handles
// kWarpsPerBlock query rows (forward, backward_prep, backward_dq) or key rows
// (backward_dkdv) of one (batch, head). Lane l owns the columns l, l + 32, ...
// of its row; a dot product over the head dim is a lane-local partial sum and
// a gpu.shuffle xor butterfly, after which every lane holds the score, so the
// normaliser state (running max, Σ h, count) is warp-uniform and the control
// flow per key is uniform within a warp. The other operand's rows are staged
// in shared memory, kStagedRows at a time, converted to f32 (and through the
// feature map), by the whole block between two barriers. Arithmetic is f32
// whatever the storage type; the scalar functions of attn-derive-backward are
// inlined at their call sites, so CPU and GPU evaluate the same expressions.
//
// f16/bf16 kernels (online normalizers, or bf16) run every product on tensor
// cores instead (FlashAttention-2 style): 4 warps of 16 rows, tiles of the other
// operand in shared memory in the storage type, mma.sync m16n8k16 with f32
// accumulators, the score-shaped accumulators reused as A fragments (P, dS),
// row max and sums over the 4 lanes of a fragment row with gpu.shuffle. Forward:
// S = φ(Q)·φ(K)ᵀ, O += P·V. backward_dq: S, dP = dO·Vᵀ, dQ += dS·φ(K).
// backward_dkdv (keys as rows): Sᵀ = φ(K)·φ(Q)ᵀ, dPᵀ = V·dOᵀ, dV += Pᵀ·dO,
// dK += dSᵀ·φ(Q). backward_prep stays SIMT.
//
// Global tensors are contiguous [B, H, N, D] (statistics [B, H, N]) and arrive
// as bare !llvm.ptr<1> device pointers; element (b, h, n, c) is at
// ((b·H + h)·N + n)·D + c.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/GPU/GPULowering.h"

#include "lib/Analysis/KernelSignature.h"
#include "lib/Transforms/ScalarFunctions.h"
#include "lib/Codegen/LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::attn;

namespace {

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
  GPUKernelBuilder(KernelOp kernel, const ScalarFunctions &fns, FloatType storage,
                   int64_t headDim, ImplicitLocOpBuilder &b)
      : kernel(kernel), normalizer(kernel.getNormalizerOp()), fns(fns), storage(storage),
        headDim(headDim), columnsPerLane(headDim / kWarpSize), b(b) {
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
  /// A kernel `attn_<role>_<dtype>_d<D>` taking `pointers` device pointers then
  /// `scalars` i64, with one f32 [rows x D] shared tile per entry of
  /// `sharedTiles` plus `sharedVectors` f32 [kStagedRows] ones; the builder is
  /// left at the start of its body, which sets the common values below.
  gpu::GPUFuncOp createKernel(StringRef role, unsigned pointers, unsigned scalars,
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
      partial = add(partial, gpu::ShuffleOp::create(b, partial, offset, kWarpSize,
                                                    gpu::ShuffleMode::XOR)
                                 .getShuffleResult());
    return partial;
  }
  /// Σ_t x[t]·tile[row, column(t)], summed over the warp.
  Value rowDot(ArrayRef<Value> x, Value tile, Value row) {
    Value partial = constant(0.0);
    for (int64_t t = 0; t < columnsPerLane; ++t)
      partial = add(partial, mul(x[t], memref::LoadOp::create(b, tile, ValueRange{row, column(t)})));
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
  /// A fragments (a0..a7, storage type) of rows rowBase[0] (group) and
  /// rowBase[1] (group + 8) of `source` through `transform`, one per 16 columns.
  SmallVector<SmallVector<Value>> rowFragments(Value source, ArrayRef<Value> rowBase,
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
      Value other = gpu::ShuffleOp::create(b, x, offset, kWarpSize, gpu::ShuffleMode::XOR)
                        .getShuffleResult();
      x = maximum ? arith::MaximumFOp::create(b, x, other).getResult() : add(x, other);
    }
    return x;
  }

  /// The body of the single-block scalar function `function` on `arguments`.
  Value call(func::FuncOp function, ValueRange arguments) {
    Block &body = function.getBody().front();
    IRMapping mapping;
    mapping.map(body.getArguments(), arguments);
    for (Operation &op : body.without_terminator())
      b.clone(op, mapping);
    return mapping.lookup(body.getTerminator()->getOperand(0));
  }
  SmallVector<Value> withParams(ValueRange leading) {
    SmallVector<Value> args(leading);
    args.append(paramValues);
    return args;
  }
  Value feature(Value x) { return fns.feature ? call(fns.feature, {x}) : x; }
  Value modScore(Value raw, Value i, Value j) {
    return fns.score ? call(fns.score, withParams({raw, i, j})) : raw;
  }
  Value maskKeeps(Value i, Value j) {
    return fns.mask ? call(fns.mask, {i, j}) : arith::ConstantIntOp::create(b, 1, 1).getResult();
  }
  /// Keys j < keyEnd(i) take part in row i before the mask region is asked.
  Value keyEnd(Value i) {
    return select(isCausal, minIndex(keyValidEnd, addIndex(i, index(1))), keyValidEnd);
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
  Value queries, keys, keyValidEnd, isCausal;

  /// Reads nq, nk, causal, key_lengths and params; sets batchHead, queries, keys, keyValidEnd,
  /// isCausal, paramValues.
  void readProblem(Value params, Value keyLengths, Value nq, Value nk, Value causal);
};

gpu::GPUFuncOp GPUKernelBuilder::createKernel(StringRef role, unsigned pointers,
                                              unsigned scalars, ArrayRef<int64_t> tiles,
                                              unsigned vectors, int64_t tileRows,
                                              int64_t threads, Type sharedType,
                                              int64_t sharedPad) {
  MLIRContext *ctx = b.getContext();
  SmallVector<Type> inputs(pointers, ptrType);
  inputs.append(scalars, b.getI64Type());
  SmallVector<Type> workgroup;
  for (int64_t rows : tiles)
    workgroup.push_back(MemRefType::get({rows, headDim + sharedPad}, sharedType ? sharedType : f32,
                                        MemRefLayoutAttrInterface(), sharedSpace));
  // One f32 entry per staged row.
  for (unsigned v = 0; v < vectors; ++v)
    workgroup.push_back(MemRefType::get({tiles.empty() ? kStagedRows : tiles.front()}, f32,
                                        MemRefLayoutAttrInterface(), sharedSpace));
  std::string name = ("attn_" + role + "_" + elementTypeName(storage) + "_d" + Twine(headDim)).str();
  auto function = gpu::GPUFuncOp::create(b, name, FunctionType::get(ctx, inputs, {}), workgroup);
  function->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  function.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({static_cast<int32_t>(threads), 1, 1}));
  function->setAttr("attn.role", b.getStringAttr(role));
  function->setAttr("attn.dtype", b.getStringAttr(elementTypeName(storage)));
  function->setAttr("attn.head_dim", b.getI64IntegerAttr(headDim));
  function->setAttr("attn.tile", b.getI64IntegerAttr(tileRows));

  b.setInsertionPointToStart(&function.getBody().front());
  blockThreads = threads;
  arguments.assign(function.getArguments().begin(), function.getArguments().begin() + inputs.size());
  sharedTiles.assign(function.getWorkgroupAttributions().begin(),
                     function.getWorkgroupAttributions().begin() + tiles.size());
  sharedVectors.assign(function.getWorkgroupAttributions().begin() + tiles.size(),
                       function.getWorkgroupAttributions().end());
  thread = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  lane = arith::RemUIOp::create(b, thread, index(kWarpSize));
  warp = arith::DivUIOp::create(b, thread, index(kWarpSize));
  tileBase = mulIndex(gpu::BlockIdOp::create(b, gpu::Dimension::x), index(tileRows));
  batch = gpu::BlockIdOp::create(b, gpu::Dimension::z);
  Value head = gpu::BlockIdOp::create(b, gpu::Dimension::y);
  // The heads count is always the first scalar argument.
  batchHead = addIndex(mulIndex(batch, toIndex(arguments[pointers])), head);
  std::optional<double> fixed = fixedScoreScale(kernel);
  scale = constant(fixed ? *fixed : 1.0 / std::sqrt(static_cast<double>(headDim)));
  return function;
}

void GPUKernelBuilder::readProblem(Value params, Value keyLengths, Value nq, Value nk,
                                   Value causal) {
  queries = toIndex(nq);
  keys = toIndex(nk);
  keyValidEnd = minIndex(toIndex(LLVM::LoadOp::create(b, b.getI64Type(),
                                                      element(keyLengths, batch, b.getI64Type()))),
                         keys);
  isCausal = arith::CmpIOp::create(b, arith::CmpIPredicate::ne, causal,
                                   arith::ConstantIntOp::create(b, 0, 64));
  paramValues.clear();
  for (unsigned p = 0, e = kernelParamNames(kernel).size(); p < e; ++p)
    paramValues.push_back(loadF32(params, index(p)));
}

void GPUKernelBuilder::stageRows(Value tile, Value source, Value rows, Value first, Value limit,
                                 function_ref<Value(Value)> transform) {
  auto tileType = cast<MemRefType>(tile.getType());
  Type element = tileType.getElementType();
  buildLoop(b, thread, index(tileType.getDimSize(0) * headDim), {}, [&](Value e, ValueRange) -> SmallVector<Value> {
    Value r = arith::DivUIOp::create(b, e, index(headDim));
    Value c = arith::RemUIOp::create(b, e, index(headDim));
    Value row = addIndex(first, r);
    Value valid = less(row, limit);
    Value x = loadStored(source, addIndex(rowOffset(rows, select(valid, row, first), headDim), c));
    Value staged = select(valid, transform(x), constant(0.0));
    if (element != f32)
      staged = arith::TruncFOp::create(b, element, staged);
    memref::StoreOp::create(b, staged, tile, ValueRange{r, c});
    return {};
  }, index(blockThreads));
}

void GPUKernelBuilder::buildForward() {
  // (q, k, v, o, row_max, row_sum, params, key_lengths, heads, nq, nk, causal)
  createKernel("forward", 8, 4, {kStagedRows, kStagedRows}, 0);
  Value q = arguments[0], k = arguments[1], v = arguments[2], o = arguments[3],
        rowMax = arguments[4], rowSum = arguments[5];
  readProblem(arguments[6], arguments[7], arguments[9], arguments[10], arguments[11]);
  Value keyTile = sharedTiles[0], valueTile = sharedTiles[1];
  bool online = fns.online();
  Value zero = constant(0.0);
  Value minusInf = constant(-std::numeric_limits<double>::infinity());

  // Rows past nq repeat the last row: they stage tiles and meet the barriers,
  // but store nothing.
  Value lastRow = arith::SubIOp::create(b, queries, index(1));
  Value unclamped = addIndex(tileBase, warp);
  Value rowValid = less(unclamped, queries);
  Value i = minIndex(unclamped, lastRow);
  Value qBase = rowOffset(queries, i, headDim);
  SmallVector<Value> query;
  for (int64_t t = 0; t < columnsPerLane; ++t)
    query.push_back(mul(feature(loadStored(q, addIndex(qBase, column(t)))), scale));
  Value rowKeyEnd = keyEnd(i);
  Value blockKeyEnd = keyEnd(minIndex(addIndex(tileBase, index(kWarpsPerBlock - 1)), lastRow));

  // Carried: running max m (online), Σ h, unmasked-key count, the lane's outputs.
  SmallVector<Value> inits{online ? minusInf : zero, zero, zero};
  inits.append(columnsPerLane, zero);
  SmallVector<Type> carriedTypes(inits.size(), f32);
  ValueRange row = buildLoop(b, index(0), blockKeyEnd, inits, [&](Value j0, ValueRange acc) -> SmallVector<Value> {
    stageRows(keyTile, k, keys, j0, blockKeyEnd, [&](Value x) { return feature(x); });
    stageRows(valueTile, v, keys, j0, blockKeyEnd, [](Value x) { return x; });
    barrier();
    Value keysHere = minIndex(index(kStagedRows), arith::SubIOp::create(b, blockKeyEnd, j0));
    SmallVector<Value> next = llvm::to_vector(buildLoop(b, index(0), keysHere, acc, [&](Value jj, ValueRange state) -> SmallVector<Value> {
      Value j = addIndex(j0, jj);
      Value raw = rowDot(query, keyTile, jj);
      Value keep = both(less(j, rowKeyEnd), maskKeeps(i, j));
      return llvm::to_vector(buildBranch(b, keep, carriedTypes, [&]() -> SmallVector<Value> {
        Value s = modScore(raw, i, j);
        Value m = state[0], l = state[1];
        SmallVector<Value> updated{m, l, add(state[2], constant(1.0))};
        Value alpha, shift = zero;
        if (online) {
          // e^(m - m_new) is 0 for the first key (m = -inf, nothing accumulated yet).
          shift = arith::MaximumFOp::create(b, m, call(fns.stabilizer, withParams({s})));
          alpha = math::ExpOp::create(b, sub(m, shift));
          updated[0] = shift;
        }
        Value g = call(fns.numerator, withParams({s, shift}));
        Value h = fns.denominator ? call(fns.denominator, withParams({s, shift})) : zero;
        updated[1] = add(online ? mul(l, alpha) : l, h);
        for (int64_t t = 0; t < columnsPerLane; ++t) {
          Value out = online ? mul(state[3 + t], alpha) : state[3 + t];
          Value value = memref::LoadOp::create(b, valueTile, ValueRange{jj, column(t)});
          updated.push_back(add(out, mul(g, value)));
        }
        return updated;
      }, [&]() -> SmallVector<Value> { return llvm::to_vector(state); }));
    }));
    barrier();
    return next;
  }, index(kStagedRows));

  ifThen(rowValid, [&]() {
    Value m = row[0], l = row[1], count = row[2];
    Value denominator = buildRowDenominator(b, normalizer, online, m, l, count);
    Value anyKey = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, count, zero);
    Value inverse = select(anyKey, div(constant(1.0), denominator), zero);
    for (int64_t t = 0; t < columnsPerLane; ++t)
      storeStored(mul(row[3 + t], inverse), o, addIndex(qBase, column(t)));
    ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, index(0)), [&]() {
      Value statOffset = addIndex(mulIndex(batchHead, queries), i);
      storeF32(select(anyKey, online ? m : zero, zero), rowMax, statOffset);
      storeF32(select(anyKey, denominator, zero), rowSum, statOffset);
    });
  });
  gpu::ReturnOp::create(b);
}

SmallVector<Value> GPUKernelBuilder::mmaSync(ArrayRef<Value> a, ArrayRef<Value> bFragment,
                                             ArrayRef<Value> c) {
  SmallVector<Value> d;
  if (storage.isF16()) {
    Value matrixA = vector::FromElementsOp::create(b, VectorType::get({4, 2}, storage), a);
    Value matrixB = vector::FromElementsOp::create(b, VectorType::get({2, 2}, storage), bFragment);
    Value matrixC = vector::FromElementsOp::create(b, VectorType::get({2, 2}, f32), c);
    Value result = nvgpu::MmaSyncOp::create(b, matrixA, matrixB, matrixC,
                                            ArrayRef<int64_t>{16, 8, 16});
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
      b, resultType, packed(a), packed(bFragment), c, ArrayRef<int64_t>{16, 8, 16},
      std::nullopt, std::nullopt,
      std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16, NVVM::MMATypes::bf16},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row, NVVM::MMALayout::col});
  for (int64_t e = 0; e < 4; ++e)
    d.push_back(LLVM::ExtractValueOp::create(b, result, ArrayRef<int64_t>{e}));
  return d;
}

SmallVector<SmallVector<Value>> GPUKernelBuilder::rowFragments(
    Value source, ArrayRef<Value> rowBase, function_ref<Value(Value)> transform) {
  // a_e: row half (e / 2) % 2, column 2·quad + e % 2 + 8·(e / 4) of the step.
  SmallVector<SmallVector<Value>> fragments;
  for (int64_t step = 0; step < headDim / 16; ++step) {
    SmallVector<Value> fragment;
    for (int64_t element = 0; element < 8; ++element) {
      int64_t half = (element / 2) % 2, offset = (element / 4) * 8 + element % 2;
      Value col = addIndex(quadColumn, index(step * 16 + offset));
      Value x = transform(loadStored(source, addIndex(rowBase[half], col)));
      fragment.push_back(arith::TruncFOp::create(b, storage, x));
    }
    fragments.push_back(fragment);
  }
  return fragments;
}

SmallVector<SmallVector<Value>> GPUKernelBuilder::productWithRows(
    ArrayRef<SmallVector<Value>> a, Value tile) {
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
  createKernel("forward", 8, 4, {kMmaKeys, kMmaKeys}, 0, kMmaRows, kMmaThreads, storage, kMmaPad);
  Value q = arguments[0], k = arguments[1], v = arguments[2], o = arguments[3],
        rowMax = arguments[4], rowSum = arguments[5];
  readProblem(arguments[6], arguments[7], arguments[9], arguments[10], arguments[11]);
  Value keyTile = sharedTiles[0], valueTile = sharedTiles[1];
  bool online = fns.online();
  Value zero = constant(0.0), one = constant(1.0);
  Value minusInf = constant(-std::numeric_limits<double>::infinity());
  auto narrow = [&](Value x) { return arith::TruncFOp::create(b, storage, x).getResult(); };

  mmaCoordinates();
  Value lastRow = arith::SubIOp::create(b, queries, index(1));
  Value warpRow = addIndex(tileBase, mulIndex(warp, index(16)));
  SmallVector<Value> rowIndex, rowValid, rowKeyEnd, rowBase;
  for (int64_t half = 0; half < 2; ++half) {
    Value unclamped = addIndex(warpRow, addIndex(group, index(8 * half)));
    rowValid.push_back(less(unclamped, queries));
    rowIndex.push_back(minIndex(unclamped, lastRow));
    rowKeyEnd.push_back(keyEnd(rowIndex.back()));
    rowBase.push_back(rowOffset(queries, rowIndex.back(), headDim));
  }
  SmallVector<SmallVector<Value>> queryFragments =
      rowFragments(q, rowBase, [&](Value x) { return feature(x); });
  Value blockKeyEnd = keyEnd(minIndex(addIndex(tileBase, index(kMmaRows - 1)), lastRow));

  // Carried per row half: running max (row-uniform), this thread's share of Σ h
  // and of the key count; then the output accumulators, 4 per 8-column tile.
  const int64_t outputTiles = headDim / 8;
  SmallVector<Value> inits;
  for (int64_t half = 0; half < 2; ++half)
    inits.append({online ? minusInf : zero, zero, zero});
  inits.append(4 * outputTiles, zero);
  ValueRange carried = buildLoop(b, index(0), blockKeyEnd, inits, [&](Value j0, ValueRange acc) -> SmallVector<Value> {
    stageRows(keyTile, k, keys, j0, blockKeyEnd, [&](Value x) { return feature(x); });
    stageRows(valueTile, v, keys, j0, blockKeyEnd, [](Value x) { return x; });
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
      Value i = rowIndex[half];
      Value m = acc[3 * half], l = acc[3 * half + 1], count = acc[3 * half + 2];
      SmallVector<Value> s, keep;
      for (int64_t keyTileIndex = 0; keyTileIndex < keyTiles; ++keyTileIndex)
        for (int64_t e = 0; e < 2; ++e) {
          Value j = addIndex(j0, addIndex(quadColumn, index(keyTileIndex * 8 + e)));
          keep.push_back(both(less(j, rowKeyEnd[half]), maskKeeps(i, j)));
          s.push_back(modScore(mul(scores[keyTileIndex][2 * half + e], scale), i, j));
        }
      Value shift = zero, alpha = one;
      if (online) {
        Value tileMax = minusInf;
        for (auto [score, kept] : llvm::zip(s, keep))
          tileMax = arith::MaximumFOp::create(
              b, tileMax, select(kept, call(fns.stabilizer, withParams({score})), minusInf));
        shift = arith::MaximumFOp::create(b, m, quadReduce(tileMax, /*maximum=*/true));
        // e^(m - m_new), with 1 while every key so far is masked (m = m_new = -inf).
        Value stillEmpty = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, shift, minusInf);
        alpha = select(stillEmpty, one, math::ExpOp::create(b, sub(m, shift)));
        next[3 * half] = shift;
      }
      Value hSum = zero, kept = zero;
      for (auto [position, score] : llvm::enumerate(s)) {
        Value g = select(keep[position], call(fns.numerator, withParams({score, shift})), zero);
        weights[position / 2][2 * half + position % 2] = narrow(g);
        if (fns.denominator)
          hSum = add(hSum, select(keep[position], call(fns.denominator, withParams({score, shift})), zero));
        kept = add(kept, select(keep[position], one, zero));
      }
      next[3 * half + 1] = add(online ? mul(l, alpha) : l, hSum);
      next[3 * half + 2] = add(count, kept);
      alphas.push_back(alpha);
    }

    // O = O·e^(m_old - m_new) + P·V.
    SmallVector<Value> outputs;
    for (int64_t t = 0; t < outputTiles; ++t)
      for (int64_t element = 0; element < 4; ++element) {
        Value current = acc[6 + 4 * t + element];
        outputs.push_back(online ? mul(current, alphas[element / 2]) : current);
      }
    accumulateWeighted(outputs, weights, valueTile);
    std::copy(outputs.begin(), outputs.end(), next.begin() + 6);
    barrier();
    return next;
  }, index(kMmaKeys));

  for (int64_t half = 0; half < 2; ++half) {
    Value m = carried[3 * half];
    Value l = quadReduce(carried[3 * half + 1], /*maximum=*/false);
    Value count = quadReduce(carried[3 * half + 2], /*maximum=*/false);
    ifThen(rowValid[half], [&]() {
      Value denominator = buildRowDenominator(b, normalizer, online, m, l, count);
      Value anyKey = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, count, zero);
      Value inverse = select(anyKey, div(one, denominator), zero);
      for (int64_t t = 0; t < outputTiles; ++t)
        for (int64_t e = 0; e < 2; ++e) {
          Value col = addIndex(quadColumn, index(t * 8 + e));
          storeStored(mul(carried[6 + 4 * t + 2 * half + e], inverse), o, addIndex(rowBase[half], col));
        }
      ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, quadColumn, index(0)), [&]() {
        Value statOffset = addIndex(mulIndex(batchHead, queries), rowIndex[half]);
        storeF32(select(anyKey, online ? m : zero, zero), rowMax, statOffset);
        storeF32(select(anyKey, denominator, zero), rowSum, statOffset);
      });
    });
  }
  gpu::ReturnOp::create(b);
}

void GPUKernelBuilder::buildTensorCoreBackwardDq() {
  // (q, k, v, dout, row_max, row_sum, delta, params, key_lengths, dq, heads, nq, nk, causal)
  createKernel("backward_dq", 10, 4, {kMmaKeys, kMmaKeys}, 0, kMmaRows, kMmaThreads, storage, kMmaPad);
  Value q = arguments[0], k = arguments[1], v = arguments[2], dOut = arguments[3],
        rowMax = arguments[4], rowSum = arguments[5], delta = arguments[6], dq = arguments[9];
  readProblem(arguments[7], arguments[8], arguments[11], arguments[12], arguments[13]);
  Value keyTile = sharedTiles[0], valueTile = sharedTiles[1];
  Value zero = constant(0.0);
  auto narrow = [&](Value x) { return arith::TruncFOp::create(b, storage, x).getResult(); };

  mmaCoordinates();
  Value lastRow = arith::SubIOp::create(b, queries, index(1));
  Value warpRow = addIndex(tileBase, mulIndex(warp, index(16)));
  SmallVector<Value> rowIndex, rowValid, rowKeyEnd, rowBase, rowM, rowD, rowLive, rowInverse;
  for (int64_t half = 0; half < 2; ++half) {
    Value unclamped = addIndex(warpRow, addIndex(group, index(8 * half)));
    rowValid.push_back(less(unclamped, queries));
    rowIndex.push_back(minIndex(unclamped, lastRow));
    rowKeyEnd.push_back(keyEnd(rowIndex.back()));
    rowBase.push_back(rowOffset(queries, rowIndex.back(), headDim));
    Value statOffset = addIndex(mulIndex(batchHead, queries), rowIndex.back());
    Value c = loadF32(rowSum, statOffset);
    rowM.push_back(loadF32(rowMax, statOffset));
    rowD.push_back(loadF32(delta, statOffset));
    // Fully masked rows (C = 0) contribute nothing.
    rowLive.push_back(arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, c, zero));
    rowInverse.push_back(select(rowLive.back(), div(constant(1.0), c), zero));
  }
  SmallVector<SmallVector<Value>> queryFragments =
      rowFragments(q, rowBase, [&](Value x) { return feature(x); });
  SmallVector<SmallVector<Value>> gradFragments = rowFragments(dOut, rowBase, [](Value x) { return x; });
  Value blockKeyEnd = keyEnd(minIndex(addIndex(tileBase, index(kMmaRows - 1)), lastRow));

  const int64_t outputTiles = headDim / 8, keyTiles = kMmaKeys / 8;
  SmallVector<Value> inits(4 * outputTiles, zero);
  ValueRange grad = buildLoop(b, index(0), blockKeyEnd, inits, [&](Value j0, ValueRange acc) -> SmallVector<Value> {
    stageRows(keyTile, k, keys, j0, blockKeyEnd, [&](Value x) { return feature(x); });
    stageRows(valueTile, v, keys, j0, blockKeyEnd, [](Value x) { return x; });
    barrier();
    SmallVector<SmallVector<Value>> scores = productWithRows(queryFragments, keyTile);
    SmallVector<SmallVector<Value>> dPs = productWithRows(gradFragments, valueTile);
    // dRaw = (g'·dP - h'·D)/C · mod'(raw) for this thread's 2 rows × 16 keys.
    SmallVector<SmallVector<Value>> scoreGrads(keyTiles, SmallVector<Value>(4));
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t t = 0; t < keyTiles; ++t)
        for (int64_t e = 0; e < 2; ++e) {
          Value i = rowIndex[half];
          Value j = addIndex(j0, addIndex(quadColumn, index(t * 8 + e)));
          Value keep = both(rowLive[half], both(less(j, rowKeyEnd[half]), maskKeeps(i, j)));
          Value raw = mul(scores[t][2 * half + e], scale);
          Value s = modScore(raw, i, j);
          SmallVector<Value> normalizerArgs = withParams({s, rowM[half]});
          Value term = mul(call(fns.numeratorDs, normalizerArgs), dPs[t][2 * half + e]);
          if (fns.denominatorDs)
            term = sub(term, mul(call(fns.denominatorDs, normalizerArgs), rowD[half]));
          Value ds = mul(term, rowInverse[half]);
          Value dRaw = fns.scoreDs ? mul(ds, call(fns.scoreDs, withParams({raw, i, j}))) : ds;
          scoreGrads[t][2 * half + e] = narrow(select(keep, dRaw, zero));
        }
    // dQ += dRaw·φ(K).
    SmallVector<Value> next(acc.begin(), acc.end());
    accumulateWeighted(next, scoreGrads, keyTile);
    barrier();
    return next;
  }, index(kMmaKeys));

  // dQ = scale·Σ_j dRaw·φ(k_j), times φ'(q) with a feature map.
  for (int64_t half = 0; half < 2; ++half)
    ifThen(rowValid[half], [&]() {
      for (int64_t t = 0; t < outputTiles; ++t)
        for (int64_t e = 0; e < 2; ++e) {
          Value at = addIndex(rowBase[half], addIndex(quadColumn, index(t * 8 + e)));
          Value value = mul(grad[4 * t + 2 * half + e], scale);
          if (fns.featureDx)
            value = mul(value, call(fns.featureDx, {loadStored(q, at)}));
          storeStored(value, dq, at);
        }
    });
  gpu::ReturnOp::create(b);
}

void GPUKernelBuilder::buildTensorCoreBackwardDkDv() {
  // (q, k, v, dout, row_max, row_sum, delta, params, key_lengths, dk, dv, dparams,
  //  heads, nq, nk, causal)
  createKernel("backward_dkdv", 12, 4, {kMmaBackwardQueries, kMmaBackwardQueries}, 3, kMmaRows,
               kMmaThreads, storage, kMmaPad);
  Value q = arguments[0], k = arguments[1], v = arguments[2], dOut = arguments[3],
        rowMax = arguments[4], rowSum = arguments[5], delta = arguments[6], dk = arguments[9],
        dv = arguments[10], dParams = arguments[11];
  readProblem(arguments[7], arguments[8], arguments[13], arguments[14], arguments[15]);
  Value queryTile = sharedTiles[0], gradTile = sharedTiles[1];
  Value maxTile = sharedVectors[0], sumTile = sharedVectors[1], deltaTile = sharedVectors[2];
  Value zero = constant(0.0);
  auto narrow = [&](Value x) { return arith::TruncFOp::create(b, storage, x).getResult(); };
  unsigned numNormalizerParams = normalizer.getNumParams();
  unsigned numParams = paramValues.size();

  // Each warp owns 16 keys (the mma rows); keys past nk repeat the last key and
  // store nothing; keys at or past key_lengths are masked for every query.
  mmaCoordinates();
  Value lastKey = arith::SubIOp::create(b, keys, index(1));
  Value warpKey = addIndex(tileBase, mulIndex(warp, index(16)));
  SmallVector<Value> keyIndex, keyValid, keyLive, keyBase;
  for (int64_t half = 0; half < 2; ++half) {
    Value unclamped = addIndex(warpKey, addIndex(group, index(8 * half)));
    keyValid.push_back(less(unclamped, keys));
    keyIndex.push_back(minIndex(unclamped, lastKey));
    keyLive.push_back(both(keyValid.back(), less(keyIndex.back(), keyValidEnd)));
    keyBase.push_back(rowOffset(keys, keyIndex.back(), headDim));
  }
  // Causal: only queries i >= j see key j, so the block starts at its first key.
  Value queryBegin = select(isCausal, minIndex(tileBase, queries), index(0));

  // Carried: dK accumulators, dV accumulators (4 per 8-column tile each), then
  // this thread's share of each dθ.
  const int64_t outputTiles = headDim / 8, queryTiles = kMmaBackwardQueries / 8;
  SmallVector<Value> inits(8 * outputTiles + numParams, zero);
  ValueRange acc = buildLoop(b, queryBegin, queries, inits, [&](Value i0, ValueRange accIn) -> SmallVector<Value> {
    stageRows(queryTile, q, queries, i0, queries, [&](Value x) { return feature(x); });
    stageRows(gradTile, dOut, queries, i0, queries, [](Value x) { return x; });
    stageStatistics(i0, {rowMax, rowSum, delta}, {maxTile, sumTile, deltaTile});
    barrier();
    // Transposed tiles: rows are this thread's keys, columns the staged queries.
    // φ(K)'s and V's fragments are reloaded (from cache) per tile rather than
    // held: next to the dK and dV accumulators they make the d = 128 kernel spill.
    SmallVector<SmallVector<Value>> scores =
        productWithRows(rowFragments(k, keyBase, [&](Value x) { return feature(x); }), queryTile);
    SmallVector<SmallVector<Value>> dPs =
        productWithRows(rowFragments(v, keyBase, [](Value x) { return x; }), gradTile);
    SmallVector<Value> next(accIn.begin(), accIn.end());
    SmallVector<SmallVector<Value>> weights(queryTiles, SmallVector<Value>(4)),
        scoreGrads(queryTiles, SmallVector<Value>(4));
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t t = 0; t < queryTiles; ++t)
        for (int64_t e = 0; e < 2; ++e) {
          Value j = keyIndex[half];
          Value local = addIndex(quadColumn, index(t * 8 + e));
          Value i = addIndex(i0, local);
          Value c = memref::LoadOp::create(b, sumTile, ValueRange{local});
          Value m = memref::LoadOp::create(b, maxTile, ValueRange{local});
          Value rowD = memref::LoadOp::create(b, deltaTile, ValueRange{local});
          Value live = arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, c, zero);
          Value causalKeeps = arith::OrIOp::create(
              b, arith::XOrIOp::create(b, isCausal, arith::ConstantIntOp::create(b, 1, 1)),
              arith::CmpIOp::create(b, arith::CmpIPredicate::sle, j, i));
          Value keep = both(both(keyLive[half], live), both(causalKeeps, maskKeeps(i, j)));
          Value inverseC = select(live, div(constant(1.0), c), zero);
          Value raw = mul(scores[t][2 * half + e], scale);
          Value dP = dPs[t][2 * half + e];
          Value s = modScore(raw, i, j);
          SmallVector<Value> normalizerArgs = withParams({s, m});
          SmallVector<Value> scoreArgs = withParams({raw, i, j});
          auto weighted = [&](func::FuncOp gPrime, func::FuncOp hPrime) {
            Value term = mul(call(gPrime, normalizerArgs), dP);
            if (hPrime)
              term = sub(term, mul(call(hPrime, normalizerArgs), rowD));
            return mul(term, inverseC);
          };
          Value w = mul(call(fns.numerator, normalizerArgs), inverseC);
          Value ds = weighted(fns.numeratorDs, fns.denominatorDs);
          Value dRaw = fns.scoreDs ? mul(ds, call(fns.scoreDs, scoreArgs)) : ds;
          weights[t][2 * half + e] = narrow(select(keep, w, zero));
          scoreGrads[t][2 * half + e] = narrow(select(keep, dRaw, zero));
          for (unsigned p = 0; p < numParams; ++p) {
            Value term = p < numNormalizerParams
                             ? weighted(fns.numeratorDp[p], fns.denominatorDp[p])
                             : mul(ds, call(fns.scoreDp[p - numNormalizerParams], scoreArgs));
            next[8 * outputTiles + p] = add(next[8 * outputTiles + p], select(keep, term, zero));
          }
        }
    // dK += dRaw·φ(Q) (scaled at the end), dV += W·dO.
    accumulateWeighted(MutableArrayRef<Value>(next).slice(0, 4 * outputTiles), scoreGrads, queryTile);
    accumulateWeighted(MutableArrayRef<Value>(next).slice(4 * outputTiles, 4 * outputTiles), weights, gradTile);
    barrier();
    return next;
  }, index(kMmaBackwardQueries));

  for (int64_t half = 0; half < 2; ++half)
    ifThen(keyValid[half], [&]() {
      // With a feature map dK holds d/dφ(k); chain through φ'(k).
      for (int64_t t = 0; t < outputTiles; ++t)
        for (int64_t e = 0; e < 2; ++e) {
          Value at = addIndex(keyBase[half], addIndex(quadColumn, index(t * 8 + e)));
          Value grad = mul(acc[4 * t + 2 * half + e], scale);
          if (fns.featureDx)
            grad = mul(grad, call(fns.featureDx, {loadStored(k, at)}));
          storeStored(grad, dk, at);
          storeStored(acc[4 * outputTiles + 4 * t + 2 * half + e], dv, at);
        }
    });
  // dθ: the warp's 16 keys × the queries, summed over its lanes, one atomic per param.
  SmallVector<Value> paramGrads;
  for (unsigned p = 0; p < numParams; ++p)
    paramGrads.push_back(warpSum(acc[8 * outputTiles + p]));
  if (numParams != 0)
    ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, index(0)), [&]() {
      for (unsigned p = 0; p < numParams; ++p)
        LLVM::AtomicRMWOp::create(b, LLVM::AtomicBinOp::fadd, element(dParams, index(p), f32),
                                  paramGrads[p], LLVM::AtomicOrdering::monotonic);
    });
  gpu::ReturnOp::create(b);
}

void GPUKernelBuilder::buildBackwardPrep() {
  // (o, dout, delta, heads, nq)
  createKernel("backward_prep", 3, 2, {}, 0);
  Value o = arguments[0], dOut = arguments[1], delta = arguments[2];
  queries = toIndex(arguments[4]);
  Value i = addIndex(tileBase, warp);
  ifThen(less(i, queries), [&]() {
    Value base = rowOffset(queries, i, headDim);
    Value partial = constant(0.0);
    for (int64_t t = 0; t < columnsPerLane; ++t) {
      Value at = addIndex(base, column(t));
      partial = add(partial, mul(loadStored(dOut, at), loadStored(o, at)));
    }
    Value sum = warpSum(partial);
    ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, index(0)), [&]() {
      storeF32(sum, delta, addIndex(mulIndex(batchHead, queries), i));
    });
  });
  gpu::ReturnOp::create(b);
}

void GPUKernelBuilder::buildBackwardDq() {
  // (q, k, v, dout, row_max, row_sum, delta, params, key_lengths, dq, heads, nq, nk, causal)
  createKernel("backward_dq", 10, 4, {kStagedRows, kStagedRows}, 0);
  Value q = arguments[0], k = arguments[1], v = arguments[2], dOut = arguments[3],
        rowMax = arguments[4], rowSum = arguments[5], delta = arguments[6], dq = arguments[9];
  readProblem(arguments[7], arguments[8], arguments[11], arguments[12], arguments[13]);
  Value keyTile = sharedTiles[0], valueTile = sharedTiles[1];
  Value zero = constant(0.0);

  Value lastRow = arith::SubIOp::create(b, queries, index(1));
  Value unclamped = addIndex(tileBase, warp);
  Value rowValid = less(unclamped, queries);
  Value i = minIndex(unclamped, lastRow);
  Value qBase = rowOffset(queries, i, headDim);
  SmallVector<Value> query, rowGrad, queryRaw;
  for (int64_t t = 0; t < columnsPerLane; ++t) {
    Value at = addIndex(qBase, column(t));
    queryRaw.push_back(loadStored(q, at));
    query.push_back(mul(feature(queryRaw.back()), scale));
    rowGrad.push_back(loadStored(dOut, at));
  }
  Value statOffset = addIndex(mulIndex(batchHead, queries), i);
  Value m = loadF32(rowMax, statOffset), c = loadF32(rowSum, statOffset);
  Value rowD = loadF32(delta, statOffset);
  // Fully masked rows (C = 0) contribute nothing.
  Value live = arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, c, zero);
  Value inverseC = select(live, div(constant(1.0), c), zero);
  Value rowKeyEnd = keyEnd(i);
  Value blockKeyEnd = keyEnd(minIndex(addIndex(tileBase, index(kWarpsPerBlock - 1)), lastRow));

  SmallVector<Value> inits(columnsPerLane, zero);
  SmallVector<Type> carriedTypes(inits.size(), f32);
  ValueRange grad = buildLoop(b, index(0), blockKeyEnd, inits, [&](Value j0, ValueRange acc) -> SmallVector<Value> {
    stageRows(keyTile, k, keys, j0, blockKeyEnd, [&](Value x) { return feature(x); });
    stageRows(valueTile, v, keys, j0, blockKeyEnd, [](Value x) { return x; });
    barrier();
    Value keysHere = minIndex(index(kStagedRows), arith::SubIOp::create(b, blockKeyEnd, j0));
    SmallVector<Value> next = llvm::to_vector(buildLoop(b, index(0), keysHere, acc, [&](Value jj, ValueRange dqNow) -> SmallVector<Value> {
      Value j = addIndex(j0, jj);
      Value raw = rowDot(query, keyTile, jj);
      Value dP = rowDot(rowGrad, valueTile, jj);
      Value keep = both(live, both(less(j, rowKeyEnd), maskKeeps(i, j)));
      return llvm::to_vector(buildBranch(b, keep, carriedTypes, [&]() -> SmallVector<Value> {
        Value s = modScore(raw, i, j);
        SmallVector<Value> normalizerArgs = withParams({s, m});
        // ds = (g'·dP - h'·D)/C, the h' term for summed denominators only.
        Value term = mul(call(fns.numeratorDs, normalizerArgs), dP);
        if (fns.denominatorDs)
          term = sub(term, mul(call(fns.denominatorDs, normalizerArgs), rowD));
        Value ds = mul(term, inverseC);
        Value dRaw = fns.scoreDs ? mul(ds, call(fns.scoreDs, withParams({raw, i, j}))) : ds;
        SmallVector<Value> updated;
        for (int64_t t = 0; t < columnsPerLane; ++t)
          updated.push_back(add(dqNow[t], mul(dRaw, memref::LoadOp::create(b, keyTile, ValueRange{jj, column(t)}))));
        return updated;
      }, [&]() -> SmallVector<Value> { return llvm::to_vector(dqNow); }));
    }));
    barrier();
    return next;
  }, index(kStagedRows));

  // dQ = scale·Σ_j dRaw·φ(k_j), times φ'(q) with a feature map.
  ifThen(rowValid, [&]() {
    for (int64_t t = 0; t < columnsPerLane; ++t) {
      Value value = mul(grad[t], scale);
      if (fns.featureDx)
        value = mul(value, call(fns.featureDx, {queryRaw[t]}));
      storeStored(value, dq, addIndex(qBase, column(t)));
    }
  });
  gpu::ReturnOp::create(b);
}

void GPUKernelBuilder::buildBackwardDkDv() {
  // (q, k, v, dout, row_max, row_sum, delta, params, key_lengths, dk, dv, dparams,
  //  heads, nq, nk, causal)
  createKernel("backward_dkdv", 12, 4, {kStagedRows, kStagedRows}, 3);
  Value q = arguments[0], k = arguments[1], v = arguments[2], dOut = arguments[3],
        rowMax = arguments[4], rowSum = arguments[5], delta = arguments[6], dk = arguments[9],
        dv = arguments[10], dParams = arguments[11];
  readProblem(arguments[7], arguments[8], arguments[13], arguments[14], arguments[15]);
  Value queryTile = sharedTiles[0], gradTile = sharedTiles[1];
  Value maxTile = sharedVectors[0], sumTile = sharedVectors[1], deltaTile = sharedVectors[2];
  Value zero = constant(0.0);
  unsigned numNormalizerParams = normalizer.getNumParams();
  unsigned numParams = paramValues.size();

  // One warp per key j; keys past nk repeat the last key and store nothing.
  Value unclamped = addIndex(tileBase, warp);
  Value keyValid = less(unclamped, keys);
  Value j = minIndex(unclamped, arith::SubIOp::create(b, keys, index(1)));
  Value kBase = rowOffset(keys, j, headDim);
  SmallVector<Value> key, value, keyRaw;
  for (int64_t t = 0; t < columnsPerLane; ++t) {
    Value at = addIndex(kBase, column(t));
    keyRaw.push_back(loadStored(k, at));
    key.push_back(feature(keyRaw.back()));
    value.push_back(loadStored(v, at));
  }
  // Keys at or past key_lengths are masked for every query; causal: only
  // queries i >= j see key j, so the block starts at its first key.
  Value keyLive = both(keyValid, less(j, keyValidEnd));
  Value queryBegin = select(isCausal, minIndex(tileBase, queries), index(0));

  // Carried: the lane's dK and dV columns, then the warp-uniform dθ.
  SmallVector<Value> inits(2 * columnsPerLane + numParams, zero);
  SmallVector<Type> carriedTypes(inits.size(), f32);
  ValueRange acc = buildLoop(b, queryBegin, queries, inits, [&](Value i0, ValueRange accIn) -> SmallVector<Value> {
    stageRows(queryTile, q, queries, i0, queries, [&](Value x) { return mul(feature(x), scale); });
    stageRows(gradTile, dOut, queries, i0, queries, [](Value x) { return x; });
    stageStatistics(i0, {rowMax, rowSum, delta}, {maxTile, sumTile, deltaTile});
    barrier();
    Value rowsHere = minIndex(index(kStagedRows), arith::SubIOp::create(b, queries, i0));
    SmallVector<Value> next = llvm::to_vector(buildLoop(b, index(0), rowsHere, accIn, [&](Value ii, ValueRange state) -> SmallVector<Value> {
      Value i = addIndex(i0, ii);
      Value raw = rowDot(key, queryTile, ii);
      Value dP = rowDot(value, gradTile, ii);
      Value c = memref::LoadOp::create(b, sumTile, ValueRange{ii});
      Value live = arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, c, zero);
      Value causalKeeps = arith::OrIOp::create(
          b, arith::XOrIOp::create(b, isCausal, arith::ConstantIntOp::create(b, 1, 1)),
          arith::CmpIOp::create(b, arith::CmpIPredicate::sle, j, i));
      Value keep = both(both(keyLive, live), both(causalKeeps, maskKeeps(i, j)));
      return llvm::to_vector(buildBranch(b, keep, carriedTypes, [&]() -> SmallVector<Value> {
        Value m = memref::LoadOp::create(b, maxTile, ValueRange{ii});
        Value rowD = memref::LoadOp::create(b, deltaTile, ValueRange{ii});
        Value inverseC = div(constant(1.0), c);
        Value s = modScore(raw, i, j);
        SmallVector<Value> normalizerArgs = withParams({s, m});
        SmallVector<Value> scoreArgs = withParams({raw, i, j});
        auto weighted = [&](func::FuncOp gPrime, func::FuncOp hPrime) {
          Value term = mul(call(gPrime, normalizerArgs), dP);
          if (hPrime)
            term = sub(term, mul(call(hPrime, normalizerArgs), rowD));
          return mul(term, inverseC);
        };
        Value w = mul(call(fns.numerator, normalizerArgs), inverseC);
        Value ds = weighted(fns.numeratorDs, fns.denominatorDs);
        Value dRaw = fns.scoreDs ? mul(ds, call(fns.scoreDs, scoreArgs)) : ds;
        SmallVector<Value> updated;
        for (int64_t t = 0; t < columnsPerLane; ++t)
          updated.push_back(add(state[t], mul(dRaw, memref::LoadOp::create(b, queryTile, ValueRange{ii, column(t)}))));
        for (int64_t t = 0; t < columnsPerLane; ++t)
          updated.push_back(add(state[columnsPerLane + t], mul(w, memref::LoadOp::create(b, gradTile, ValueRange{ii, column(t)}))));
        for (unsigned p = 0; p < numParams; ++p) {
          Value term = p < numNormalizerParams
                           ? weighted(fns.numeratorDp[p], fns.denominatorDp[p])
                           : mul(ds, call(fns.scoreDp[p - numNormalizerParams], scoreArgs));
          updated.push_back(add(state[2 * columnsPerLane + p], term));
        }
        return updated;
      }, [&]() -> SmallVector<Value> { return llvm::to_vector(state); }));
    }));
    barrier();
    return next;
  }, index(kStagedRows));

  ifThen(keyValid, [&]() {
    // With a feature map dK holds d/dφ(k); chain through φ'(k).
    for (int64_t t = 0; t < columnsPerLane; ++t) {
      Value grad = acc[t];
      if (fns.featureDx)
        grad = mul(grad, call(fns.featureDx, {keyRaw[t]}));
      Value at = addIndex(kBase, column(t));
      storeStored(grad, dk, at);
      storeStored(acc[columnsPerLane + t], dv, at);
    }
    if (numParams == 0)
      return;
    ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, index(0)), [&]() {
      for (unsigned p = 0; p < numParams; ++p)
        LLVM::AtomicRMWOp::create(b, LLVM::AtomicBinOp::fadd, element(dParams, index(p), f32),
                                  acc[2 * columnsPerLane + p], LLVM::AtomicOrdering::monotonic);
    });
  });
  gpu::ReturnOp::create(b);
}

} // namespace

/// Fails unless the kernel's score is one the GPU lowering implements: a dot or
/// scaled_dot contraction without learnable weights or row inputs.
static LogicalResult checkContractSupported(KernelOp kernel, StringRef lowering) {
  ScoreOp score = kernel.getScoreOp();
  if (!score)
    return success();
  ContractKind contract = score.getContract();
  if (contract != ContractKind::Dot && contract != ContractKind::ScaledDot)
    return kernel.emitOpError() << "uses contract " << stringifyContractKind(contract)
                                << " (score " << kernel.getScoreAttr() << "), which the "
                                << lowering
                                << " lowering does not support yet; supported: dot, scaled_dot";
  if (score.getNumWeights() != 0)
    return kernel.emitOpError() << "has a score with learnable weights (score "
                                << kernel.getScoreAttr() << "), which the " << lowering
                                << " lowering does not support yet";
  if (score.getNumRowInputs() != 0)
    return kernel.emitOpError() << "has a score with row inputs (score "
                                << kernel.getScoreAttr() << "), which the " << lowering
                                << " lowering does not support yet";
  return success();
}

std::optional<int> mlir::attn::cudaChipVersion(StringRef chip) {
  int version;
  if (!chip.consume_front("sm_"))
    return std::nullopt;
  // Architecture-specific variants (sm_90a, sm_100f) share the number's rules.
  chip = chip.rtrim("abcdefghijklmnopqrstuvwxyz");
  if (chip.getAsInteger(10, version))
    return std::nullopt;
  return version;
}

LogicalResult mlir::attn::lowerKernelToGPU(KernelOp kernel, ArrayRef<FloatType> storageTypes,
                                           ArrayRef<int64_t> headDims,
                                           ArrayRef<std::string> chips) {
  if (failed(checkContractSupported(kernel, "GPU")))
    return failure();
  for (int64_t headDim : headDims)
    if (!llvm::is_contained(kGpuHeadDims, headDim))
      return kernel.emitOpError() << "head dim " << headDim
                                  << " is not supported on GPU; supported: 32, 64, 128";
  MLIRContext *ctx = kernel.getContext();
  SmallVector<Attribute> targets;
  for (const std::string &chip : chips) {
    std::optional<int> version = cudaChipVersion(chip);
    if (!version || *version < 80)
      return kernel.emitOpError() << "CUDA target '" << chip
                                  << "' is not supported; expected sm_XY with XY >= 80 (sm_80, sm_90, ...)";
    targets.push_back(NVVM::NVVMTargetAttr::get(ctx, /*optLevel=*/3, "nvptx64-nvidia-cuda", chip));
  }
  ModuleOp module = kernel->getParentOfType<ModuleOp>();
  if (module.lookupSymbol(kCudaModuleName))
    return kernel.emitOpError() << "the module already holds gpu.module @" << kCudaModuleName
                                << "; an artifact holds the CUDA kernels of one kernel";
  FailureOr<ScalarFunctions> fns = lookupScalarFunctions(kernel, Float32Type::get(ctx));
  if (failed(fns))
    return failure();

  ImplicitLocOpBuilder b(kernel.getLoc(), ctx);
  b.setInsertionPointToEnd(module.getBody());
  auto gpuModule = gpu::GPUModuleOp::create(b, kCudaModuleName,
                                            targets.empty() ? ArrayAttr() : b.getArrayAttr(targets));
  for (FloatType storage : storageTypes)
    for (int64_t headDim : headDims) {
      GPUKernelBuilder builder(kernel, *fns, storage, headDim, b);
      // Tensor cores take P = g·e^-m in the storage type: bounded by 1 for online
      // normalizers; a plain normalizer's g is unbounded and could overflow f16.
      bool tensorCores = !storage.isF32() && (storage.isBF16() || fns->online());
      for (void (GPUKernelBuilder::*build)() :
           {tensorCores ? &GPUKernelBuilder::buildTensorCoreForward
                        : &GPUKernelBuilder::buildForward,
            &GPUKernelBuilder::buildBackwardPrep,
            tensorCores ? &GPUKernelBuilder::buildTensorCoreBackwardDkDv
                        : &GPUKernelBuilder::buildBackwardDkDv,
            tensorCores ? &GPUKernelBuilder::buildTensorCoreBackwardDq
                        : &GPUKernelBuilder::buildBackwardDq}) {
        b.setInsertionPointToEnd(gpuModule.getBody());
        (builder.*build)();
      }
    }
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
  return success();
}

std::string mlir::attn::cudaManifestLines(ModuleOp module) {
  auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(kCudaModuleName);
  if (!gpuModule)
    return "";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "cuda-targets";
  if (ArrayAttr targets = gpuModule.getTargetsAttr())
    for (Attribute target : targets)
      if (auto nvvm = dyn_cast<NVVM::NVVMTargetAttr>(target))
        os << " " << nvvm.getChip();
  os << "\n";
  for (auto function : gpuModule.getOps<gpu::GPUFuncOp>()) {
    auto role = function->getAttrOfType<StringAttr>("attn.role");
    if (!role)
      continue;
    os << "cuda-kernel " << role.getValue() << " "
       << function->getAttrOfType<StringAttr>("attn.dtype").getValue() << " "
       << function->getAttrOfType<IntegerAttr>("attn.head_dim").getInt() << " "
       << function.getName() << " tile "
       << function->getAttrOfType<IntegerAttr>("attn.tile").getInt() << " threads "
       << (*function.getKnownBlockSize())[0] << " smem 0\n";
  }
  return text;
}
