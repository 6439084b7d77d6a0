//===- ScalarFunctions.cpp - a kernel's regions as scalar functions -------===//
#include "lib/Transforms/ScalarFunctions.h"

#include "lib/Analysis/KernelSignature.h"
#include "lib/Analysis/KernelisedAnalysis.h"
#include "lib/Analysis/NormalizerAnalysis.h"
#include "lib/Transforms/Differentiate.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

#include <charconv>
#include <cmath>

using namespace mlir;
using namespace mlir::attn;

std::string mlir::attn::rowInputDerivativeName(ScoreOp score, unsigned index) {
  return ("row." + cast<StringAttr>((*score.getRowInputNames())[index]).getValue()).str();
}

/// x + ln c - log(k + e^u), the exponent of a stabilised product e^x·c/(k + e^u),
/// from the already cloned operands. log(k + e^u) = max(u, ln k) +
/// log1p(e^-|u - ln k|) is finite for every u.
static Value productExponent(OpBuilder &b, StabilisedProduct product,
                             const IRMapping &mapping) {
  Location loc = product.bounded.getLoc();
  auto constantOf = [](Value v) {
    return cast<FloatAttr>(v.getDefiningOp<arith::ConstantOp>().getValue()).getValueAsDouble();
  };
  auto sum = product.bounded.getRhs().getDefiningOp<arith::AddFOp>();
  bool constantFirst = static_cast<bool>(sum.getLhs().getDefiningOp<arith::ConstantOp>());
  Value k = constantFirst ? sum.getLhs() : sum.getRhs();
  auto expU = (constantFirst ? sum.getRhs() : sum.getLhs()).getDefiningOp<math::ExpOp>();
  Value x = mapping.lookup(product.exp->getOperand(0));
  Value u = mapping.lookup(expU.getOperand());
  Type type = x.getType();
  auto cst = [&](double value) {
    return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, value)).getResult();
  };
  Value logK = cst(std::log(constantOf(k)));
  Value distance = math::AbsFOp::create(b, loc, arith::SubFOp::create(b, loc, u, logK));
  Value tail = math::Log1pOp::create(
      b, loc, math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, distance)));
  Value logSum = arith::AddFOp::create(b, loc, arith::MaximumFOp::create(b, loc, u, logK), tail);
  double c = constantOf(product.bounded.getLhs());
  Value scaled = c == 1.0 ? x : arith::AddFOp::create(b, loc, x, cst(std::log(c))).getResult();
  return arith::SubFOp::create(b, loc, scaled, logSum);
}

namespace {
/// Builds functions at the end of the kernel's module.
class FunctionEmitter {
public:
  FunctionEmitter(KernelOp kernel, Type floatType)
      : kernel(kernel), module(kernel->getParentOfType<ModuleOp>()),
        floatType(floatType), numParams(kernelParamNames(kernel).size()) {}

  /// A private function `name` taking `leading` arguments then the kernel's params.
  func::FuncOp create(StringRef name, ArrayRef<Type> leading, Type result) {
    SmallVector<Type> inputs(leading);
    inputs.append(numParams, floatType);
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto function = func::FuncOp::create(b, kernel.getLoc(), name,
                                         b.getFunctionType(inputs, result));
    function.setPrivate();
    function.addEntryBlock();
    return function;
  }

  /// Clones the ops of `region` into `builder`, with region argument k bound to
  /// `arguments[k]`; stabilised exps get their argument shifted by `shift`.
  /// Returns the yielded value.
  Value inlineRegion(OpBuilder &builder, Region &region, ValueRange arguments,
                     const NormalizerClass *form = nullptr, Value shift = {}) {
    IRMapping mapping;
    mapping.map(region.front().getArguments(), arguments);
    for (Operation &op : region.front().without_terminator()) {
      if (form && form->stabilisedProducts.count(&op)) {
        Value exponent = productExponent(builder, form->stabilisedProducts.at(&op), mapping);
        Value shifted = arith::SubFOp::create(builder, op.getLoc(), exponent, shift);
        mapping.map(op.getResult(0), math::ExpOp::create(builder, op.getLoc(), shifted));
        continue;
      }
      if (form && form->stabilisedExps.contains(&op)) {
        Value x = mapping.lookup(op.getOperand(0));
        Value shifted = arith::SubFOp::create(builder, op.getLoc(), x, shift);
        mapping.map(op.getResult(0), math::ExpOp::create(builder, op.getLoc(), shifted));
        continue;
      }
      builder.clone(op, mapping);
    }
    return mapping.lookup(region.front().getTerminator()->getOperand(0));
  }

  KernelOp kernel;
  ModuleOp module;
  Type floatType;
  unsigned numParams;
};
} // namespace

/// Creates d`function`/d`arg` for each argument index in `wrt`, named after `argNames`.
static LogicalResult deriveAll(func::FuncOp function, ArrayRef<unsigned> wrt,
                               ArrayRef<std::string> argNames) {
  for (auto [index, name] : llvm::zip(wrt, argNames))
    if (failed(buildDerivative(function, index,
                               KernelFunctionNames::derivative(function.getName(), name))))
      return failure();
  return success();
}

LogicalResult mlir::attn::outlineKernelFunctions(KernelOp kernel) {
  NormalizerOp normalizer = kernel.getNormalizerOp();
  ScoreOp score = kernel.getScoreOp();
  MaskOp mask = kernel.getMaskOp();
  FailureOr<NormalizerClass> form = classifyNormalizer(normalizer);
  if (failed(form))
    return failure();

  Type f = normalizer.getScalarType();
  Type index = IndexType::get(kernel.getContext());
  KernelFunctionNames names(kernel);
  FunctionEmitter emitter(kernel, f);
  SmallVector<StringRef> params = kernelParamNames(kernel);
  unsigned numNormalizerParams = normalizer.getNumParams();
  const NormalizerClass *online = form->algorithm == Algorithm::Online ? &*form : nullptr;

  // Derivatives of a normalizer function: by s (argument 0) and by its own params.
  SmallVector<unsigned> normalizerWrt{0};
  SmallVector<std::string> normalizerWrtNames{"s"};
  for (unsigned k = 0; k < numNormalizerParams; ++k) {
    normalizerWrt.push_back(2 + k);
    normalizerWrtNames.push_back(params[k].str());
  }

  auto emitNormalizerFunction = [&](Region &region, StringRef name) -> LogicalResult {
    func::FuncOp function = emitter.create(name, {f, f}, f);
    Block &entry = function.front();
    OpBuilder b = OpBuilder::atBlockEnd(&entry);
    SmallVector<Value> arguments{entry.getArgument(0)};
    for (unsigned k = 0; k < numNormalizerParams; ++k)
      arguments.push_back(entry.getArgument(2 + k));
    Value result = emitter.inlineRegion(b, region, arguments, online, entry.getArgument(1));
    func::ReturnOp::create(b, kernel.getLoc(), result);
    return deriveAll(function, normalizerWrt, normalizerWrtNames);
  };

  if (failed(emitNormalizerFunction(normalizer.getNumerator(), names.numerator())))
    return failure();
  if (normalizer.hasDenominatorRegion() &&
      failed(emitNormalizerFunction(normalizer.getDenominator(), names.denominator())))
    return failure();

  if (online) {
    func::FuncOp function = emitter.create(names.stabilizer(), {f}, f);
    Block &entry = function.front();
    OpBuilder b = OpBuilder::atBlockEnd(&entry);
    SmallVector<Value> arguments{entry.getArgument(0)};
    for (unsigned k = 0; k < numNormalizerParams; ++k)
      arguments.push_back(entry.getArgument(1 + k));
    Value maximum;
    for (Region *region : {&normalizer.getNumerator(), &normalizer.getDenominator()}) {
      IRMapping mapping;
      mapping.map(region->front().getArguments(), arguments);
      for (Operation &op : region->front().without_terminator()) {
        b.clone(op, mapping);
        Value x;
        if (online->stabilisedExps.contains(&op))
          x = mapping.lookup(op.getOperand(0));
        else if (online->stabilisedProducts.count(&op))
          x = productExponent(b, online->stabilisedProducts.at(&op), mapping);
        else
          continue;
        maximum = maximum ? arith::MaximumFOp::create(b, op.getLoc(), maximum, x) : x;
      }
    }
    func::ReturnOp::create(b, kernel.getLoc(), maximum);
  }

  if (score && score.hasMod()) {
    unsigned leading = 3 + score.getNumRowInputs();
    SmallVector<Type> leadingTypes{f, index, index};
    leadingTypes.append(score.getNumRowInputs(), f);
    func::FuncOp function = emitter.create(names.score(), leadingTypes, f);
    Block &entry = function.front();
    OpBuilder b = OpBuilder::atBlockEnd(&entry);
    SmallVector<Value> arguments(entry.getArguments().take_front(leading));
    for (unsigned k = 0; k < score.getNumParams(); ++k)
      arguments.push_back(entry.getArgument(leading + numNormalizerParams + k));
    func::ReturnOp::create(b, kernel.getLoc(), emitter.inlineRegion(b, score.getMod(), arguments));
    SmallVector<unsigned> wrt{0};
    SmallVector<std::string> wrtNames{"s"};
    for (unsigned r = 0; r < score.getNumRowInputs(); ++r) {
      wrt.push_back(3 + r);
      wrtNames.push_back(rowInputDerivativeName(score, r));
    }
    for (unsigned k = 0; k < score.getNumParams(); ++k) {
      wrt.push_back(leading + numNormalizerParams + k);
      wrtNames.push_back(params[numNormalizerParams + k].str());
    }
    if (failed(deriveAll(function, wrt, wrtNames)))
      return failure();
  }

  if (score && score.hasFeatureMap()) {
    OpBuilder b = OpBuilder::atBlockEnd(emitter.module.getBody());
    auto function = func::FuncOp::create(b, kernel.getLoc(), names.feature(),
                                         b.getFunctionType({f}, {f}));
    function.setPrivate();
    Block *entry = function.addEntryBlock();
    b.setInsertionPointToEnd(entry);
    func::ReturnOp::create(b, kernel.getLoc(),
                           emitter.inlineRegion(b, score.getFeature(), entry->getArguments()));
    if (failed(deriveAll(function, {0}, {"x"})))
      return failure();
  }

  if (std::optional<KernelisedForm> kernelised = matchKernelised(kernel, /*explain=*/false);
      kernelised && kernelised->positionFactor) {
    // The mod region returning the cos argument; the unused rest folds away
    // after inlining.
    OpBuilder b = OpBuilder::atBlockEnd(emitter.module.getBody());
    auto function = func::FuncOp::create(b, kernel.getLoc(), names.phase(),
                                         b.getFunctionType({index, index}, {f}));
    function.setPrivate();
    Block *entry = function.addEntryBlock();
    b.setInsertionPointToEnd(entry);
    Block &mod = score.getMod().front();
    IRMapping mapping;
    Value zero = arith::ConstantOp::create(b, kernel.getLoc(), f, b.getFloatAttr(f, 0.0));
    for (BlockArgument arg : mod.getArguments())
      mapping.map(arg, zero); // s and params (unused: the phase does not depend on them)
    mapping.map(mod.getArgument(1), entry->getArgument(0));
    mapping.map(mod.getArgument(2), entry->getArgument(1));
    for (Operation &op : mod.without_terminator())
      b.clone(op, mapping);
    func::ReturnOp::create(b, kernel.getLoc(),
                           mapping.lookup(kernelised->positionFactor.getOperand()));
  }

  if (mask) {
    OpBuilder b = OpBuilder::atBlockEnd(emitter.module.getBody());
    auto function = func::FuncOp::create(b, kernel.getLoc(), names.mask(),
                                         b.getFunctionType({index, index}, {b.getI1Type()}));
    function.setPrivate();
    Block *entry = function.addEntryBlock();
    b.setInsertionPointToEnd(entry);
    func::ReturnOp::create(b, kernel.getLoc(),
                           emitter.inlineRegion(b, mask.getBody(), entry->getArguments()));
  }
  return success();
}

/// The value the user most likely wrote: the shortest decimal that reads back as
/// this constant, so `0.1 : f32` becomes 0.1 in f64 rather than 0.100000001490116.
static double widenLiteral(FloatAttr attr) {
  if (!attr.getType().isF32())
    return attr.getValueAsDouble();
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer) - 1,
                                    static_cast<float>(attr.getValueAsDouble()));
  if (error != std::errc())
    return attr.getValueAsDouble();
  *end = '\0';
  return std::strtod(buffer, nullptr);
}

FailureOr<func::FuncOp> mlir::attn::cloneRetyped(func::FuncOp function, FloatType type,
                                                 int64_t vectorWidth, StringRef name) {
  auto retype = [&](Type t) -> Type {
    Type element = isa<FloatType>(t) ? type : t;
    return vectorWidth ? VectorType::get({vectorWidth}, element) : element;
  };
  OpBuilder b(function);
  b.setInsertionPointAfter(function);
  SmallVector<Type> inputs = llvm::map_to_vector(function.getArgumentTypes(), retype);
  SmallVector<Type> results = llvm::map_to_vector(function.getResultTypes(), retype);
  auto clone = func::FuncOp::create(b, function.getLoc(), name, b.getFunctionType(inputs, results));
  clone.setPrivate();
  Block *entry = clone.addEntryBlock();
  b.setInsertionPointToEnd(entry);

  IRMapping mapping;
  mapping.map(function.getArguments(), entry->getArguments());
  for (Operation &op : function.getBody().front()) {
    if (op.getNumRegions() != 0)
      return op.emitOpError("cannot be retyped: it has regions");
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      Type resultType = retype(constant.getType());
      TypedAttr value = constant.getValue();
      if (auto floatAttr = dyn_cast<FloatAttr>(value))
        value = b.getFloatAttr(type, widenLiteral(floatAttr));
      if (auto vectorType = dyn_cast<VectorType>(resultType))
        value = DenseElementsAttr::get(vectorType, Attribute(value));
      mapping.map(constant.getResult(),
                  arith::ConstantOp::create(b, op.getLoc(), resultType, value).getResult());
      continue;
    }
    OperationState state(op.getLoc(), op.getName());
    for (Value operand : op.getOperands())
      state.operands.push_back(mapping.lookup(operand));
    for (Type t : op.getResultTypes())
      state.types.push_back(retype(t));
    state.addAttributes(op.getAttrs());
    Operation *created = b.create(state);
    mapping.map(op.getResults(), created->getResults());
  }
  return clone;
}

FailureOr<ScalarFunctions> mlir::attn::lookupScalarFunctions(KernelOp kernel, FloatType type) {
  ModuleOp module = kernel->getParentOfType<ModuleOp>();
  NormalizerOp normalizer = kernel.getNormalizerOp();
  KernelFunctionNames names(kernel);
  bool retype = type != normalizer.getScalarType();
  auto require = [&](func::FuncOp &slot, const std::string &name) -> LogicalResult {
    auto function = module.lookupSymbol<func::FuncOp>(name);
    if (!function || !retype) {
      slot = function;
      return success();
    }
    std::string retypedName = name + "." + elementTypeName(type);
    if (auto existing = module.lookupSymbol<func::FuncOp>(retypedName)) {
      slot = existing;
      return success();
    }
    FailureOr<func::FuncOp> clone = cloneRetyped(function, type, /*vectorWidth=*/0, retypedName);
    if (failed(clone))
      return failure();
    slot = *clone;
    return success();
  };

  if (!module.lookupSymbol<func::FuncOp>(names.numerator()))
    return kernel.emitOpError("has no outlined functions; run attn-derive-backward first");
  ScalarFunctions fns;
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
      failed(require(fns.phase, names.phase())) ||
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
  ScoreOp score = kernel.getScoreOp();
  for (unsigned r = 0; score && r < score.getNumRowInputs(); ++r)
    if (failed(require(fns.scoreDr.emplace_back(),
                       derivative(names.score(), rowInputDerivativeName(score, r)))))
      return failure();
  return fns;
}

Value mlir::attn::buildRowDenominator(ImplicitLocOpBuilder &b, NormalizerOp normalizer,
                                      bool online, Value m, Value sum, Value count) {
  Type type = m.getType();
  auto constant = [&](double value) {
    return arith::ConstantOp::create(b, type, b.getFloatAttr(type, value)).getResult();
  };
  switch (normalizer.getDenominatorKind()) {
  case DenominatorKind::Sum:
    if (auto eps = normalizer.getEpsilon()) {
      Value epsilon = constant(eps->convertToDouble());
      if (online) // C·e^-m = Σ h·e^-m + ε·e^-m
        epsilon = arith::MulFOp::create(
            b, epsilon, math::ExpOp::create(b, arith::NegFOp::create(b, m)));
      return arith::AddFOp::create(b, sum, epsilon);
    }
    return sum;
  case DenominatorKind::Constant:
    return constant(normalizer.getDenominatorConstant()->convertToDouble());
  case DenominatorKind::Count:
    return count;
  }
  llvm_unreachable("unknown denominator kind");
}

