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

/// Generates the entry points of one kernel for one element type.
class KernelCodegen {
public:
  KernelCodegen(KernelOp kernel, FloatType type, ImplicitLocOpBuilder &b)
      : kernel(kernel), normalizer(kernel.getNormalizerOp()), score(kernel.getScoreOp()),
        type(type), b(b) {
    MLIRContext *ctx = kernel.getContext();
    int64_t dyn = ShapedType::kDynamic;
    matrixType = MemRefType::get({dyn, dyn}, type, StridedLayoutAttr::get(ctx, dyn, {dyn, dyn}));
    vectorType = MemRefType::get({dyn}, type, StridedLayoutAttr::get(ctx, dyn, {dyn}));
  }

  LogicalResult instantiateFunctions();
  void buildForward();
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
  /// memref[row, c] += factor · source[sourceRow, c] for c < n.
  void axpyRow(Value memref, Value row, Value factor, Value source, Value sourceRow, Value n);
  /// scf.for over [lb, ub) carrying `inits`; `body` returns the next values.
  ValueRange loop(Value lb, Value ub, ValueRange inits,
                  function_ref<SmallVector<Value>(Value, ValueRange)> body);
  /// scf.if yielding `types`; each branch returns its values.
  ValueRange branch(Value cond, TypeRange types, function_ref<SmallVector<Value>()> thenBody,
                    function_ref<SmallVector<Value>()> elseBody);

  // --- attention pieces -----------------------------------------------------
  /// Loads params, scale, bounds shared by forward and backward.
  void prologue(Value q, Value k, Value params, Value kvLen, Value causal);
  /// Keys j < keyEnd(i) take part before the mask region is asked.
  Value keyEnd(Value i);
  Value keep(Value i, Value j);
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
  MemRefType matrixType, vectorType;
  ScalarFunctions fns;
  bool online = false;

  // Values of the function being built.
  SmallVector<Value> paramValues;
  Value scale, headDim, kvEnd, isCausal;
};

ValueRange KernelCodegen::loop(Value lb, Value ub, ValueRange inits,
                               function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto forOp = scf::ForOp::create(b, lb, ub, index(1), inits,
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

void KernelCodegen::buildForward() {
  MLIRContext *ctx = kernel.getContext();
  Type i64 = b.getI64Type();
  SmallVector<Type> inputs{matrixType, matrixType, matrixType, matrixType,
                           vectorType, vectorType, vectorType, i64, i64, i64, i64};
  auto function = func::FuncOp::create(b, "attn_forward_" + typeSuffix(type),
                                       FunctionType::get(ctx, inputs, {}));
  function->setAttr("llvm.emit_c_interface", UnitAttr::get(ctx));
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
    Value denominator;
    switch (normalizer.getDenominatorKind()) {
    case DenominatorKind::Sum:
      denominator = l;
      if (auto eps = normalizer.getEpsilon()) {
        Value epsilon = constant(eps->convertToDouble());
        if (online) // C·e^-m = Σ h·e^-m + ε·e^-m
          epsilon = mul(epsilon, math::ExpOp::create(b, arith::NegFOp::create(b, m)));
        denominator = add(denominator, epsilon);
      }
      break;
    case DenominatorKind::Constant:
      denominator = constant(normalizer.getDenominatorConstant()->convertToDouble());
      break;
    case DenominatorKind::Count:
      denominator = arith::UIToFPOp::create(
          b, type, arith::IndexCastOp::create(b, b.getI64Type(), count));
      break;
    }
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

LogicalResult mlir::attn::lowerKernelToLoops(KernelOp kernel, ArrayRef<FloatType> elementTypes) {
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
    KernelCodegen codegen(kernel, type, b);
    if (failed(codegen.instantiateFunctions()))
      return failure();
    b.setInsertionPointToEnd(module.getBody());
    codegen.buildForward();
    codegen.buildBackward();
  }
  emitManifest(b, buildManifest(kernel, elementTypes));
  return success();
}
