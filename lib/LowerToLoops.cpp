//===- LowerToLoops.cpp - CPU forward/backward entry points ---------------===//
//
// One call handles one (batch, head) slice. Forward walks query rows i in
// [q_begin, q_end) and keys j once, accumulating Σ g·v and Σ h (online: rescaled
// by e^(m_old - m_new) whenever the running maximum m grows). Backward recomputes
// s_ij from q, k and the saved row statistics, so nothing N×N is ever stored:
//   w = g/C, ds = (g'(s)·(dO_i·v_j) - h'(s)·D_i)/C, D_i = dO_i·O_i,
//   dθ += (∂g/∂θ·(dO_i·v_j) - ∂h/∂θ·D_i)/C + ds·∂mod/∂θ.
//
//===----------------------------------------------------------------------===//
#include "lib/LowerToLoops.h"

#include "lib/KernelFunctions.h"
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

std::string typeSuffix(FloatType type) { return type.isF64() ? "f64" : "f32"; }

/// The scalar functions of one kernel, instantiated for one element type.
struct ScalarFunctions {
  func::FuncOp numerator, denominator, stabilizer, score, feature, mask;
  func::FuncOp numeratorDs, denominatorDs, scoreDs, featureDx;
  SmallVector<func::FuncOp> numeratorDp, denominatorDp; // per normalizer param
  SmallVector<func::FuncOp> scoreDp;                     // per score param
};

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
  /// The public entry point: dispatches to a tiled specialisation or the generic loops.
  void buildForwardDispatch();
  void buildForward(StringRef name);
  /// Register-blocked, vectorised forward for head dim `headDim` == value dim.
  void buildTiledForward(StringRef name, int64_t headDim);
  void buildBackward();

private:
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

  KernelOp kernel;
  NormalizerOp normalizer;
  ScoreOp score;
  FloatType type;
  ImplicitLocOpBuilder &b;
  int64_t lanes; // vector lanes of `type`
  MemRefType matrixType, rowMajorType, vectorType;
  VectorType laneType;
  ScalarFunctions fns;
  ScalarFunctions lanewise; // num, den, stab, score, mask on vector<lanes x _>
  bool online = false;

  // Values of the function being built.
  SmallVector<Value> paramValues;
  Value scale, headDim, kvEnd, isCausal;
};

ValueRange KernelCodegen::loop(Value lb, Value ub, ValueRange inits,
                               function_ref<SmallVector<Value>(Value, ValueRange)> body,
                               Value step) {
  auto forOp = scf::ForOp::create(b, lb, ub, step ? step : index(1), inits,
                                  [&](OpBuilder &nested, Location, Value iv, ValueRange args) {
                                    OpBuilder::InsertionGuard guard(b);
                                    b.setInsertionPoint(nested.getInsertionBlock(),
                                                        nested.getInsertionPoint());
                                    scf::YieldOp::create(b, body(iv, args));
                                  });
  return forOp.getResults();
}

ValueRange KernelCodegen::branch(Value cond, TypeRange types,
                                 function_ref<SmallVector<Value>()> thenBody,
                                 function_ref<SmallVector<Value>()> elseBody) {
  auto ifOp = scf::IfOp::create(b, types, cond, /*addThenBlock=*/true, /*addElseBlock=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(ifOp.thenBlock());
  scf::YieldOp::create(b, thenBody());
  b.setInsertionPointToEnd(ifOp.elseBlock());
  scf::YieldOp::create(b, elseBody());
  return ifOp.getResults();
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
  KernelFunctionNames names(kernel);
  bool retype = type != normalizer.getScalarType();
  auto get = [&](const std::string &name) -> FailureOr<func::FuncOp> {
    auto function = module.lookupSymbol<func::FuncOp>(name);
    if (!function)
      return func::FuncOp();
    if (!retype)
      return function;
    std::string retypedName = name + "." + typeSuffix(type);
    if (auto existing = module.lookupSymbol<func::FuncOp>(retypedName))
      return existing;
    return cloneRetyped(function, type, /*vectorWidth=*/0, retypedName);
  };
  auto require = [&](func::FuncOp &slot, const std::string &name) -> LogicalResult {
    FailureOr<func::FuncOp> function = get(name);
    if (failed(function))
      return failure();
    slot = *function;
    return success();
  };

  if (!module.lookupSymbol<func::FuncOp>(names.numerator()))
    return kernel.emitOpError("has no outlined functions; run attn-derive-backward first");
  SmallVector<StringRef> params = kernelParamNames(kernel);
  unsigned numNormalizerParams = normalizer.getNumParams();
  auto derivative = [](const std::string &f, StringRef arg) {
    return KernelFunctionNames::derivative(f, arg);
  };
  if (failed(require(fns.numerator, names.numerator())) ||
      failed(require(fns.denominator, names.denominator())) ||
      failed(require(fns.stabilizer, names.stabilizer())) ||
      failed(require(fns.score, names.score())) ||
      failed(require(fns.feature, names.feature())) ||
      failed(require(fns.mask, names.mask())) ||
      failed(require(fns.numeratorDs, derivative(names.numerator(), "s"))) ||
      failed(require(fns.denominatorDs, derivative(names.denominator(), "s"))) ||
      failed(require(fns.scoreDs, derivative(names.score(), "s"))) ||
      failed(require(fns.featureDx, derivative(names.feature(), "x"))))
    return failure();
  for (unsigned k = 0; k < params.size(); ++k) {
    func::FuncOp num, den, sc;
    if (k < numNormalizerParams) {
      if (failed(require(num, derivative(names.numerator(), params[k]))) ||
          failed(require(den, derivative(names.denominator(), params[k]))))
        return failure();
      fns.numeratorDp.push_back(num);
      fns.denominatorDp.push_back(den);
    } else {
      if (failed(require(sc, derivative(names.score(), params[k]))))
        return failure();
      fns.scoreDp.push_back(sc);
    }
  }
  online = static_cast<bool>(fns.stabilizer);

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
  if (failed(lanewiseCopy(fns.numerator, lanewise.numerator)) ||
      failed(lanewiseCopy(fns.denominator, lanewise.denominator)) ||
      failed(lanewiseCopy(fns.stabilizer, lanewise.stabilizer)) ||
      failed(lanewiseCopy(fns.score, lanewise.score)) ||
      failed(lanewiseCopy(fns.mask, lanewise.mask)))
    return failure();
  return success();
}

void KernelCodegen::prologue(Value q, Value k, Value params, Value kvLen, Value causal) {
  paramValues.clear();
  for (unsigned p = 0, e = kernelParamNames(kernel).size(); p < e; ++p)
    paramValues.push_back(load(params, {index(p)}));
  headDim = dim(q, 1);
  if (score && score.getContract() == ContractKind::Dot)
    scale = constant(1.0);
  else if (score && score.getScale())
    scale = constant(score.getScale()->convertToDouble());
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
  switch (normalizer.getDenominatorKind()) {
  case DenominatorKind::Sum:
    if (auto eps = normalizer.getEpsilon()) {
      Value epsilon = constant(eps->convertToDouble());
      if (online) // C·e^-m = Σ h·e^-m + ε·e^-m
        epsilon = mul(epsilon, math::ExpOp::create(b, arith::NegFOp::create(b, m)));
      return add(sum, epsilon);
    }
    return sum;
  case DenominatorKind::Constant:
    return constant(normalizer.getDenominatorConstant()->convertToDouble());
  case DenominatorKind::Count:
    return count;
  }
  llvm_unreachable("unknown denominator kind");
}

Value KernelCodegen::contract(Value q, Value k, Value i, Value j) {
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
  return call(fns.score, withParams({raw, i, j}));
}

void KernelCodegen::buildForward(StringRef name) {
  MLIRContext *ctx = kernel.getContext();
  Type i64 = b.getI64Type();
  SmallVector<Type> inputs{matrixType, matrixType, matrixType, matrixType,
                           vectorType, vectorType, vectorType, i64, i64, i64, i64};
  auto function = func::FuncOp::create(b, name, FunctionType::get(ctx, inputs, {}));
  function.setPrivate();
  Block *entry = function.addEntryBlock();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  auto args = entry->getArguments();
  Value q = args[0], k = args[1], v = args[2], o = args[3], rowMax = args[4],
        rowSum = args[5], params = args[6];
  prologue(q, k, params, args[9], args[10]);
  Value qBegin = arith::IndexCastOp::create(b, b.getIndexType(), args[7]);
  Value qEnd = arith::IndexCastOp::create(b, b.getIndexType(), args[8]);
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

void KernelCodegen::buildForwardDispatch() {
  MLIRContext *ctx = kernel.getContext();
  std::string entryName = "attn_forward_" + typeSuffix(type);
  std::string genericName = entryName + ".generic";
  buildForward(genericName);
  SmallVector<std::pair<int64_t, std::string>> tiled;
  for (int64_t headDim : kTiledHeadDims) {
    if (headDim % lanes != 0)
      continue;
    tiled.push_back({headDim, entryName + ".d" + std::to_string(headDim)});
    buildTiledForward(tiled.back().second, headDim);
  }

  Type i64 = b.getI64Type();
  SmallVector<Type> inputs{matrixType, matrixType, matrixType, matrixType,
                           vectorType, vectorType, vectorType, i64, i64, i64, i64};
  auto function = func::FuncOp::create(b, entryName, FunctionType::get(ctx, inputs, {}));
  function->setAttr("llvm.emit_c_interface", UnitAttr::get(ctx));
  Block *entry = function.addEntryBlock();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  auto args = entry->getArguments();
  Value q = args[0], k = args[1], v = args[2], o = args[3];
  Value headDim = dim(q, 1), valueDim = dim(v, 1);
  Value one = index(1);
  Value rowsContiguous = arith::AndIOp::create(
      b, arith::AndIOp::create(b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, innerStride(q), one),
                               arith::CmpIOp::create(b, arith::CmpIPredicate::eq, innerStride(k), one)),
      arith::AndIOp::create(b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, innerStride(v), one),
                            arith::CmpIOp::create(b, arith::CmpIPredicate::eq, innerStride(o), one)));
  Value square = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, headDim, valueDim);
  Value eligible = arith::AndIOp::create(b, rowsContiguous, square);

  // if (eligible && d == 32) tiled32 else if (...) ... else generic
  std::function<void(unsigned)> emitCase = [&](unsigned index_) {
    if (index_ == tiled.size()) {
      func::CallOp::create(b, genericName, TypeRange{}, args);
      return;
    }
    Value matches = arith::AndIOp::create(
        b, eligible,
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, headDim, index(tiled[index_].first)));
    auto ifOp = scf::IfOp::create(b, matches, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard caseGuard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    SmallVector<Value> operands(args);
    for (unsigned m = 0; m < 4; ++m)
      operands[m] = asRowMajor(args[m]);
    func::CallOp::create(b, tiled[index_].second, TypeRange{}, operands);
    b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    emitCase(index_ + 1);
  };
  emitCase(0);
  func::ReturnOp::create(b);
}

void KernelCodegen::buildTiledForward(StringRef name, int64_t headDim) {
  MLIRContext *ctx = kernel.getContext();
  Type i64 = b.getI64Type();
  Type indexType = b.getIndexType();
  const int64_t vectorsPerRow = headDim / lanes;
  // Rows per register block: the output accumulators take at most 16 vector
  // registers (of 32 with AVX-512), the score tile 2 per row.
  const int64_t rows = std::clamp<int64_t>(16 / vectorsPerRow, 1, 4);
  const int64_t scoreVectors = 2;
  const int64_t blockKeys = scoreVectors * lanes;

  SmallVector<Type> inputs{rowMajorType, rowMajorType, rowMajorType, rowMajorType,
                           vectorType,   vectorType,   vectorType,   i64, i64, i64, i64};
  auto function = func::FuncOp::create(b, name, FunctionType::get(ctx, inputs, {}));
  function.setPrivate();
  Block *entry = function.addEntryBlock();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  auto args = entry->getArguments();
  Value q = args[0], k = args[1], v = args[2], o = args[3], rowMax = args[4],
        rowSum = args[5], params = args[6];
  prologue(q, k, params, args[9], args[10]);
  Value qBegin = arith::IndexCastOp::create(b, indexType, args[7]);
  Value qEnd = arith::IndexCastOp::create(b, indexType, args[8]);
  SmallVector<Value> paramLanes = llvm::map_to_vector(paramValues, [&](Value p) { return splat(p); });
  auto lanewiseArgs = [&](ValueRange leading) {
    SmallVector<Value> all(leading);
    all.append(paramLanes);
    return all;
  };
  Value zero = constant(0.0), zeroLanes = splatConstant(0.0), oneLanes = splatConstant(1.0);
  Value minusInf = constant(-std::numeric_limits<double>::infinity());
  Value minusInfLanes = splat(minusInf);
  Value laneOffsets = vector::StepOp::create(b, VectorType::get({lanes}, indexType));

  // φ(k)ᵀ packed once per call: [d][keys rounded up to a block], zero padded, so
  // a score tile row is `scoreVectors` contiguous vector loads per d.
  Value keyLimit = arith::SelectOp::create(b, isCausal, arith::MinSIOp::create(b, kvEnd, qEnd), kvEnd);
  Value blocks = arith::CeilDivSIOp::create(b, keyLimit, index(blockKeys));
  Value paddedKeys = arith::MulIOp::create(b, blocks, index(blockKeys));
  int64_t dyn = ShapedType::kDynamic;
  Value keysT = memref::AllocOp::create(b, MemRefType::get({headDim, dyn}, type), ValueRange{paddedKeys},
                                        b.getI64IntegerAttr(64));
  loop(index(0), paddedKeys, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
    Value inRange = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, j, keyLimit);
    Value row = arith::SelectOp::create(b, inRange, j, index(0));
    loop(index(0), index(headDim), {}, [&](Value c, ValueRange) -> SmallVector<Value> {
      Value x = load(k, {row, c});
      if (fns.feature)
        x = call(fns.feature, {x});
      store(arith::SelectOp::create(b, inRange, x, zero), keysT, {c, j});
      return {};
    });
    return {};
  });
  // Per row block: scale·φ(q) rows and the block's weights, reused across keys.
  Value queryTile = memref::AllocaOp::create(b, MemRefType::get({rows, headDim}, type));
  Value weightTile = memref::AllocaOp::create(b, MemRefType::get({rows, blockKeys}, type));

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

    // Carried per row: running max, Σ h, unmasked-key count, output accumulators.
    SmallVector<Value> inits;
    for (int64_t r = 0; r < rows; ++r)
      inits.append({online ? minusInf : zero, zero, zero});
    for (int64_t r = 0; r < rows * vectorsPerRow; ++r)
      inits.push_back(zeroLanes);
    ValueRange carried = loop(index(0), blockEnd, inits, [&](Value j0, ValueRange acc) -> SmallVector<Value> {
      // Score tile: rows × blockKeys, as rows × scoreVectors vectors.
      SmallVector<Value> tileInit(rows * scoreVectors, zeroLanes);
      ValueRange tile = loop(index(0), index(headDim), tileInit, [&](Value c, ValueRange t) -> SmallVector<Value> {
        SmallVector<Value> keyLanes;
        for (int64_t h = 0; h < scoreVectors; ++h)
          keyLanes.push_back(vector::LoadOp::create(
              b, laneType, keysT, ValueRange{c, arith::AddIOp::create(b, j0, index(h * lanes))}));
        SmallVector<Value> next;
        for (int64_t r = 0; r < rows; ++r) {
          Value qLane = splat(load(queryTile, {index(r), c}));
          for (int64_t h = 0; h < scoreVectors; ++h)
            next.push_back(vector::FMAOp::create(b, qLane, keyLanes[h], t[r * scoreVectors + h]));
        }
        return next;
      });

      SmallVector<Value> next(acc.begin(), acc.end());
      for (int64_t r = 0; r < rows; ++r) {
        Value m = acc[3 * r], l = acc[3 * r + 1], count = acc[3 * r + 2];
        Value iLanes = splat(rowIndex[r]);
        Value endLanes = splat(rowKeyEnd[r]);
        SmallVector<Value> s, keepLanes;
        for (int64_t h = 0; h < scoreVectors; ++h) {
          Value jLanes = arith::AddIOp::create(b, splat(arith::AddIOp::create(b, j0, index(h * lanes))), laneOffsets);
          Value raw = tile[r * scoreVectors + h];
          s.push_back(lanewise.score ? call(lanewise.score, lanewiseArgs({raw, iLanes, jLanes})) : raw);
          Value keep = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, jLanes, endLanes);
          if (lanewise.mask)
            keep = arith::AndIOp::create(b, keep, call(lanewise.mask, {iLanes, jLanes}));
          keepLanes.push_back(keep);
        }
        Value shift = zeroLanes, alpha;
        if (online) {
          Value blockMax = m;
          for (int64_t h = 0; h < scoreVectors; ++h) {
            Value st = arith::SelectOp::create(b, keepLanes[h], call(lanewise.stabilizer, lanewiseArgs({s[h]})), minusInfLanes);
            blockMax = arith::MaximumFOp::create(b, blockMax, vector::ReductionOp::create(b, vector::CombiningKind::MAXIMUMF, st));
          }
          // e^(m - m_new), with 1 while every key so far is masked (m = m_new = -inf).
          Value stillEmpty = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, blockMax, minusInf);
          alpha = arith::SelectOp::create(b, stillEmpty, constant(1.0), math::ExpOp::create(b, sub(m, blockMax)));
          shift = splat(blockMax);
          next[3 * r] = blockMax;
        }
        Value hSum = zero, kept = zero;
        for (int64_t h = 0; h < scoreVectors; ++h) {
          Value g = arith::SelectOp::create(b, keepLanes[h], call(lanewise.numerator, lanewiseArgs({s[h], shift})), zeroLanes);
          vector::StoreOp::create(b, g, weightTile, ValueRange{index(r), index(h * lanes)});
          if (lanewise.denominator) {
            Value hv = arith::SelectOp::create(b, keepLanes[h], call(lanewise.denominator, lanewiseArgs({s[h], shift})), zeroLanes);
            hSum = add(hSum, vector::ReductionOp::create(b, vector::CombiningKind::ADD, hv));
          }
          kept = add(kept, vector::ReductionOp::create(b, vector::CombiningKind::ADD,
                                                       arith::SelectOp::create(b, keepLanes[h], oneLanes, zeroLanes)));
        }
        next[3 * r + 1] = add(online ? mul(l, alpha) : l, hSum);
        next[3 * r + 2] = add(count, kept);
        if (online) {
          Value alphaLanes = splat(alpha);
          for (int64_t c = 0; c < vectorsPerRow; ++c) {
            Value &accumulator = next[3 * rows + r * vectorsPerRow + c];
            accumulator = arith::MulFOp::create(b, accumulator, alphaLanes);
          }
        }
      }

      // O += W·V over the block's keys that exist.
      Value keysHere = arith::MinSIOp::create(b, index(blockKeys), arith::SubIOp::create(b, blockEnd, j0));
      SmallVector<Value> outputs(next.begin() + 3 * rows, next.end());
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
      llvm::copy(updated, next.begin() + 3 * rows);
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
      for (int64_t c = 0; c < vectorsPerRow; ++c)
        vector::StoreOp::create(b, mul(carried[3 * rows + r * vectorsPerRow + c], inverseLanes), o,
                                ValueRange{rowIndex[r], index(c * lanes)});
      store(arith::SelectOp::create(b, anyKey, online ? m : zero, zero), rowMax, {rowIndex[r]});
      store(arith::SelectOp::create(b, anyKey, denominator, zero), rowSum, {rowIndex[r]});
    }
    return {};
  }, rowStep);
  memref::DeallocOp::create(b, keysT);
  func::ReturnOp::create(b);
}

void KernelCodegen::buildBackward() {
  MLIRContext *ctx = kernel.getContext();
  Type i64 = b.getI64Type();
  SmallVector<Type> inputs{matrixType, matrixType, matrixType, matrixType, matrixType,
                           vectorType, vectorType, vectorType, matrixType, matrixType,
                           matrixType, vectorType, i64, i64};
  auto function = func::FuncOp::create(b, "attn_backward_" + typeSuffix(type),
                                       FunctionType::get(ctx, inputs, {}));
  function->setAttr("llvm.emit_c_interface", UnitAttr::get(ctx));
  Block *entry = function.addEntryBlock();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  auto args = entry->getArguments();
  Value q = args[0], k = args[1], v = args[2], o = args[3], dOut = args[4], rowMax = args[5],
        rowSum = args[6], params = args[7], dq = args[8], dk = args[9], dv = args[10],
        dParams = args[11];
  prologue(q, k, params, args[12], args[13]);
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
      SmallVector<Value> scoreArgs = withParams({raw, i, j});
      for (auto [p, scoreDp] : llvm::enumerate(fns.scoreDp))
        accumulate(dParams, {index(numNormalizerParams + p)}, mul(ds, call(scoreDp, scoreArgs)));
      Value dRaw = fns.scoreDs ? mul(ds, call(fns.scoreDs, scoreArgs)) : ds;

      // raw = scale · Σ_c φ(q_ic)·φ(k_jc)
      Value dDot = mul(dRaw, scale);
      loop(index(0), headDim, {}, [&](Value col, ValueRange) -> SmallVector<Value> {
        Value x = load(q, {i, col}), y = load(k, {j, col});
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
  FailureOr<NormalizerClass> form = classifyNormalizer(normalizer);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "attn-abi " << ATTN_ABI_VERSION << "\n";
  os << "kernel " << kernel.getSymName() << "\n";
  os << "normalizer " << normalizer.getSymName() << "\n";
  os << "algorithm "
     << (succeeded(form) ? stringifyAlgorithm(form->algorithm) : StringRef("invalid")) << "\n";
  os << "denominator " << stringifyDenominatorKind(normalizer.getDenominatorKind()) << "\n";
  os << "mask " << (kernel.getMask() ? *kernel.getMask() : StringRef("none")) << "\n";
  os << "params";
  for (auto [name, init] : llvm::zip(kernelParamNames(kernel), kernelParamInits(kernel)))
    os << " " << name << "=" << llvm::format("%.17g", init);
  os << "\n";
  os << "dtypes";
  for (FloatType type : elementTypes)
    os << " " << typeSuffix(type);
  os << "\n";
  os << "devices cpu\n";
  return text;
}

LogicalResult mlir::attn::lowerKernelToLoops(KernelOp kernel, ArrayRef<FloatType> elementTypes,
                                             int64_t vectorBits) {
  if (ScoreOp score = kernel.getScoreOp()) {
    ContractKind contract = score.getContract();
    if (contract != ContractKind::Dot && contract != ContractKind::ScaledDot)
      return kernel.emitOpError() << "uses contract " << stringifyContractKind(contract)
                                  << " (score " << kernel.getScoreAttr()
                                  << "), which the CPU lowering does not support yet; "
                                     "supported: dot, scaled_dot";
  }
  ModuleOp module = kernel->getParentOfType<ModuleOp>();
  ImplicitLocOpBuilder b(kernel.getLoc(), module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  for (FloatType type : elementTypes) {
    KernelCodegen codegen(kernel, type, vectorBits, b);
    if (failed(codegen.instantiateFunctions()))
      return failure();
    b.setInsertionPointToEnd(module.getBody());
    codegen.buildForwardDispatch();
    codegen.buildBackward();
  }
  emitManifest(b, buildManifest(kernel, elementTypes));
  return success();
}
