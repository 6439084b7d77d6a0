//===- LowerToLoops.cpp - CPU forward/backward entry points ---------------===//
//
// One call handles one (batch, head) slice. Forward walks query rows i in
// [q_begin, q_end) and keys j once, accumulating Σ g·v and Σ h (online: rescaled
// by e^(m_old - m_new) whenever the running maximum m grows). Backward recomputes
// s_ij from q, k and the saved row statistics, so nothing N×N is ever stored:
//   w = g/C, ds = (g'(s)·(dO_i·v_j) - h'(s)·D_i)/C, D_i = dO_i·O_i,
//   dθ += (∂g/∂θ·(dO_i·v_j) - ∂h/∂θ·D_i)/C + ds·∂mod/∂θ.
// Cosine, bilinear and additive scores transform the rows of q and k once per
// call (normalise; project by the learnable weights) and run the dot (additive:
// tanh-dot) kernels on the transformed rows; their backward chains dq', dk'
// back to dq, dk and the weights' gradients.
//
//===----------------------------------------------------------------------===//
#include "lib/LowerToLoops.h"

#include "lib/KernelFunctions.h"
#include "lib/KernelisedAnalysis.h"
#include "lib/LoopBuilders.h"
#include "lib/LowerLinearAttention.h"
#include "lib/LowerToGPU.h"
#include "lib/NormalizerAnalysis.h"
#include "runtime/include/attn/abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::attn;

namespace {

std::string typeSuffix(FloatType type) { return elementTypeName(type); }

/// Head dims with a register-blocked, vectorised specialisation; other dims (and
/// views whose rows are not contiguous) take the generic loops.
constexpr int64_t kTiledHeadDims[] = {32, 64, 128};

/// Generates the entry points of one kernel for one element type.
class KernelCodegen {
public:
  KernelCodegen(KernelOp kernel, FloatType type, int64_t vectorBits, ImplicitLocOpBuilder &b)
      : kernel(kernel), normalizer(kernel.getNormalizerOp()), score(kernel.getScoreOp()),
        type(type), b(b), lanes(vectorBits / type.getWidth()) {
    MLIRContext *ctx = kernel.getContext();
    int64_t dyn = ShapedType::kDynamic;
    matrixType = MemRefType::get({dyn, dyn}, type, StridedLayoutAttr::get(ctx, dyn, {dyn, dyn}));
    rowMajorType = MemRefType::get({dyn, dyn}, type, StridedLayoutAttr::get(ctx, dyn, {dyn, 1}));
    vectorType = MemRefType::get({dyn}, type, StridedLayoutAttr::get(ctx, dyn, {dyn}));
    laneType = VectorType::get({lanes}, type);
  }

  LogicalResult instantiateFunctions();

  /// The public entry points (runtime/include/attn/abi.h), each with its
  /// generic loops and tiled specialisations.
  void buildForwardEntry();
  void buildBackwardEntry();

  /// ε of the cosine contraction's norms |x|_ε = sqrt(x·x + ε²): a zero row gets
  /// cos = 0 and finite gradients instead of 0/0.
  static constexpr double kCosineEpsilon = 1e-6;

private:
  SmallVector<Type> forwardInputs(MemRefType matrix) {
    Type i64 = b.getI64Type();
    return {matrix, matrix, matrix, matrix, vectorType, vectorType, vectorType, matrix,
            i64, i64, i64, i64};
  }
  SmallVector<Type> backwardInputs(MemRefType matrix) {
    Type i64 = b.getI64Type();
    return {matrix, matrix, matrix, matrix, matrix, vectorType, vectorType,
            vectorType, matrix, matrix, matrix, matrix, vectorType, matrix, i64, i64};
  }
  /// A private function `name` taking `inputs`; returns its entry block (the
  /// caller moves the builder there under its own insertion guard).
  Block *privateFunction(StringRef name, ArrayRef<Type> inputs) {
    auto function = func::FuncOp::create(b, name, FunctionType::get(kernel.getContext(), inputs, {}));
    function.setPrivate();
    return function.addEntryBlock();
  }
  /// The same for an ABI entry point: public, with MLIR's C interface.
  Block *entryPoint(StringRef name, ArrayRef<Type> inputs) {
    auto function = func::FuncOp::create(b, name, FunctionType::get(kernel.getContext(), inputs, {}));
    function->setAttr("llvm.emit_c_interface", UnitAttr::get(kernel.getContext()));
    return function.addEntryBlock();
  }
  /// Head dims that get a tiled specialisation at this element type (none for
  /// the kernelised form, whose work is O(N·d·dv) already, nor for the additive
  /// contract, whose tanh-dot has no tile-product form).
  SmallVector<int64_t> tiledHeadDims() {
    SmallVector<int64_t> dims;
    if (kernelised || (score && score.getContract() == ContractKind::Additive))
      return dims;
    for (int64_t d : kTiledHeadDims)
      if (d % lanes == 0)
        dims.push_back(d);
    return dims;
  }
  /// The public `entryName`: calls `<entryName>.d<D>` when q's head dim (arg 0)
  /// and v's value dim (arg 2) both equal D and every matrix argument has unit
  /// inner stride, else `<entryName>.generic`.
  void buildDispatch(StringRef entryName, ArrayRef<Type> inputs, bool isPublic);

  // --- row transforms (cosine, bilinear, additive) -----------------------------
  /// Whether q (query side) or k rows are transformed before the kernel proper.
  bool transformsRows(bool querySide) {
    if (!score)
      return false;
    switch (score.getContract()) {
    case ContractKind::Cosine:
    case ContractKind::Additive:
      return true;
    case ContractKind::Bilinear:
      return querySide;
    case ContractKind::Dot:
    case ContractKind::ScaledDot:
      return score.getNumWeights() != 0; // W q and W k before the feature map
    }
    llvm_unreachable("unknown contract kind");
  }
  /// The projection weight of one side (null for cosine, which normalises), as
  /// W(o, c) = params[offset + o·outStride + c·inStride]: out[r, o] = Σ_c x[r, c]·W(o, c).
  struct Projection {
    Value offset;
    int64_t outDim, outStride, inStride;
  };
  std::optional<Projection> projectionOf(bool querySide);
  /// 1/‖x_r‖_ε = 1/sqrt(x_r·x_r + ε²) of row r of `matrix` (cosine).
  Value inverseEpsilonNorm(Value matrix, Value r) {
    Value squares = loop(index(0), dim(matrix, 1), {constant(kCosineEpsilon * kCosineEpsilon)},
                         [&](Value c, ValueRange acc) -> SmallVector<Value> {
                           Value x = load(matrix, {r, c});
                           return {add(acc[0], mul(x, x))};
                         })[0];
    return math::RsqrtOp::create(b, squares);
  }
  /// A fresh contiguous [rows x cols] matrix (as matrixType) and its allocation.
  std::pair<Value, Value> allocMatrix(Value rows, Value cols);
  /// dst[r, :] = transform(src[r, :]) for r in [begin, end).
  void transformRows(bool querySide, Value src, Value dst, Value params, Value begin, Value end);
  /// From the gradient `dTransformed` of the transformed rows: dSrc (overwritten)
  /// and the weight's gradient (accumulated into dParams).
  void chainRows(bool querySide, Value src, Value dTransformed, Value dSrc, Value params,
                 Value dParams);
  /// Public entry points that transform rows, then call `<entryName>.inner`.
  void buildTransformedForward(StringRef entryName);
  void buildTransformedBackward(StringRef entryName);
  void buildForward(StringRef name);
  void buildBackward(StringRef name);
  /// The linear-time form (lib/LowerLinearAttention.h) as `name`.
  void buildKernelised(StringRef name, bool forward);
  /// Register-blocked, vectorised forward / backward for head dim == value dim.
  void buildTiledForward(StringRef name, int64_t headDim);
  void buildTiledBackward(StringRef name, int64_t headDim);

  // --- small builders -------------------------------------------------------
  Value constant(double value) { return arith::ConstantOp::create(b, type, b.getFloatAttr(type, value)); }
  Value index(int64_t value) { return arith::ConstantIndexOp::create(b, value); }
  Value call(func::FuncOp function, ValueRange arguments) {
    return func::CallOp::create(b, function, arguments).getResult(0);
  }
  Value load(Value memref, ValueRange indices) { return memref::LoadOp::create(b, memref, indices); }
  void store(Value value, Value memref, ValueRange indices) {
    memref::StoreOp::create(b, value, memref, indices);
  }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, x, y); }
  Value dim(Value memref, int64_t d) { return memref::DimOp::create(b, memref, d); }
  Value splat(Value scalar) {
    return vector::BroadcastOp::create(b, VectorType::get({lanes}, scalar.getType()), scalar);
  }
  Value splatConstant(double value) { return splat(constant(value)); }
  Value innerStride(Value memref) {
    return memref::ExtractStridedMetadataOp::create(b, memref).getStrides()[1];
  }
  /// Key panels for the score and dP tiles: per block of `blockKeys` keys a
  /// contiguous [headDim][blockKeys] panel (GEMM-style packing), so a tile reads
  /// consecutive cache lines instead of rows a whole key range apart.
  Value allocPanels(Value paddedKeys, int64_t headDim, int64_t blockKeys) {
    Value rows = arith::MulIOp::create(b, arith::DivUIOp::create(b, paddedKeys, index(blockKeys)),
                                       index(headDim));
    return memref::AllocOp::create(b, MemRefType::get({ShapedType::kDynamic, blockKeys}, type),
                                   ValueRange{rows}, b.getI64IntegerAttr(64));
  }
  /// Where entry (key j, column c) of the panels lives.
  SmallVector<Value> panelIndex(Value j, Value c, int64_t headDim, int64_t blockKeys) {
    Value base = arith::MulIOp::create(b, arith::DivUIOp::create(b, j, index(blockKeys)), index(headDim));
    return {arith::AddIOp::create(b, base, c), arith::RemUIOp::create(b, j, index(blockKeys))};
  }

  /// Lanes of keys [start, start + lanes) that take part for query row `i`:
  /// below `rowEnd` (a cheap create_mask) and kept by the mask region.
  struct KeyLanes {
    Value keep;   // vector<lanes x i1>
    Value valid;  // index: lanes below rowEnd
    Value jLanes; // vector<lanes x index>, only when a region needs key indices
  };
  KeyLanes keyLanesAt(Value start, Value rowEnd, Value i) {
    Value valid = arith::MaxSIOp::create(
        b, arith::MinSIOp::create(b, arith::SubIOp::create(b, rowEnd, start), index(lanes)), index(0));
    KeyLanes result{vector::CreateMaskOp::create(b, VectorType::get({lanes}, b.getI1Type()), ValueRange{valid}),
                    valid, Value()};
    if (lanewise.mask || lanewise.score)
      result.jLanes = arith::AddIOp::create(
          b, splat(start), vector::StepOp::create(b, VectorType::get({lanes}, b.getIndexType())));
    if (lanewise.mask)
      result.keep = arith::AndIOp::create(b, result.keep, call(lanewise.mask, {splat(i), result.jLanes}));
    return result;
  }
  /// `leading` followed by the kernel's params, splat to lanes (see paramLanes).
  SmallVector<Value> lanewiseArgs(ValueRange leading) {
    SmallVector<Value> all(leading);
    all.append(paramLanes);
    return all;
  }
  /// φ(k) (and v) of keys [0, keyLimit) packed into zero-padded panels for the
  /// tile products; with `keepRows` also φ(k) as rows (for dQ with a feature map;
  /// otherwise keyRows is k itself).
  struct PackedKeys {
    Value paddedKeys, keysT, valuesT, keyRows;
  };
  PackedKeys packKeys(Value k, Value v, Value keyLimit, int64_t headDim, int64_t blockKeys);
  void freePacked(const PackedKeys &packed, Value k) {
    for (Value buffer : {packed.keysT, packed.valuesT, packed.keyRows})
      if (buffer && buffer != k)
        memref::DeallocOp::create(b, buffer);
  }

  /// The tile Σ_c rowScalar(r, c)·panels[panel + c, :] for r < rows over one key
  /// panel of `scoreVectors` vectors: rows·scoreVectors vectors, row-major. The
  /// score tile (scale·φ(q) rows × φ(k)ᵀ) and the backward's dP tile (dO × vᵀ).
  SmallVector<Value> panelProduct(int64_t rows, int64_t scoreVectors, int64_t headDim,
                                  Value panels, Value panel,
                                  function_ref<Value(int64_t, Value)> rowScalar) {
    SmallVector<Value> init(rows * scoreVectors, splatConstant(0.0));
    return llvm::to_vector(loop(index(0), index(headDim), init, [&](Value c, ValueRange t) -> SmallVector<Value> {
      SmallVector<Value> columns;
      Value row = arith::AddIOp::create(b, panel, c);
      for (int64_t h = 0; h < scoreVectors; ++h)
        columns.push_back(vector::LoadOp::create(b, laneType, panels, ValueRange{row, index(h * lanes)}));
      SmallVector<Value> next;
      for (int64_t r = 0; r < rows; ++r) {
        Value x = splat(rowScalar(r, c));
        for (int64_t h = 0; h < scoreVectors; ++h)
          next.push_back(vector::FMAOp::create(b, x, columns[h], t[r * scoreVectors + h]));
      }
      return next;
    }));
  }

  /// Horizontal sum; reassociation lets it lower to a log-depth shuffle tree.
  Value sumLanes(Value lanesValue) {
    return vector::ReductionOp::create(b, vector::CombiningKind::ADD, lanesValue,
                                       arith::FastMathFlags::reassoc);
  }

  /// `matrix` with its unit inner stride made static (checked by the caller),
  /// so vector loads apply. A reinterpret_cast, unlike memref.cast, is not
  /// folded away into the loads.
  Value asRowMajor(Value matrix) {
    auto metadata = memref::ExtractStridedMetadataOp::create(b, matrix);
    OpFoldResult unit = b.getIndexAttr(1);
    return memref::ReinterpretCastOp::create(
        b, rowMajorType, metadata.getBaseBuffer(), OpFoldResult(metadata.getOffset()),
        ArrayRef<OpFoldResult>{metadata.getSizes()[0], metadata.getSizes()[1]},
        ArrayRef<OpFoldResult>{metadata.getStrides()[0], unit});
  }
  /// memref[row, c] += factor · source[sourceRow, c] for c < n.
  void axpyRow(Value memref, Value row, Value factor, Value source, Value sourceRow, Value n);
  /// scf.for over [lb, ub) carrying `inits`; `body` returns the next values.
  ValueRange loop(Value lb, Value ub, ValueRange inits,
                  function_ref<SmallVector<Value>(Value, ValueRange)> body, Value step = {});
  /// scf.if yielding `types`; each branch returns its values.
  ValueRange branch(Value cond, TypeRange types, function_ref<SmallVector<Value>()> thenBody,
                    function_ref<SmallVector<Value>()> elseBody);

  // --- attention pieces -----------------------------------------------------
  /// Loads params, scale, bounds shared by forward and backward.
  void prologue(Value q, Value k, Value params, Value kvLen, Value causal);
  /// Keys j < keyEnd(i) take part before the mask region is asked.
  Value keyEnd(Value i);
  Value keep(Value i, Value j);
  /// C_i (times e^-m online) from the row's running max, Σ h and key count.
  Value rowDenominator(Value m, Value sum, Value count);
  /// The contracted score before the mod: scale · Σ_c φ(q_ic)·φ(k_jc).
  Value contract(Value q, Value k, Value i, Value j);
  Value modScore(Value raw, Value i, Value j);
  SmallVector<Value> withParams(ValueRange leading) {
    SmallVector<Value> args(leading);
    args.append(paramValues);
    return args;
  }
  unsigned numRowInputs() { return score ? score.getNumRowInputs() : 0; }
  /// The row inputs' values at query row i.
  SmallVector<Value> rowInputsAt(Value i) {
    SmallVector<Value> values;
    for (unsigned r = 0; r < numRowInputs(); ++r)
      values.push_back(load(rowInputs, {index(r), i}));
    return values;
  }
  /// Arguments of the score function: raw, i, j, the row inputs at i, params.
  SmallVector<Value> scoreArgs(Value raw, Value i, Value j) {
    SmallVector<Value> args{raw, i, j};
    args.append(rowInputsAt(i));
    args.append(paramValues);
    return args;
  }
  /// The same on lanes: every lane of a row shares i and its row inputs.
  SmallVector<Value> scoreLaneArgs(Value raw, Value i, Value jLanes) {
    SmallVector<Value> args{raw, splat(i), jLanes};
    for (Value value : rowInputsAt(i))
      args.push_back(splat(value));
    args.append(paramLanes);
    return args;
  }
  /// Zeroes the [R, Nq] row-input gradients.
  void zeroRowInputGrads(Value queries) {
    for (unsigned r = 0; r < numRowInputs(); ++r)
      loop(index(0), queries, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
        store(constant(0.0), dRowInputs, {index(r), i});
        return {};
      });
  }

  KernelOp kernel;
  NormalizerOp normalizer;
  ScoreOp score;
  FloatType type;
  ImplicitLocOpBuilder &b;
  int64_t lanes; // vector lanes of `type`
  MemRefType matrixType, rowMajorType, vectorType;
  VectorType laneType;
  ScalarFunctions fns;
  ScalarFunctions lanewise; // the same functions on vector<lanes x _>
  bool online = false;
  bool kernelised = false;

  // Values of the function being built.
  SmallVector<Value> paramValues, paramLanes;
  Value scale, headDim, kvEnd, isCausal, paramsBuffer;
  Value rowInputs, dRowInputs; // [R, Nq]; dRowInputs in backward only
};

ValueRange KernelCodegen::loop(Value lb, Value ub, ValueRange inits,
                               function_ref<SmallVector<Value>(Value, ValueRange)> body,
                               Value step) {
  return buildLoop(b, lb, ub, inits, body, step);
}

ValueRange KernelCodegen::branch(Value cond, TypeRange types,
                                 function_ref<SmallVector<Value>()> thenBody,
                                 function_ref<SmallVector<Value>()> elseBody) {
  return buildBranch(b, cond, types, thenBody, elseBody);
}

void KernelCodegen::axpyRow(Value memref, Value row, Value factor, Value source,
                            Value sourceRow, Value n) {
  loop(index(0), n, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
    Value updated = add(load(memref, {row, c}), mul(factor, load(source, {sourceRow, c})));
    store(updated, memref, {row, c});
    return {};
  });
}

LogicalResult KernelCodegen::instantiateFunctions() {
  ModuleOp module = kernel->getParentOfType<ModuleOp>();
  FailureOr<ScalarFunctions> scalars = lookupScalarFunctions(kernel, type);
  if (failed(scalars))
    return failure();
  fns = std::move(*scalars);
  online = fns.online();
  FailureOr<Algorithm> algorithm = kernelAlgorithm(kernel);
  if (failed(algorithm))
    return failure();
  kernelised = *algorithm == Algorithm::Kernelised;

  auto lanewiseCopy = [&](func::FuncOp scalar, func::FuncOp &slot) -> LogicalResult {
    if (!scalar)
      return success();
    std::string name = (scalar.getName() + ".x" + Twine(lanes)).str();
    if (auto existing = module.lookupSymbol<func::FuncOp>(name)) {
      slot = existing;
      return success();
    }
    FailureOr<func::FuncOp> copy = cloneRetyped(scalar, type, lanes, name);
    if (failed(copy))
      return failure();
    slot = *copy;
    return success();
  };
  for (auto [scalar, vector] :
       llvm::zip(SmallVector<func::FuncOp *>{&fns.numerator, &fns.denominator, &fns.stabilizer,
                                            &fns.score, &fns.feature, &fns.mask, &fns.numeratorDs,
                                            &fns.denominatorDs, &fns.scoreDs, &fns.featureDx},
                 SmallVector<func::FuncOp *>{&lanewise.numerator, &lanewise.denominator,
                                            &lanewise.stabilizer, &lanewise.score,
                                            &lanewise.feature, &lanewise.mask,
                                            &lanewise.numeratorDs, &lanewise.denominatorDs,
                                            &lanewise.scoreDs, &lanewise.featureDx}))
    if (failed(lanewiseCopy(*scalar, *vector)))
      return failure();
  for (auto [scalars, vectors] :
       llvm::zip(SmallVector<SmallVector<func::FuncOp> *>{&fns.numeratorDp, &fns.denominatorDp, &fns.scoreDp,
                                                         &fns.scoreDr},
                 SmallVector<SmallVector<func::FuncOp> *>{&lanewise.numeratorDp, &lanewise.denominatorDp,
                                                         &lanewise.scoreDp, &lanewise.scoreDr})) {
    vectors->resize(scalars->size());
    for (auto [scalar, vector] : llvm::zip(*scalars, *vectors))
      if (failed(lanewiseCopy(scalar, vector)))
        return failure();
  }
  return success();
}

void KernelCodegen::prologue(Value q, Value k, Value params, Value kvLen, Value causal) {
  paramsBuffer = params;
  paramValues.clear();
  for (unsigned p = 0, e = kernelParamNames(kernel).size(); p < e; ++p)
    paramValues.push_back(load(params, {index(p)}));
  headDim = dim(q, 1);
  if (std::optional<double> fixed = fixedScoreScale(kernel))
    scale = constant(*fixed);
  else {
    Value d = arith::IndexCastOp::create(b, b.getI64Type(), headDim);
    scale = math::RsqrtOp::create(b, arith::SIToFPOp::create(b, type, d));
  }
  Value keys = dim(k, 0);
  Value kv = arith::IndexCastOp::create(b, b.getIndexType(), kvLen);
  kvEnd = arith::MinSIOp::create(b, kv, keys);
  isCausal = arith::CmpIOp::create(b, arith::CmpIPredicate::ne, causal,
                                   arith::ConstantIntOp::create(b, 0, 64));
}

Value KernelCodegen::keyEnd(Value i) {
  Value causalEnd = arith::MinSIOp::create(b, kvEnd, arith::AddIOp::create(b, i, index(1)));
  return arith::SelectOp::create(b, isCausal, causalEnd, kvEnd);
}

Value KernelCodegen::keep(Value i, Value j) {
  if (fns.mask)
    return call(fns.mask, {i, j});
  return arith::ConstantIntOp::create(b, 1, 1);
}

Value KernelCodegen::rowDenominator(Value m, Value sum, Value count) {
  return buildRowDenominator(b, normalizer, online, m, sum, count);
}

Value KernelCodegen::contract(Value q, Value k, Value i, Value j) {
  if (score && score.getContract() == ContractKind::Additive) {
    // q, k are the projections W_q q, W_k k: raw = Σ_a v_a·tanh(q_ia + k_ja).
    int64_t vOffset = kernelWeights(kernel)[2].offset;
    return loop(index(0), headDim, {constant(0.0)}, [&](Value a, ValueRange acc) -> SmallVector<Value> {
      Value t = math::TanhOp::create(b, add(load(q, {i, a}), load(k, {j, a})));
      Value va = load(paramsBuffer, {arith::AddIOp::create(b, a, index(vOffset))});
      return {add(acc[0], mul(va, t))};
    })[0];
  }
  Value dot = loop(index(0), headDim, {constant(0.0)},
                   [&](Value c, ValueRange acc) -> SmallVector<Value> {
                     Value x = load(q, {i, c}), y = load(k, {j, c});
                     if (fns.feature) {
                       x = call(fns.feature, {x});
                       y = call(fns.feature, {y});
                     }
                     return {add(acc[0], mul(x, y))};
                   })[0];
  return mul(dot, scale);
}

Value KernelCodegen::modScore(Value raw, Value i, Value j) {
  if (!fns.score)
    return raw;
  return call(fns.score, scoreArgs(raw, i, j));
}

void KernelCodegen::buildForward(StringRef name) {
  Block *entry = privateFunction(name, forwardInputs(matrixType));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  auto args = entry->getArguments();
  Value q = args[0], k = args[1], v = args[2], o = args[3], rowMax = args[4],
        rowSum = args[5], params = args[6];
  rowInputs = args[7];
  prologue(q, k, params, args[10], args[11]);
  Value qBegin = arith::IndexCastOp::create(b, b.getIndexType(), args[8]);
  Value qEnd = arith::IndexCastOp::create(b, b.getIndexType(), args[9]);
  Value valueDim = dim(v, 1);
  Value zero = constant(0.0);
  Value minusInf = constant(-std::numeric_limits<double>::infinity());
  Type indexType = b.getIndexType();

  loop(qBegin, qEnd, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
    loop(index(0), valueDim, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
      store(zero, o, {i, c});
      return {};
    });
    // Carried: running max m (online), Σ h, count of unmasked keys.
    ValueRange row = loop(
        index(0), keyEnd(i), {online ? minusInf : zero, zero, index(0)},
        [&](Value j, ValueRange acc) -> SmallVector<Value> {
          Value m = acc[0], l = acc[1], count = acc[2];
          return branch(
              keep(i, j), {type, type, indexType},
              [&]() -> SmallVector<Value> {
                Value s = modScore(contract(q, k, i, j), i, j);
                Value nextCount = arith::AddIOp::create(b, count, index(1));
                if (online) {
                  Value mNew = arith::MaximumFOp::create(b, m, call(fns.stabilizer, withParams({s})));
                  Value alpha = math::ExpOp::create(b, sub(m, mNew));
                  Value g = call(fns.numerator, withParams({s, mNew}));
                  Value h = call(fns.denominator, withParams({s, mNew}));
                  loop(index(0), valueDim, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
                    store(add(mul(load(o, {i, c}), alpha), mul(g, load(v, {j, c}))), o, {i, c});
                    return {};
                  });
                  return {mNew, add(mul(l, alpha), h), nextCount};
                }
                Value g = call(fns.numerator, withParams({s, zero}));
                axpyRow(o, i, g, v, j, valueDim);
                Value nextL = l;
                if (fns.denominator)
                  nextL = add(l, call(fns.denominator, withParams({s, zero})));
                return {m, nextL, nextCount};
              },
              [&]() -> SmallVector<Value> { return {m, l, count}; });
        });
    Value m = row[0], l = row[1], count = row[2];
    Value denominator = rowDenominator(
        m, l, arith::UIToFPOp::create(b, type, arith::IndexCastOp::create(b, b.getI64Type(), count)));
    Value anyKey = arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, count, index(0));
    ValueRange stats = branch(
        anyKey, {type, type},
        [&]() -> SmallVector<Value> {
          Value inverse = div(constant(1.0), denominator);
          loop(index(0), valueDim, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
            store(mul(load(o, {i, c}), inverse), o, {i, c});
            return {};
          });
          return {online ? m : zero, denominator};
        },
        [&]() -> SmallVector<Value> { return {zero, zero}; });
    store(stats[0], rowMax, {i});
    store(stats[1], rowSum, {i});
    return {};
  });
  func::ReturnOp::create(b);
}

void KernelCodegen::buildKernelised(StringRef name, bool forward) {
  SmallVector<Type> inputs = forward ? forwardInputs(matrixType) : backwardInputs(matrixType);
  Block *entry = privateFunction(name, inputs);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  auto args = entry->getArguments();
  if (forward)
    prologue(args[0], args[1], args[6], args[10], args[11]);
  else
    prologue(args[0], args[1], args[7], args[14], args[15]);
  // A kernelised kernel's mask region, if any, is causal (KernelisedAnalysis).
  Value causal = fns.mask ? arith::ConstantIntOp::create(b, 1, 1).getResult() : isCausal;
  LinearForm form{kernel, type, fns.numerator, fns.denominator, fns.score, fns.feature,
                  fns.featureDx, fns.phase, fns.numeratorDp, fns.denominatorDp,
                  scale, kvEnd, causal, paramValues};
  if (forward)
    buildLinearForward(b, form, args);
  else
    buildLinearBackward(b, form, args);
  func::ReturnOp::create(b);
}

void KernelCodegen::buildForwardEntry() {
  std::string entryName = "attn_forward_" + typeSuffix(type);
  bool transformed = transformsRows(/*querySide=*/true);
  std::string kernelName = transformed ? entryName + ".inner" : entryName;
  if (kernelised)
    buildKernelised(kernelName + ".generic", /*forward=*/true);
  else
    buildForward(kernelName + ".generic");
  for (int64_t headDim : tiledHeadDims())
    buildTiledForward(kernelName + ".d" + std::to_string(headDim), headDim);
  buildDispatch(kernelName, forwardInputs(matrixType), /*isPublic=*/!transformed);
  if (transformed)
    buildTransformedForward(entryName);
}

void KernelCodegen::buildBackwardEntry() {
  std::string entryName = "attn_backward_" + typeSuffix(type);
  bool transformed = transformsRows(/*querySide=*/true);
  std::string kernelName = transformed ? entryName + ".inner" : entryName;
  if (kernelised)
    buildKernelised(kernelName + ".generic", /*forward=*/false);
  else
    buildBackward(kernelName + ".generic");
  for (int64_t headDim : tiledHeadDims())
    buildTiledBackward(kernelName + ".d" + std::to_string(headDim), headDim);
  buildDispatch(kernelName, backwardInputs(matrixType), /*isPublic=*/!transformed);
  if (transformed)
    buildTransformedBackward(entryName);
}

std::optional<KernelCodegen::Projection> KernelCodegen::projectionOf(bool querySide) {
  SmallVector<KernelWeight> weights = kernelWeights(kernel);
  switch (score.getContract()) {
  case ContractKind::Bilinear: { // q' = q·W: W(o, c) = W[c, o]
    int64_t d = weights[0].shape[0];
    return Projection{index(weights[0].offset), d, 1, d};
  }
  case ContractKind::Additive: { // q' = W_q·q: W(o, c) = W_q[o, c]
    const KernelWeight &w = weights[querySide ? 0 : 1];
    return Projection{index(w.offset), w.shape[0], w.shape[1], 1};
  }
  case ContractKind::Dot:
  case ContractKind::ScaledDot: { // q' = W·q, k' = W·k (one shared W)
    const KernelWeight &w = weights[0];
    return Projection{index(w.offset), w.shape[0], w.shape[1], 1};
  }
  default:
    return std::nullopt;
  }
}

std::pair<Value, Value> KernelCodegen::allocMatrix(Value rows, Value cols) {
  Value buffer = memref::AllocOp::create(
      b, MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, type),
      ValueRange{rows, cols}, b.getI64IntegerAttr(64));
  return {memref::CastOp::create(b, matrixType, buffer), buffer};
}

void KernelCodegen::transformRows(bool querySide, Value src, Value dst, Value params, Value begin,
                                  Value end) {
  Value cols = dim(src, 1);
  std::optional<Projection> projection = projectionOf(querySide);
  loop(begin, end, {}, [&](Value r, ValueRange) -> SmallVector<Value> {
    if (!projection) { // cosine: x / |x|_ε
      Value inverseNorm = inverseEpsilonNorm(src, r);
      loop(index(0), cols, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
        store(mul(load(src, {r, c}), inverseNorm), dst, {r, c});
        return {};
      });
      return {};
    }
    loop(index(0), index(projection->outDim), {}, [&](Value o, ValueRange) -> SmallVector<Value> {
      Value row = arith::AddIOp::create(
          b, projection->offset, arith::MulIOp::create(b, o, index(projection->outStride)));
      Value sum = loop(index(0), cols, {constant(0.0)}, [&](Value c, ValueRange acc) -> SmallVector<Value> {
                    Value at = arith::AddIOp::create(
                        b, row, arith::MulIOp::create(b, c, index(projection->inStride)));
                    return {add(acc[0], mul(load(src, {r, c}), load(params, {at})))};
                  })[0];
      store(sum, dst, {r, o});
      return {};
    });
    return {};
  });
}

void KernelCodegen::chainRows(bool querySide, Value src, Value dTransformed, Value dSrc,
                              Value params, Value dParams) {
  Value cols = dim(src, 1);
  std::optional<Projection> projection = projectionOf(querySide);
  loop(index(0), dim(src, 0), {}, [&](Value r, ValueRange) -> SmallVector<Value> {
    if (!projection) { // x̂ = x/n: dx = (dx̂ - x̂·(x̂·dx̂))/n
      Value inverseNorm = inverseEpsilonNorm(src, r);
      Value along = loop(index(0), cols, {constant(0.0)}, [&](Value c, ValueRange acc) -> SmallVector<Value> {
                      Value unit = mul(load(src, {r, c}), inverseNorm);
                      return {add(acc[0], mul(unit, load(dTransformed, {r, c})))};
                    })[0];
      loop(index(0), cols, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
        Value unit = mul(load(src, {r, c}), inverseNorm);
        store(mul(sub(load(dTransformed, {r, c}), mul(unit, along)), inverseNorm), dSrc, {r, c});
        return {};
      });
      return {};
    }
    // out[r, o] = Σ_c x[r, c]·W(o, c): dx[r, c] = Σ_o dout[r, o]·W(o, c), dW(o, c) += dout[r, o]·x[r, c]
    loop(index(0), cols, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
      Value x = load(src, {r, c});
      Value column = arith::AddIOp::create(b, projection->offset,
                                           arith::MulIOp::create(b, c, index(projection->inStride)));
      Value sum = loop(index(0), index(projection->outDim), {constant(0.0)},
                       [&](Value o, ValueRange acc) -> SmallVector<Value> {
                         Value at = arith::AddIOp::create(
                             b, column, arith::MulIOp::create(b, o, index(projection->outStride)));
                         Value grad = load(dTransformed, {r, o});
                         store(add(load(dParams, {at}), mul(grad, x)), dParams, {at});
                         return {add(acc[0], mul(grad, load(params, {at})))};
                       })[0];
      store(sum, dSrc, {r, c});
      return {};
    });
    return {};
  });
}

void KernelCodegen::buildTransformedForward(StringRef entryName) {
  Block *entry = entryPoint(entryName, forwardInputs(matrixType));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  SmallVector<Value> args(entry->getArguments());
  Value q = args[0], k = args[1], params = args[6];
  Value qBegin = arith::IndexCastOp::create(b, b.getIndexType(), args[8]);
  Value qEnd = arith::IndexCastOp::create(b, b.getIndexType(), args[9]);
  SmallVector<Value> buffers;
  auto transformed = [&](bool querySide, Value x, Value begin, Value end) {
    if (!transformsRows(querySide))
      return x;
    std::optional<Projection> projection = projectionOf(querySide);
    Value width = projection ? index(projection->outDim) : dim(x, 1);
    auto [matrix, buffer] = allocMatrix(dim(x, 0), width);
    buffers.push_back(buffer);
    transformRows(querySide, x, matrix, params, begin, end);
    return matrix;
  };
  // Only this call's query rows are read; every key row may be.
  args[0] = transformed(true, q, qBegin, qEnd);
  args[1] = transformed(false, k, index(0), dim(k, 0));
  func::CallOp::create(b, (entryName + ".inner").str(), TypeRange{}, args);
  for (Value buffer : buffers)
    memref::DeallocOp::create(b, buffer);
  func::ReturnOp::create(b);
}

void KernelCodegen::buildTransformedBackward(StringRef entryName) {
  Block *entry = entryPoint(entryName, backwardInputs(matrixType));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  SmallVector<Value> args(entry->getArguments());
  Value q = args[0], k = args[1], params = args[7], dq = args[9], dk = args[10], dParams = args[12];
  // The inner kernel writes the scalar params' gradients; the weights' start at 0.
  for (const KernelWeight &weight : kernelWeights(kernel))
    loop(index(weight.offset), index(weight.offset + weight.size), {}, [&](Value p, ValueRange) -> SmallVector<Value> {
      store(constant(0.0), dParams, {p});
      return {};
    });
  SmallVector<Value> buffers;
  struct Side {
    bool querySide;
    Value x, transformed, grad, dx;
  };
  SmallVector<Side> sides;
  for (auto [querySide, x, dx, position] : {std::tuple{true, q, dq, 0u}, std::tuple{false, k, dk, 1u}}) {
    if (!transformsRows(querySide))
      continue;
    std::optional<Projection> projection = projectionOf(querySide);
    Value width = projection ? index(projection->outDim) : dim(x, 1);
    auto [matrix, buffer] = allocMatrix(dim(x, 0), width);
    auto [grad, gradBuffer] = allocMatrix(dim(x, 0), width);
    buffers.append({buffer, gradBuffer});
    transformRows(querySide, x, matrix, params, index(0), dim(x, 0));
    args[position] = matrix;
    args[position + 9] = grad; // dq, dk
    sides.push_back({querySide, x, matrix, grad, dx});
  }
  func::CallOp::create(b, (entryName + ".inner").str(), TypeRange{}, args);
  for (const Side &side : sides)
    chainRows(side.querySide, side.x, side.grad, side.dx, params, dParams);
  for (Value buffer : buffers)
    memref::DeallocOp::create(b, buffer);
  func::ReturnOp::create(b);
}

void KernelCodegen::buildDispatch(StringRef entryName, ArrayRef<Type> inputs, bool isPublic) {
  Block *entry = isPublic ? entryPoint(entryName, inputs) : privateFunction(entryName, inputs);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  SmallVector<Value> args(entry->getArguments());
  Value headDim = dim(args[0], 1), valueDim = dim(args[2], 1);
  Value eligible = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, headDim, valueDim);
  SmallVector<unsigned> matrices;
  for (auto [position, type] : llvm::enumerate(inputs)) {
    if (type != matrixType)
      continue;
    matrices.push_back(position);
    Value unit = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, innerStride(args[position]), index(1));
    eligible = arith::AndIOp::create(b, eligible, unit);
  }

  SmallVector<int64_t> dims = tiledHeadDims();
  std::function<void(unsigned)> emitCase = [&](unsigned next) {
    if (next == dims.size()) {
      func::CallOp::create(b, (entryName + ".generic").str(), TypeRange{}, args);
      return;
    }
    Value matches = arith::AndIOp::create(
        b, eligible, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, headDim, index(dims[next])));
    auto ifOp = scf::IfOp::create(b, matches, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard caseGuard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    SmallVector<Value> operands(args);
    for (unsigned position : matrices)
      operands[position] = asRowMajor(args[position]);
    func::CallOp::create(b, (entryName + ".d" + Twine(dims[next])).str(), TypeRange{}, operands);
    b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    emitCase(next + 1);
  };
  emitCase(0);
  func::ReturnOp::create(b);
}

KernelCodegen::PackedKeys KernelCodegen::packKeys(Value k, Value v, Value keyLimit,
                                                  int64_t headDim, int64_t blockKeys) {
  PackedKeys packed;
  packed.paddedKeys = arith::MulIOp::create(
      b, arith::CeilDivSIOp::create(b, keyLimit, index(blockKeys)), index(blockKeys));
  packed.keysT = allocPanels(packed.paddedKeys, headDim, blockKeys);
  if (v)
    packed.valuesT = allocPanels(packed.paddedKeys, headDim, blockKeys);
  packed.keyRows = k;
  bool keyRowsNeeded = v && fns.feature;
  if (keyRowsNeeded)
    packed.keyRows = memref::AllocOp::create(b, MemRefType::get({ShapedType::kDynamic, headDim}, type),
                                             ValueRange{packed.paddedKeys}, b.getI64IntegerAttr(64));
  Value zero = constant(0.0);
  loop(index(0), packed.paddedKeys, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
    Value inRange = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, j, keyLimit);
    Value row = arith::SelectOp::create(b, inRange, j, index(0));
    loop(index(0), index(headDim), {}, [&](Value c, ValueRange) -> SmallVector<Value> {
      Value x = load(k, {row, c});
      if (fns.feature)
        x = call(fns.feature, {x});
      if (keyRowsNeeded)
        store(x, packed.keyRows, {j, c});
      SmallVector<Value> at = panelIndex(j, c, headDim, blockKeys);
      store(arith::SelectOp::create(b, inRange, x, zero), packed.keysT, at);
      if (v)
        store(arith::SelectOp::create(b, inRange, load(v, {row, c}), zero), packed.valuesT, at);
      return {};
    });
    return {};
  });
  return packed;
}

void KernelCodegen::buildTiledForward(StringRef name, int64_t headDim) {
  Type indexType = b.getIndexType();
  const int64_t vectorsPerRow = headDim / lanes;
  // Rows per block: the W·V accumulators take at most 16 vector registers (of
  // 32 with AVX-512), the score tile 4 per row. The output rows live in an
  // L1 scratch between key blocks, which leaves room for 64-key score tiles.
  const int64_t rows = std::clamp<int64_t>(16 / vectorsPerRow, 1, 4);
  const int64_t scoreVectors = 4;
  const int64_t blockKeys = scoreVectors * lanes;

  Block *entry = privateFunction(name, forwardInputs(rowMajorType));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  auto args = entry->getArguments();
  Value q = args[0], k = args[1], v = args[2], o = args[3], rowMax = args[4],
        rowSum = args[5], params = args[6];
  rowInputs = args[7];
  prologue(q, k, params, args[10], args[11]);
  Value qBegin = arith::IndexCastOp::create(b, indexType, args[8]);
  Value qEnd = arith::IndexCastOp::create(b, indexType, args[9]);
  paramLanes = llvm::map_to_vector(paramValues, [&](Value p) { return splat(p); });
  Value zero = constant(0.0), zeroLanes = splatConstant(0.0), oneLanes = splatConstant(1.0);
  Value minusInf = constant(-std::numeric_limits<double>::infinity());
  Value minusInfLanes = splat(minusInf);

  // φ(k)ᵀ packed once per call, so a score tile row is `scoreVectors` contiguous
  // vector loads per d.
  Value keyLimit = arith::SelectOp::create(b, isCausal, arith::MinSIOp::create(b, kvEnd, qEnd), kvEnd);
  PackedKeys packed = packKeys(k, Value(), keyLimit, headDim, blockKeys);
  Value keysT = packed.keysT;
  // Per row block: scale·φ(q) rows and the block's weights, reused across keys.
  Value queryTile = memref::AllocaOp::create(b, MemRefType::get({rows, headDim}, type));
  Value weightTile = memref::AllocaOp::create(b, MemRefType::get({rows, blockKeys}, type));
  Value outputTile = memref::AllocaOp::create(b, MemRefType::get({rows, headDim}, type));

  Value rowStep = index(rows);
  loop(qBegin, qEnd, {}, [&](Value i0, ValueRange) -> SmallVector<Value> {
    // Rows past q_end repeat the last row (in bounds, never stored).
    Value lastRow = arith::SubIOp::create(b, qEnd, index(1));
    SmallVector<Value> rowIndex, rowKeyEnd;
    Value blockEnd = index(0);
    for (int64_t r = 0; r < rows; ++r) {
      Value i = arith::MinSIOp::create(b, arith::AddIOp::create(b, i0, index(r)), lastRow);
      rowIndex.push_back(i);
      rowKeyEnd.push_back(keyEnd(i));
      blockEnd = arith::MaxSIOp::create(b, blockEnd, rowKeyEnd.back());
      loop(index(0), index(headDim), {}, [&](Value c, ValueRange) -> SmallVector<Value> {
        Value x = load(q, {i, c});
        if (fns.feature)
          x = call(fns.feature, {x});
        store(mul(x, scale), queryTile, {index(r), c});
        return {};
      });
    }

    // Carried per row: running max, Σ h, unmasked-key count.
    SmallVector<Value> inits;
    for (int64_t r = 0; r < rows; ++r) {
      inits.append({online ? minusInf : zero, zero, zero});
      for (int64_t c = 0; c < vectorsPerRow; ++c)
        vector::StoreOp::create(b, zeroLanes, outputTile, ValueRange{index(r), index(c * lanes)});
    }
    ValueRange carried = loop(index(0), blockEnd, inits, [&](Value j0, ValueRange acc) -> SmallVector<Value> {
      // Score tile: rows × blockKeys, as rows × scoreVectors vectors.
      Value panel = arith::MulIOp::create(b, arith::DivUIOp::create(b, j0, index(blockKeys)), index(headDim));
      SmallVector<Value> tile = panelProduct(rows, scoreVectors, headDim, keysT, panel,
                                             [&](int64_t r, Value c) { return load(queryTile, {index(r), c}); });

      SmallVector<Value> next(acc.begin(), acc.end());
      SmallVector<Value> alphas;
      for (int64_t r = 0; r < rows; ++r) {
        Value m = acc[3 * r], l = acc[3 * r + 1], count = acc[3 * r + 2];
        SmallVector<Value> s, keepLanes;
        Value kept = zero;
        for (int64_t h = 0; h < scoreVectors; ++h) {
          KeyLanes keys = keyLanesAt(arith::AddIOp::create(b, j0, index(h * lanes)), rowKeyEnd[r], rowIndex[r]);
          Value raw = tile[r * scoreVectors + h];
          s.push_back(lanewise.score ? call(lanewise.score, scoreLaneArgs(raw, rowIndex[r], keys.jLanes)) : raw);
          keepLanes.push_back(keys.keep);
          kept = add(kept, lanewise.mask
                               ? sumLanes(arith::SelectOp::create(b, keys.keep, oneLanes, zeroLanes))
                               : arith::UIToFPOp::create(b, type, arith::IndexCastOp::create(b, b.getI64Type(), keys.valid)));
        }
        Value shift = zeroLanes, alpha;
        if (online) {
          Value stabLanes;
          for (int64_t h = 0; h < scoreVectors; ++h) {
            Value st = arith::SelectOp::create(b, keepLanes[h], call(lanewise.stabilizer, lanewiseArgs({s[h]})), minusInfLanes);
            stabLanes = stabLanes ? arith::MaximumFOp::create(b, stabLanes, st).getResult() : st;
          }
          Value blockMax = arith::MaximumFOp::create(
              b, m, vector::ReductionOp::create(b, vector::CombiningKind::MAXIMUMF, stabLanes));
          // e^(m - m_new), with 1 while every key so far is masked (m = m_new = -inf).
          Value stillEmpty = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, blockMax, minusInf);
          alpha = arith::SelectOp::create(b, stillEmpty, constant(1.0), math::ExpOp::create(b, sub(m, blockMax)));
          shift = splat(blockMax);
          next[3 * r] = blockMax;
        }
        Value hLanes = zeroLanes;
        for (int64_t h = 0; h < scoreVectors; ++h) {
          Value g = arith::SelectOp::create(b, keepLanes[h], call(lanewise.numerator, lanewiseArgs({s[h], shift})), zeroLanes);
          vector::StoreOp::create(b, g, weightTile, ValueRange{index(r), index(h * lanes)});
          if (lanewise.denominator)
            hLanes = add(hLanes, arith::SelectOp::create(b, keepLanes[h], call(lanewise.denominator, lanewiseArgs({s[h], shift})), zeroLanes));
        }
        Value hSum = lanewise.denominator ? sumLanes(hLanes) : zero;
        next[3 * r + 1] = add(online ? mul(l, alpha) : l, hSum);
        next[3 * r + 2] = add(count, kept);
        alphas.push_back(alpha);
      }

      // O = O·e^(m_old - m_new) + W·V over the block's keys that exist.
      Value keysHere = arith::MinSIOp::create(b, index(blockKeys), arith::SubIOp::create(b, blockEnd, j0));
      SmallVector<Value> outputs;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < vectorsPerRow; ++c) {
          Value current = vector::LoadOp::create(b, laneType, outputTile, ValueRange{index(r), index(c * lanes)});
          outputs.push_back(online ? mul(current, splat(alphas[r])) : current);
        }
      ValueRange updated = loop(index(0), keysHere, outputs, [&](Value jj, ValueRange out) -> SmallVector<Value> {
        Value j = arith::AddIOp::create(b, j0, jj);
        SmallVector<Value> valueLanes;
        for (int64_t c = 0; c < vectorsPerRow; ++c)
          valueLanes.push_back(vector::LoadOp::create(b, laneType, v, ValueRange{j, index(c * lanes)}));
        SmallVector<Value> result;
        for (int64_t r = 0; r < rows; ++r) {
          Value w = splat(load(weightTile, {index(r), jj}));
          for (int64_t c = 0; c < vectorsPerRow; ++c)
            result.push_back(vector::FMAOp::create(b, w, valueLanes[c], out[r * vectorsPerRow + c]));
        }
        return result;
      });
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < vectorsPerRow; ++c)
          vector::StoreOp::create(b, updated[r * vectorsPerRow + c], outputTile,
                                  ValueRange{index(r), index(c * lanes)});
      return next;
    }, index(blockKeys));

    for (int64_t r = 0; r < rows; ++r) {
      Value valid = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, arith::AddIOp::create(b, i0, index(r)), qEnd);
      auto ifValid = scf::IfOp::create(b, valid, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard rowGuard(b);
      b.setInsertionPoint(ifValid.thenBlock()->getTerminator());
      Value m = carried[3 * r], l = carried[3 * r + 1], count = carried[3 * r + 2];
      Value denominator = rowDenominator(m, l, count);
      Value anyKey = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, count, zero);
      Value inverse = arith::SelectOp::create(b, anyKey, div(constant(1.0), denominator), zero);
      Value inverseLanes = splat(inverse);
      for (int64_t c = 0; c < vectorsPerRow; ++c) {
        Value accumulated = vector::LoadOp::create(b, laneType, outputTile, ValueRange{index(r), index(c * lanes)});
        vector::StoreOp::create(b, mul(accumulated, inverseLanes), o, ValueRange{rowIndex[r], index(c * lanes)});
      }
      store(arith::SelectOp::create(b, anyKey, online ? m : zero, zero), rowMax, {rowIndex[r]});
      store(arith::SelectOp::create(b, anyKey, denominator, zero), rowSum, {rowIndex[r]});
    }
    return {};
  }, rowStep);
  freePacked(packed, k);
  func::ReturnOp::create(b);
}

void KernelCodegen::buildTiledBackward(StringRef name, int64_t headDim) {
  Type indexType = b.getIndexType();
  const int64_t vectorsPerRow = headDim / lanes;
  const int64_t rows = std::clamp<int64_t>(16 / vectorsPerRow, 1, 4);
  const int64_t scoreVectors = 2;
  const int64_t blockKeys = scoreVectors * lanes;

  Block *entry = privateFunction(name, backwardInputs(rowMajorType));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  auto args = entry->getArguments();
  Value q = args[0], k = args[1], v = args[2], o = args[3], dOut = args[4], rowMax = args[5],
        rowSum = args[6], params = args[7], dq = args[9], dk = args[10], dv = args[11],
        dParams = args[12];
  rowInputs = args[8];
  dRowInputs = args[13];
  prologue(q, k, params, args[14], args[15]);
  zeroRowInputGrads(dim(q, 0));
  const unsigned numParams = paramValues.size();
  unsigned numNormalizerParams = normalizer.getNumParams();
  paramLanes = llvm::map_to_vector(paramValues, [&](Value p) { return splat(p); });
  Value zero = constant(0.0), zeroLanes = splatConstant(0.0);
  Value queries = dim(q, 0), keys = dim(k, 0);

  // dK and dV accumulate across row blocks; dQ rows are written once each.
  loop(index(0), keys, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
    for (int64_t c = 0; c < vectorsPerRow; ++c) {
      vector::StoreOp::create(b, zeroLanes, dk, ValueRange{j, index(c * lanes)});
      vector::StoreOp::create(b, zeroLanes, dv, ValueRange{j, index(c * lanes)});
    }
    return {};
  });
  // Packed operands: φ(k)ᵀ and vᵀ panels for the score and dP tiles, φ(k) rows
  // for dQ when there is a feature map.
  Value keyLimit = arith::SelectOp::create(b, isCausal, arith::MinSIOp::create(b, kvEnd, queries), kvEnd);
  PackedKeys packed = packKeys(k, v, keyLimit, headDim, blockKeys);
  Value keysT = packed.keysT, valuesT = packed.valuesT, keyRows = packed.keyRows;
  Value queryTile = memref::AllocaOp::create(b, MemRefType::get({rows, headDim}, type));
  Value weightTile = memref::AllocaOp::create(b, MemRefType::get({rows, blockKeys}, type));
  Value scoreGradTile = memref::AllocaOp::create(b, MemRefType::get({rows, blockKeys}, type));
  Value paramGrads = memref::AllocaOp::create(b, MemRefType::get({std::max<int64_t>(numParams, 1), lanes}, type));
  for (unsigned p = 0; p < numParams; ++p)
    vector::StoreOp::create(b, zeroLanes, paramGrads, ValueRange{index(p), index(0)});
  auto addParamGrad = [&](unsigned p, Value lanesValue) {
    Value current = vector::LoadOp::create(b, laneType, paramGrads, ValueRange{index(p), index(0)});
    vector::StoreOp::create(b, arith::AddFOp::create(b, current, lanesValue), paramGrads,
                            ValueRange{index(p), index(0)});
  };

  loop(index(0), queries, {}, [&](Value i0, ValueRange) -> SmallVector<Value> {
    Value lastRow = arith::SubIOp::create(b, queries, index(1));
    SmallVector<Value> rowIndex, rowKeyEnd, rowLive, rowShift, rowInverse, rowD;
    Value blockEnd = index(0);
    for (int64_t r = 0; r < rows; ++r) {
      Value unclamped = arith::AddIOp::create(b, i0, index(r));
      Value i = arith::MinSIOp::create(b, unclamped, lastRow);
      rowIndex.push_back(i);
      rowKeyEnd.push_back(keyEnd(i));
      blockEnd = arith::MaxSIOp::create(b, blockEnd, rowKeyEnd.back());
      // Rows past the end repeat the last one and must contribute nothing; so do
      // fully masked rows (C = 0).
      Value c = load(rowSum, {i});
      Value live = arith::AndIOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::slt, unclamped, queries),
          arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, c, zero));
      rowLive.push_back(splat(live));
      rowShift.push_back(splat(load(rowMax, {i})));
      rowInverse.push_back(splat(arith::SelectOp::create(b, live, div(constant(1.0), c), zero)));
      Value dotLanes = zeroLanes;
      for (int64_t col = 0; col < vectorsPerRow; ++col)
        dotLanes = vector::FMAOp::create(
            b, vector::LoadOp::create(b, laneType, dOut, ValueRange{i, index(col * lanes)}),
            vector::LoadOp::create(b, laneType, o, ValueRange{i, index(col * lanes)}), dotLanes);
      rowD.push_back(splat(sumLanes(dotLanes)));
      loop(index(0), index(headDim), {}, [&](Value col, ValueRange) -> SmallVector<Value> {
        Value x = load(q, {i, col});
        if (fns.feature)
          x = call(fns.feature, {x});
        store(mul(x, scale), queryTile, {index(r), col});
        return {};
      });
    }

    SmallVector<Value> dqInit(rows * vectorsPerRow, zeroLanes);
    ValueRange dqAcc = loop(index(0), blockEnd, dqInit, [&](Value j0, ValueRange dqIn) -> SmallVector<Value> {
      // Tiles rows × blockKeys: scores from scale·φ(q)·φ(k)ᵀ, dP from dO·vᵀ.
      Value panel = arith::MulIOp::create(b, arith::DivUIOp::create(b, j0, index(blockKeys)), index(headDim));
      SmallVector<Value> rawTile = panelProduct(rows, scoreVectors, headDim, keysT, panel,
                                                [&](int64_t r, Value c) { return load(queryTile, {index(r), c}); });
      SmallVector<Value> dPTile = panelProduct(rows, scoreVectors, headDim, valuesT, panel,
                                               [&](int64_t r, Value c) { return load(dOut, {rowIndex[r], c}); });

      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t h = 0; h < scoreVectors; ++h) {
          KeyLanes keys = keyLanesAt(arith::AddIOp::create(b, j0, index(h * lanes)), rowKeyEnd[r], rowIndex[r]);
          Value keep = arith::AndIOp::create(b, rowLive[r], keys.keep);
          Value raw = rawTile[r * scoreVectors + h], dP = dPTile[r * scoreVectors + h];
          SmallVector<Value> modArgs = scoreLaneArgs(raw, rowIndex[r], keys.jLanes);
          Value s = lanewise.score ? call(lanewise.score, modArgs) : raw;
          SmallVector<Value> normalizerArgs = lanewiseArgs({s, rowShift[r]});
          auto masked = [&](Value x) { return arith::SelectOp::create(b, keep, x, zeroLanes); };
          // (g'·dP - h'·D)/C, the h' term for summed denominators only.
          auto weighted = [&](func::FuncOp gPrime, func::FuncOp hPrime) {
            Value term = mul(call(gPrime, normalizerArgs), dP);
            if (hPrime)
              term = sub(term, mul(call(hPrime, normalizerArgs), rowD[r]));
            return masked(mul(term, rowInverse[r]));
          };
          Value w = masked(mul(call(lanewise.numerator, normalizerArgs), rowInverse[r]));
          Value ds = weighted(lanewise.numeratorDs, lanewise.denominatorDs);
          for (unsigned p = 0; p < numNormalizerParams; ++p)
            addParamGrad(p, weighted(lanewise.numeratorDp[p], lanewise.denominatorDp[p]));
          for (auto [p, scoreDp] : llvm::enumerate(lanewise.scoreDp))
            addParamGrad(numNormalizerParams + p, masked(mul(ds, call(scoreDp, modArgs))));
          for (auto [x, scoreDr] : llvm::enumerate(lanewise.scoreDr)) {
            Value grad = sumLanes(masked(mul(ds, call(scoreDr, modArgs))));
            SmallVector<Value> at{index(x), rowIndex[r]};
            store(add(load(dRowInputs, at), grad), dRowInputs, at);
          }
          Value dRaw = lanewise.scoreDs ? masked(mul(ds, call(lanewise.scoreDs, modArgs))) : ds;
          vector::StoreOp::create(b, w, weightTile, ValueRange{index(r), index(h * lanes)});
          vector::StoreOp::create(b, dRaw, scoreGradTile, ValueRange{index(r), index(h * lanes)});
        }
      }

      // Per key: dQ_r += dRaw_rj·φ(k_j) (registers), dK_j += Σ_r dRaw_rj·scale·φ(q_r),
      // dV_j += Σ_r w_rj·dO_r (memory).
      Value keysHere = arith::MinSIOp::create(b, index(blockKeys), arith::SubIOp::create(b, blockEnd, j0));
      return llvm::to_vector(loop(index(0), keysHere, dqIn, [&](Value jj, ValueRange dqNow) -> SmallVector<Value> {
        Value j = arith::AddIOp::create(b, j0, jj);
        SmallVector<Value> keyLanes, dkLanes, dvLanes;
        for (int64_t c = 0; c < vectorsPerRow; ++c) {
          keyLanes.push_back(vector::LoadOp::create(b, laneType, keyRows, ValueRange{j, index(c * lanes)}));
          dkLanes.push_back(vector::LoadOp::create(b, laneType, dk, ValueRange{j, index(c * lanes)}));
          dvLanes.push_back(vector::LoadOp::create(b, laneType, dv, ValueRange{j, index(c * lanes)}));
        }
        SmallVector<Value> dqNext;
        for (int64_t r = 0; r < rows; ++r) {
          Value gradLane = splat(load(scoreGradTile, {index(r), jj}));
          Value weightLane = splat(load(weightTile, {index(r), jj}));
          for (int64_t c = 0; c < vectorsPerRow; ++c) {
            dqNext.push_back(vector::FMAOp::create(b, gradLane, keyLanes[c], dqNow[r * vectorsPerRow + c]));
            Value qLanes = vector::LoadOp::create(b, laneType, queryTile, ValueRange{index(r), index(c * lanes)});
            dkLanes[c] = vector::FMAOp::create(b, gradLane, qLanes, dkLanes[c]);
            Value dOutLanes = vector::LoadOp::create(b, laneType, dOut, ValueRange{rowIndex[r], index(c * lanes)});
            dvLanes[c] = vector::FMAOp::create(b, weightLane, dOutLanes, dvLanes[c]);
          }
        }
        for (int64_t c = 0; c < vectorsPerRow; ++c) {
          vector::StoreOp::create(b, dkLanes[c], dk, ValueRange{j, index(c * lanes)});
          vector::StoreOp::create(b, dvLanes[c], dv, ValueRange{j, index(c * lanes)});
        }
        return dqNext;
      }));
    }, index(blockKeys));

    // dQ = scale·Σ_j dRaw·φ(k_j), times φ'(q) with a feature map.
    Value scaleLanes = splat(scale);
    for (int64_t r = 0; r < rows; ++r) {
      Value valid = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, arith::AddIOp::create(b, i0, index(r)), queries);
      auto ifValid = scf::IfOp::create(b, valid, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard rowGuard(b);
      b.setInsertionPoint(ifValid.thenBlock()->getTerminator());
      for (int64_t c = 0; c < vectorsPerRow; ++c) {
        Value grad = mul(dqAcc[r * vectorsPerRow + c], scaleLanes);
        if (lanewise.featureDx)
          grad = mul(grad, call(lanewise.featureDx, {vector::LoadOp::create(b, laneType, q, ValueRange{rowIndex[r], index(c * lanes)})}));
        vector::StoreOp::create(b, grad, dq, ValueRange{rowIndex[r], index(c * lanes)});
      }
    }
    return {};
  }, index(rows));

  // With a feature map dK holds d/dφ(k); chain through φ'(k).
  if (lanewise.featureDx)
    loop(index(0), keys, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
      for (int64_t c = 0; c < vectorsPerRow; ++c) {
        Value kLanes = vector::LoadOp::create(b, laneType, k, ValueRange{j, index(c * lanes)});
        Value dkLanes = vector::LoadOp::create(b, laneType, dk, ValueRange{j, index(c * lanes)});
        vector::StoreOp::create(b, mul(dkLanes, call(lanewise.featureDx, {kLanes})), dk, ValueRange{j, index(c * lanes)});
      }
      return {};
    });
  for (unsigned p = 0; p < numParams; ++p) {
    Value lanesValue = vector::LoadOp::create(b, laneType, paramGrads, ValueRange{index(p), index(0)});
    store(sumLanes(lanesValue), dParams, {index(p)});
  }
  freePacked(packed, k);
  func::ReturnOp::create(b);
}

void KernelCodegen::buildBackward(StringRef name) {
  Block *entry = privateFunction(name, backwardInputs(matrixType));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  auto args = entry->getArguments();
  Value q = args[0], k = args[1], v = args[2], o = args[3], dOut = args[4], rowMax = args[5],
        rowSum = args[6], params = args[7], dq = args[9], dk = args[10], dv = args[11],
        dParams = args[12];
  rowInputs = args[8];
  dRowInputs = args[13];
  prologue(q, k, params, args[14], args[15]);
  zeroRowInputGrads(dim(q, 0));
  Value valueDim = dim(v, 1);
  Value queries = dim(q, 0);
  Value zero = constant(0.0);
  unsigned numNormalizerParams = normalizer.getNumParams();

  auto zeroMatrix = [&](Value m, Value cols) {
    loop(index(0), dim(m, 0), {}, [&](Value r, ValueRange) -> SmallVector<Value> {
      loop(index(0), cols, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
        store(zero, m, {r, c});
        return {};
      });
      return {};
    });
  };
  zeroMatrix(dq, headDim);
  zeroMatrix(dk, headDim);
  zeroMatrix(dv, valueDim);
  for (unsigned p = 0; p < paramValues.size(); ++p)
    store(zero, dParams, {index(p)});
  auto accumulate = [&](Value memref, ValueRange indices, Value delta) {
    store(add(load(memref, indices), delta), memref, indices);
  };

  loop(index(0), queries, {}, [&](Value i, ValueRange) -> SmallVector<Value> {
    Value c = load(rowSum, {i});
    Value live = arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, c, zero);
    auto ifLive = scf::IfOp::create(b, live, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard rowGuard(b);
    b.setInsertionPoint(ifLive.thenBlock()->getTerminator());
    Value m = load(rowMax, {i});
    Value inverseC = div(constant(1.0), c);
    Value rowD = loop(index(0), valueDim, {zero}, [&](Value col, ValueRange acc) -> SmallVector<Value> {
                   return {add(acc[0], mul(load(dOut, {i, col}), load(o, {i, col})))};
                 })[0];
    loop(index(0), keyEnd(i), {}, [&](Value j, ValueRange) -> SmallVector<Value> {
      auto ifKeep = scf::IfOp::create(b, keep(i, j), /*withElseRegion=*/false);
      OpBuilder::InsertionGuard pairGuard(b);
      b.setInsertionPoint(ifKeep.thenBlock()->getTerminator());
      Value raw = contract(q, k, i, j);
      Value s = modScore(raw, i, j);
      SmallVector<Value> normalizerArgs = withParams({s, m});
      Value w = mul(call(fns.numerator, normalizerArgs), inverseC);
      Value dOutV = loop(index(0), valueDim, {zero}, [&](Value col, ValueRange acc) -> SmallVector<Value> {
                      return {add(acc[0], mul(load(dOut, {i, col}), load(v, {j, col})))};
                    })[0];
      axpyRow(dv, j, w, dOut, i, valueDim);

      // ds = (g'·(dO·v) - h'·D)/C; the h' term exists only for summed denominators.
      auto weighted = [&](func::FuncOp gPrime, func::FuncOp hPrime) {
        Value term = mul(call(gPrime, normalizerArgs), dOutV);
        if (hPrime)
          term = sub(term, mul(call(hPrime, normalizerArgs), rowD));
        return mul(term, inverseC);
      };
      Value ds = weighted(fns.numeratorDs, fns.denominatorDs);
      for (unsigned p = 0; p < numNormalizerParams; ++p)
        accumulate(dParams, {index(p)}, weighted(fns.numeratorDp[p], fns.denominatorDp[p]));
      SmallVector<Value> modArgs = scoreArgs(raw, i, j);
      for (auto [p, scoreDp] : llvm::enumerate(fns.scoreDp))
        accumulate(dParams, {index(numNormalizerParams + p)}, mul(ds, call(scoreDp, modArgs)));
      for (auto [x, scoreDr] : llvm::enumerate(fns.scoreDr))
        accumulate(dRowInputs, {index(x), i}, mul(ds, call(scoreDr, modArgs)));
      Value dRaw = fns.scoreDs ? mul(ds, call(fns.scoreDs, modArgs)) : ds;

      // raw = scale · Σ_c φ(q_ic)·φ(k_jc), or additive Σ_c v_c·tanh(q_ic + k_jc)
      Value dDot = mul(dRaw, scale);
      loop(index(0), headDim, {}, [&](Value col, ValueRange) -> SmallVector<Value> {
        Value x = load(q, {i, col}), y = load(k, {j, col});
        if (score && score.getContract() == ContractKind::Additive) {
          Value t = math::TanhOp::create(b, add(x, y));
          Value vIndex = arith::AddIOp::create(b, col, index(kernelWeights(kernel)[2].offset));
          accumulate(dParams, {vIndex}, mul(dRaw, t));
          Value dPre = mul(mul(dRaw, load(params, {vIndex})), sub(constant(1.0), mul(t, t)));
          accumulate(dq, {i, col}, dPre);
          accumulate(dk, {j, col}, dPre);
          return {};
        }
        if (!fns.feature) {
          accumulate(dq, {i, col}, mul(dDot, y));
          accumulate(dk, {j, col}, mul(dDot, x));
          return {};
        }
        Value fx = call(fns.feature, {x}), fy = call(fns.feature, {y});
        accumulate(dq, {i, col}, mul(mul(dDot, fy), call(fns.featureDx, {x})));
        accumulate(dk, {j, col}, mul(mul(dDot, fx), call(fns.featureDx, {y})));
        return {};
      });
      return {};
    });
    return {};
  });
  func::ReturnOp::create(b);
}

void emitManifest(ImplicitLocOpBuilder &b, StringRef text) {
  MLIRContext *ctx = b.getContext();
  std::string data = text.str();
  data.push_back('\0');
  auto arrayType = LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), data.size());
  auto global = LLVM::GlobalOp::create(b, arrayType, /*isConstant=*/true,
                                       LLVM::Linkage::Internal, "attn_manifest_text",
                                       b.getStringAttr(data));
  auto ptrType = LLVM::LLVMPointerType::get(ctx);
  auto function = LLVM::LLVMFuncOp::create(b, ATTN_MANIFEST_SYMBOL,
                                           LLVM::LLVMFunctionType::get(ptrType, {}));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(function.addEntryBlock(b));
  Value address = LLVM::AddressOfOp::create(b, global);
  LLVM::ReturnOp::create(b, address);
}

} // namespace

std::string mlir::attn::buildManifest(KernelOp kernel, ArrayRef<FloatType> elementTypes) {
  NormalizerOp normalizer = kernel.getNormalizerOp();
  FailureOr<Algorithm> algorithm = kernelAlgorithm(kernel);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "attn-abi " << ATTN_ABI_VERSION << "\n";
  os << "kernel " << kernel.getSymName() << "\n";
  os << "normalizer " << normalizer.getSymName() << "\n";
  os << "algorithm "
     << (succeeded(algorithm) ? stringifyAlgorithm(*algorithm) : StringRef("invalid")) << "\n";
  os << "denominator " << stringifyDenominatorKind(normalizer.getDenominatorKind()) << "\n";
  os << "mask " << (kernel.getMask() ? *kernel.getMask() : StringRef("none")) << "\n";
  os << "params";
  for (auto [name, init] : llvm::zip(kernelParamNames(kernel), kernelParamInits(kernel)))
    os << " " << name << "=" << llvm::format("%.17g", init);
  for (const KernelWeight &weight : kernelWeights(kernel)) {
    os << " " << weight.name << "[";
    llvm::interleave(weight.shape, os, "x");
    os << "]=";
    if (auto fill = dyn_cast<FloatAttr>(weight.init))
      os << llvm::format("%.17g", fill.getValueAsDouble());
    else
      os << cast<StringAttr>(weight.init).getValue();
  }
  os << "\n";
  if (ScoreOp score = kernel.getScoreOp(); score && score.getRequiredHeadDim())
    os << "head-dim " << score.getRequiredHeadDim() << "\n";
  if (ScoreOp score = kernel.getScoreOp(); score && score.getNumRowInputs()) {
    os << "row-inputs";
    for (Attribute name : score.getRowInputNamesAttr())
      os << " " << cast<StringAttr>(name).getValue();
    os << "\n";
  }
  // The contraction: kind, its constant c (or 1/sqrt(d)) and "feature" with a feature
  // map; where the score is c·q·k, a runtime can rescale q for another scale.
  ScoreOp score = kernel.getScoreOp();
  os << "contract " << (score ? stringifyContractKind(score.getContract()) : "scaled_dot") << " ";
  if (std::optional<double> fixed = fixedScoreScale(kernel))
    os << llvm::format("%.17g", *fixed);
  else
    os << "1/sqrt(d)";
  os << (score && score.hasFeatureMap() ? " feature\n" : "\n");
  os << "dtypes";
  for (FloatType type : elementTypes)
    os << " " << typeSuffix(type);
  os << "\n";
  std::string cuda = cudaManifestLines(kernel->getParentOfType<ModuleOp>());
  os << (cuda.empty() ? "devices cpu\n" : "devices cpu cuda\n") << cuda;
  return text;
}

LogicalResult mlir::attn::lowerKernelToLoops(KernelOp kernel, ArrayRef<FloatType> elementTypes,
                                             int64_t vectorBits) {
  ModuleOp module = kernel->getParentOfType<ModuleOp>();
  ImplicitLocOpBuilder b(kernel.getLoc(), module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  for (FloatType type : elementTypes) {
    KernelCodegen codegen(kernel, type, vectorBits, b);
    if (failed(codegen.instantiateFunctions()))
      return failure();
    b.setInsertionPointToEnd(module.getBody());
    codegen.buildForwardEntry();
    codegen.buildBackwardEntry();
  }
  emitManifest(b, buildManifest(kernel, elementTypes));
  return success();
}
