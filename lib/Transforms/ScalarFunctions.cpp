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

namespace {
/// Symbol names of the functions derived from one kernel (for readers of the IR;
/// passes find them through the kernel's #attn.functions).
struct KernelFunctionNames {
  explicit KernelFunctionNames(KernelOp kernel) : prefix(kernel.getSymName().str()) {}
  std::string numerator() const { return prefix + ".num"; }
  std::string denominator() const { return prefix + ".den"; }
  std::string stabilizer() const { return prefix + ".stab"; }
  std::string score() const { return prefix + ".score"; }
  std::string feature() const { return prefix + ".feature"; }
  std::string mask() const { return prefix + ".mask"; }
  std::string phase() const { return prefix + ".phase"; }
  static std::string derivative(StringRef function, StringRef arg) {
    return (function + ".d." + arg).str();
  }
  std::string prefix;
};
} // namespace

/// The derivative suffix of the score function by row input `index`.
static std::string rowInputDerivativeName(ScoreOp score, unsigned index) {
  return ("row." + cast<StringAttr>((*score.getRowInputNames())[index]).getValue()).str();
}

/// x + ln c - log(k + e^u), the exponent of a stabilised product e^x·c/(k + e^u),
/// from the already cloned operands. log(k + e^u) = max(u, ln k) +
/// log1p(e^-|u - ln k|) is finite for every u.
static Value productExponent(OpBuilder &b, StabilisedProduct product, const IRMapping &mapping) {
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
      : kernel(kernel), module(kernel->getParentOfType<ModuleOp>()), floatType(floatType),
        numParams(kernelParamNames(kernel).size()) {}

  /// A private function `name` taking `leading` arguments then the kernel's params.
  func::FuncOp create(StringRef name, ArrayRef<Type> leading, Type result) {
    SmallVector<Type> inputs(leading);
    inputs.append(numParams, floatType);
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto function =
        func::FuncOp::create(b, kernel.getLoc(), name, b.getFunctionType(inputs, result));
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

/// Creates d`function`/d`arg` for each argument index in `wrt`, named after
/// `argNames`; returns their symbols.
static FailureOr<SmallVector<Attribute>> deriveAll(func::FuncOp function, ArrayRef<unsigned> wrt,
                                                   ArrayRef<std::string> argNames) {
  SmallVector<Attribute> derivatives;
  for (auto [index, name] : llvm::zip(wrt, argNames)) {
    FailureOr<func::FuncOp> derivative =
        buildDerivative(function, index, KernelFunctionNames::derivative(function.getName(), name));
    if (failed(derivative))
      return failure();
    derivatives.push_back(FlatSymbolRefAttr::get(*derivative));
  }
  return derivatives;
}

LogicalResult mlir::attn::outlineKernelFunctions(KernelOp kernel) {
  NormalizerOp normalizer = kernel.getNormalizerOp();
  ScoreOp score = kernel.getScoreOp();
  MaskOp mask = kernel.getMaskOp();
  FailureOr<Algorithm> algorithm = requireAlgorithm(kernel);
  if (failed(algorithm))
    return failure();
  // The stabilised exps of an online normalizer (the classifier has accepted it).
  std::optional<NormalizerClass> online;
  if (*algorithm == Algorithm::Online) {
    FailureOr<NormalizerClass> form = classifyNormalizer(normalizer);
    if (failed(form))
      return failure();
    online = std::move(*form);
  }

  MLIRContext *ctx = kernel.getContext();
  Type f = normalizer.getScalarType();
  Type index = IndexType::get(ctx);
  KernelFunctionNames names(kernel);
  FunctionEmitter emitter(kernel, f);
  SmallVector<StringRef> params = kernelParamNames(kernel);
  unsigned numNormalizerParams = normalizer.getNumParams();
  const NormalizerClass *stabilised = online ? &*online : nullptr;

  // Role -> symbol of every function made here, as the #attn.functions fields.
  FlatSymbolRefAttr numerator, denominator, stabilizer, scoreFn, feature, maskFn, phase,
      numeratorDs, denominatorDs, scoreDs, featureDx;
  ArrayAttr numeratorDp, denominatorDp, scoreDp, scoreDr;
  auto symbolOf = [](func::FuncOp function) { return FlatSymbolRefAttr::get(function); };

  // Derivatives of a normalizer function: by s (argument 0) and by its own params.
  SmallVector<unsigned> normalizerWrt{0};
  SmallVector<std::string> normalizerWrtNames{"s"};
  for (unsigned k = 0; k < numNormalizerParams; ++k) {
    normalizerWrt.push_back(2 + k);
    normalizerWrtNames.push_back(params[k].str());
  }

  auto emitNormalizerFunction = [&](Region &region, StringRef name, FlatSymbolRefAttr &slot,
                                    FlatSymbolRefAttr &dsSlot, ArrayAttr &dpSlot) -> LogicalResult {
    func::FuncOp function = emitter.create(name, {f, f}, f);
    Block &entry = function.front();
    OpBuilder b = OpBuilder::atBlockEnd(&entry);
    SmallVector<Value> arguments{entry.getArgument(0)};
    for (unsigned k = 0; k < numNormalizerParams; ++k)
      arguments.push_back(entry.getArgument(2 + k));
    Value result = emitter.inlineRegion(b, region, arguments, stabilised, entry.getArgument(1));
    func::ReturnOp::create(b, kernel.getLoc(), result);
    FailureOr<SmallVector<Attribute>> derivatives =
        deriveAll(function, normalizerWrt, normalizerWrtNames);
    if (failed(derivatives))
      return failure();
    slot = symbolOf(function);
    dsSlot = cast<FlatSymbolRefAttr>(derivatives->front());
    if (numNormalizerParams)
      dpSlot = ArrayAttr::get(ctx, ArrayRef(*derivatives).drop_front());
    return success();
  };

  if (failed(emitNormalizerFunction(normalizer.getNumerator(), names.numerator(), numerator,
                                    numeratorDs, numeratorDp)))
    return failure();
  if (normalizer.hasDenominatorRegion() &&
      failed(emitNormalizerFunction(normalizer.getDenominator(), names.denominator(), denominator,
                                    denominatorDs, denominatorDp)))
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
    stabilizer = symbolOf(function);
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
    FailureOr<SmallVector<Attribute>> derivatives = deriveAll(function, wrt, wrtNames);
    if (failed(derivatives))
      return failure();
    scoreFn = symbolOf(function);
    scoreDs = cast<FlatSymbolRefAttr>(derivatives->front());
    ArrayRef<Attribute> byRow = ArrayRef(*derivatives).slice(1, score.getNumRowInputs());
    ArrayRef<Attribute> byParam = ArrayRef(*derivatives).drop_front(1 + score.getNumRowInputs());
    if (!byRow.empty())
      scoreDr = ArrayAttr::get(ctx, byRow);
    if (!byParam.empty())
      scoreDp = ArrayAttr::get(ctx, byParam);
  }

  if (score && score.hasFeatureMap()) {
    OpBuilder b = OpBuilder::atBlockEnd(emitter.module.getBody());
    auto function =
        func::FuncOp::create(b, kernel.getLoc(), names.feature(), b.getFunctionType({f}, {f}));
    function.setPrivate();
    Block *entry = function.addEntryBlock();
    b.setInsertionPointToEnd(entry);
    func::ReturnOp::create(b, kernel.getLoc(),
                           emitter.inlineRegion(b, score.getFeature(), entry->getArguments()));
    FailureOr<SmallVector<Attribute>> derivatives = deriveAll(function, {0}, {"x"});
    if (failed(derivatives))
      return failure();
    feature = symbolOf(function);
    featureDx = cast<FlatSymbolRefAttr>(derivatives->front());
  }

  if (*algorithm == Algorithm::Kernelised) {
    std::optional<KernelisedForm> kernelised = matchKernelised(kernel, /*explain=*/false);
    if (kernelised && kernelised->positionFactor) {
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
      phase = symbolOf(function);
    }
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
    maskFn = symbolOf(function);
  }

  auto functions = KernelFunctionsAttr::get(
      ctx, f, /*lanes=*/0, numerator, denominator, stabilizer, scoreFn, feature, maskFn, phase,
      numeratorDs, denominatorDs, scoreDs, featureDx, numeratorDp, denominatorDp, scoreDp, scoreDr);
  kernel.setFunctionsAttr(ArrayAttr::get(ctx, {functions}));
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

/// `functions` with every symbol replaced by `map` (the roles stay), at `type`
/// and `lanes`; fails when `map` does.
static FailureOr<KernelFunctionsAttr>
mapFunctions(KernelFunctionsAttr functions, Type type, int64_t lanes,
             function_ref<FailureOr<FlatSymbolRefAttr>(FlatSymbolRefAttr)> map) {
  MLIRContext *ctx = functions.getContext();
  bool failedAny = false;
  auto one = [&](FlatSymbolRefAttr ref) -> FlatSymbolRefAttr {
    if (!ref || failedAny)
      return ref;
    FailureOr<FlatSymbolRefAttr> mapped = map(ref);
    failedAny = failed(mapped);
    return failedAny ? ref : *mapped;
  };
  auto list = [&](ArrayAttr refs) -> ArrayAttr {
    if (!refs)
      return refs;
    return ArrayAttr::get(ctx, llvm::map_to_vector(refs, [&](Attribute ref) -> Attribute {
                            return one(cast<FlatSymbolRefAttr>(ref));
                          }));
  };
  auto mapped = KernelFunctionsAttr::get(
      ctx, type, lanes, one(functions.getNumerator()), one(functions.getDenominator()),
      one(functions.getStabilizer()), one(functions.getScore()), one(functions.getFeature()),
      one(functions.getMask()), one(functions.getPhase()), one(functions.getNumeratorDs()),
      one(functions.getDenominatorDs()), one(functions.getScoreDs()), one(functions.getFeatureDx()),
      list(functions.getNumeratorDp()), list(functions.getDenominatorDp()),
      list(functions.getScoreDp()), list(functions.getScoreDr()));
  if (failedAny)
    return failure();
  return mapped;
}

/// The instance of the kernel's functions at `type` and `lanes`, or null.
static KernelFunctionsAttr findInstance(KernelOp kernel, Type type, int64_t lanes) {
  for (Attribute entry : kernel.getFunctionsAttr()) {
    auto functions = cast<KernelFunctionsAttr>(entry);
    if (functions.getType() == type && functions.getLanes() == lanes)
      return functions;
  }
  return {};
}

static InFlightDiagnostic missingFunctions(KernelOp kernel) {
  return kernel.emitOpError("has no scalar functions; run attn-derive-backward first");
}

LogicalResult mlir::attn::instantiateKernelFunctions(KernelOp kernel, FloatType type,
                                                     int64_t lanes) {
  if (!kernel.getFunctions())
    return missingFunctions(kernel);
  if (findInstance(kernel, type, lanes))
    return success();
  Type own = kernel.getNormalizerOp().getScalarType();
  KernelFunctionsAttr original = findInstance(kernel, own, /*lanes=*/0);
  if (!original)
    return kernel.emitOpError() << "has no " << own
                                << " scalar functions of its own to instantiate from";
  std::string suffix = (type == own ? "" : "." + elementTypeName(type)) +
                       (lanes ? ".x" + std::to_string(lanes) : "");
  ModuleOp module = kernel->getParentOfType<ModuleOp>();
  FailureOr<KernelFunctionsAttr> instance = mapFunctions(
      original, type, lanes, [&](FlatSymbolRefAttr ref) -> FailureOr<FlatSymbolRefAttr> {
        auto function = module.lookupSymbol<func::FuncOp>(ref.getAttr());
        std::string name = (function.getName() + suffix).str();
        if (auto existing = module.lookupSymbol<func::FuncOp>(name))
          return FlatSymbolRefAttr::get(existing);
        FailureOr<func::FuncOp> copy = cloneRetyped(function, type, lanes, name);
        if (failed(copy))
          return failure();
        return FlatSymbolRefAttr::get(*copy);
      });
  if (failed(instance))
    return failure();
  SmallVector<Attribute> sets(kernel.getFunctionsAttr().getValue());
  sets.push_back(*instance);
  kernel.setFunctionsAttr(ArrayAttr::get(kernel.getContext(), sets));
  return success();
}

FailureOr<ScalarFunctions> mlir::attn::lookupScalarFunctions(KernelOp kernel, FloatType type,
                                                             int64_t lanes) {
  if (!kernel.getFunctions())
    return missingFunctions(kernel);
  KernelFunctionsAttr functions = findInstance(kernel, type, lanes);
  if (!functions)
    return kernel.emitOpError() << "has no " << elementTypeName(type)
                                << (lanes ? " x" + std::to_string(lanes) : "")
                                << " instance of its scalar functions; run "
                                   "attn-instantiate-functions first";
  auto resolve = [&](FlatSymbolRefAttr ref) {
    return ref ? SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(kernel, ref.getAttr())
               : func::FuncOp();
  };
  auto resolveAll = [&](ArrayAttr refs, size_t size) {
    SmallVector<func::FuncOp> resolved(size);
    for (auto [slot, ref] : llvm::zip(resolved, refs ? refs.getValue() : ArrayRef<Attribute>()))
      slot = resolve(cast<FlatSymbolRefAttr>(ref));
    return resolved;
  };
  ScalarFunctions fns;
  fns.numerator = resolve(functions.getNumerator());
  fns.denominator = resolve(functions.getDenominator());
  fns.stabilizer = resolve(functions.getStabilizer());
  fns.score = resolve(functions.getScore());
  fns.feature = resolve(functions.getFeature());
  fns.mask = resolve(functions.getMask());
  fns.phase = resolve(functions.getPhase());
  fns.numeratorDs = resolve(functions.getNumeratorDs());
  fns.denominatorDs = resolve(functions.getDenominatorDs());
  fns.scoreDs = resolve(functions.getScoreDs());
  fns.featureDx = resolve(functions.getFeatureDx());
  // One entry per normalizer param (null without a summed denominator), score
  // param and row input.
  ScoreOp score = kernel.getScoreOp();
  unsigned numNormalizerParams = kernel.getNormalizerOp().getNumParams();
  fns.numeratorDp = resolveAll(functions.getNumeratorDp(), numNormalizerParams);
  fns.denominatorDp = resolveAll(functions.getDenominatorDp(), numNormalizerParams);
  fns.scoreDp = resolveAll(functions.getScoreDp(), score ? score.getNumParams() : 0);
  fns.scoreDr = resolveAll(functions.getScoreDr(), score ? score.getNumRowInputs() : 0);
  return fns;
}
