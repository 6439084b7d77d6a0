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
  std::string offset() const { return prefix + ".offset"; }
  std::string offsetStab() const { return prefix + ".offset.stab"; }
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
/// A read of a learnable tensor input in an emitted function: which input (its
/// position in the kernel's inputs) and the attn.table_load it became.
struct LearnableRead {
  unsigned input;
  TableLoadOp load;
};

/// Builds functions at the end of the kernel's module.
class FunctionEmitter {
public:
  FunctionEmitter(KernelOp kernel, FloatType floatType)
      : kernel(kernel), module(kernel->getParentOfType<ModuleOp>()), floatType(floatType),
        numParams(kernelParamNames(kernel).size()), inputs(kernelInputs(kernel)) {}

  /// A private function `name` taking `leading` arguments, then the kernel's
  /// params, then its tensor inputs (memrefs).
  func::FuncOp create(StringRef name, ArrayRef<Type> leading, Type result) {
    SmallVector<Type> types(leading);
    types.append(numParams, floatType);
    for (InputOp input : inputs)
      types.push_back(tableType(input, floatType));
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto function =
        func::FuncOp::create(b, kernel.getLoc(), name, b.getFunctionType(types, result));
    function.setPrivate();
    function.addEntryBlock();
    return function;
  }

  /// The argument of `function` (made by create) holding tensor input `input`.
  Value tableArgument(func::FuncOp function, unsigned input) {
    return function.getArgument(function.getNumArguments() - inputs.size() + input);
  }

  /// Clones `op` of a region into `function` at `builder`: an attn.read becomes
  /// an attn.table_load of the function's table argument (recorded in `reads`
  /// when the input is learnable and `reads` is given).
  void cloneOp(OpBuilder &builder, Operation &op, IRMapping &mapping, func::FuncOp function,
               SmallVectorImpl<LearnableRead> *reads) {
    auto read = dyn_cast<ReadOp>(op);
    if (!read) {
      builder.clone(op, mapping);
      return;
    }
    auto input = SymbolTable::lookupNearestSymbolFrom<InputOp>(read, read.getInputAttr());
    unsigned position = llvm::find(inputs, input) - inputs.begin();
    SmallVector<Value> indices =
        llvm::map_to_vector(read.getIndices(), [&](Value v) { return mapping.lookup(v); });
    auto load = TableLoadOp::create(builder, op.getLoc(), read.getType(),
                                    tableArgument(function, position), indices);
    mapping.map(read.getResult(), load.getResult());
    if (reads && input.getLearnable())
      reads->push_back({position, load});
  }

  /// Clones the ops of `region` into `function` at `builder`, with region
  /// argument k bound to `arguments[k]`; stabilised exps get their argument
  /// shifted by `shift`; learnable reads are recorded in `reads`. Returns the
  /// yielded value.
  Value inlineRegion(OpBuilder &builder, Region &region, ValueRange arguments,
                     func::FuncOp function, SmallVectorImpl<LearnableRead> *reads = nullptr,
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
      cloneOp(builder, op, mapping, function, reads);
    }
    return mapping.lookup(region.front().getTerminator()->getOperand(0));
  }

  /// For each learnable read of `function`: the derivative of `function` by the
  /// value read (<f>.d.<input>.<k>) and the position it reads (<f>.at.<input>.<k>),
  /// as #attn.table_grad entries of `role`.
  LogicalResult tableGrads(func::FuncOp function, ArrayRef<LearnableRead> reads,
                           TableGradRole role, SmallVectorImpl<Attribute> &grads) {
    for (auto [k, read] : llvm::enumerate(reads)) {
      TableLoadOp load = read.load;
      std::string suffix = (inputs[read.input].getSymName() + "." + Twine(k)).str();
      FailureOr<func::FuncOp> derivative =
          buildDerivative(function, load.getResult(),
                          (function.getName() + ".d." + suffix).str());
      if (failed(derivative))
        return failure();
      // The position: the function's body up to the read, then table_position.
      OpBuilder b(function);
      b.setInsertionPointAfter(function);
      auto position = func::FuncOp::create(
          b, function.getLoc(), (function.getName() + ".at." + suffix).str(),
          b.getFunctionType(function.getArgumentTypes(), {b.getIndexType()}));
      position.setPrivate();
      Block *entry = position.addEntryBlock();
      b.setInsertionPointToEnd(entry);
      IRMapping mapping;
      mapping.map(function.getArguments(), entry->getArguments());
      for (Operation &op : function.getBody().front().without_terminator()) {
        if (&op == load.getOperation())
          break;
        b.clone(op, mapping);
      }
      SmallVector<Value> indices = llvm::map_to_vector(
          load.getIndices(), [&](Value v) { return mapping.lookup(v); });
      Value at = TablePositionOp::create(b, function.getLoc(), b.getIndexType(),
                                         mapping.lookup(load.getTable()), indices);
      func::ReturnOp::create(b, function.getLoc(), at);
      grads.push_back(TableGradAttr::get(kernel.getContext(), role, read.input,
                                         FlatSymbolRefAttr::get(*derivative),
                                         FlatSymbolRefAttr::get(position)));
    }
    return success();
  }

  KernelOp kernel;
  ModuleOp module;
  FloatType floatType;
  unsigned numParams;
  SmallVector<InputOp> inputs;
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

/// Applies `visit` to every function `functions` names.
static void forEachFunction(KernelFunctionsAttr functions, ModuleOp module,
                            function_ref<void(func::FuncOp)> visit);

static InFlightDiagnostic tooManyFunctionOps(KernelOp kernel, StringRef needs, int64_t ops,
                                             int64_t limit) {
  return kernel.emitOpError()
         << "needs " << needs << ops << " ops in its scalar functions and their derivatives, "
         << "over the limit of " << limit
         << " (docs/architecture.md, Compile time); shorten the regions, share subexpressions "
            "between them, or declare fewer params";
}

/// The ops of `region` but its terminator (0 for an absent region), and how many
/// of them read a learnable tensor input.
static std::pair<int64_t, int64_t> regionSize(Region &region) {
  if (region.empty())
    return {0, 0};
  int64_t ops = 0, learnableReads = 0;
  for (Operation &op : region.front().without_terminator()) {
    ++ops;
    if (auto read = dyn_cast<ReadOp>(op)) {
      auto input = SymbolTable::lookupNearestSymbolFrom<InputOp>(read, read.getInputAttr());
      learnableReads += input && input.getLearnable();
    }
  }
  return {ops, learnableReads};
}

LogicalResult mlir::attn::checkKernelSize(KernelOp kernel, const FunctionSizeLimits &limits) {
  NormalizerOp normalizer = kernel.getNormalizerOp();
  ScoreOp score = kernel.getScoreOp();
  MaskOp mask = kernel.getMaskOp();
  auto tooLarge = [&](Operation *owner, StringRef role, int64_t ops) -> LogicalResult {
    if (ops <= limits.regionOps)
      return success();
    return owner->emitOpError()
           << "has " << ops << " ops in its " << role << " region, over the limit of "
           << limits.regionOps
           << " per region (docs/architecture.md, Compile time); shorten the region or share "
              "subexpressions";
  };
  int64_t total = 0;
  // A region of `size` ops cloned into its function and `derivatives` more.
  auto add = [&](std::pair<int64_t, int64_t> size, int64_t derivatives) {
    total += size.first * (1 + derivatives + size.second);
  };
  if (normalizer) {
    unsigned params = normalizer.getNumParams();
    std::pair<int64_t, int64_t> shared = regionSize(normalizer.getShared());
    std::pair<int64_t, int64_t> numerator = regionSize(normalizer.getNumerator());
    std::pair<int64_t, int64_t> offset = regionSize(normalizer.getOffset());
    if (failed(tooLarge(normalizer, "shared", shared.first)) ||
        failed(tooLarge(normalizer, "numerator", numerator.first)) ||
        failed(tooLarge(normalizer, "offset", offset.first)))
      return failure();
    numerator = {numerator.first + shared.first, numerator.second + shared.second};
    add(numerator, 1 + params);
    if (normalizer.getSumOfNumerator()) {
      add(numerator, 1 + params);
    } else if (normalizer.hasDenominatorRegion()) {
      std::pair<int64_t, int64_t> denominator = regionSize(normalizer.getDenominator());
      if (failed(tooLarge(normalizer, "denominator", denominator.first)))
        return failure();
      add({denominator.first + shared.first, denominator.second + shared.second}, 1 + params);
    }
    add(offset, params);
  }
  if (score) {
    std::pair<int64_t, int64_t> mod = regionSize(score.getMod());
    std::pair<int64_t, int64_t> feature = regionSize(score.getFeature());
    if (failed(tooLarge(score, "mod", mod.first)) ||
        failed(tooLarge(score, "feature", feature.first)))
      return failure();
    add(mod, 1 + score.getNumParams());
    add({feature.first, 0}, 1);
  }
  if (mask) {
    std::pair<int64_t, int64_t> body = regionSize(mask.getBody());
    if (failed(tooLarge(mask, "mask", body.first)))
      return failure();
    add({body.first, 0}, 0);
  }
  if (total <= limits.totalOps)
    return success();
  return tooManyFunctionOps(kernel, "at least ", total, limits.totalOps);
}

/// Marks the kernel's large functions `no_inline` and refuses a kernel whose
/// functions are too large to compile in reasonable time. The schedules call
/// every function at many sites (rows × vectors of a tile, forward and backward,
/// each type and width): inlined, code grows with region size × sites, and the
/// compile time with it (a 300-op region took minutes); called, it grows with
/// region size only, for the cost of a call per evaluation, small next to a
/// body of more than `limits.inlineOps` ops.
static LogicalResult boundFunctionSizes(KernelOp kernel, KernelFunctionsAttr functions,
                                        const FunctionSizeLimits &limits) {
  int64_t total = 0;
  forEachFunction(functions, kernel->getParentOfType<ModuleOp>(), [&](func::FuncOp function) {
    int64_t ops = 0;
    function.walk([&](Operation *) { ++ops; });
    total += ops;
    if (ops > limits.inlineOps)
      function.setNoInline(true);
  });
  if (total <= limits.totalOps)
    return success();
  return tooManyFunctionOps(kernel, "", total, limits.totalOps);
}

LogicalResult mlir::attn::outlineKernelFunctions(KernelOp kernel,
                                                const FunctionSizeLimits &limits) {
  NormalizerOp normalizer = kernel.getNormalizerOp();
  ScoreOp score = kernel.getScoreOp();
  MaskOp mask = kernel.getMaskOp();
  FailureOr<Algorithm> algorithm = requireAlgorithm(kernel);
  if (failed(algorithm) || failed(normalizer.requireExpanded()))
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
  auto f = cast<FloatType>(normalizer.getScalarType());
  Type index = IndexType::get(ctx);
  KernelFunctionNames names(kernel);
  FunctionEmitter emitter(kernel, f);
  SmallVector<StringRef> params = kernelParamNames(kernel);
  unsigned numNormalizerParams = normalizer.getNumParams();
  const NormalizerClass *stabilised = online ? &*online : nullptr;

  // Role -> symbol of every function made here, as the #attn.functions fields.
  FlatSymbolRefAttr numerator, denominator, stabilizer, offset, offsetStab, scoreFn, feature,
      maskFn, phase, numeratorDs, denominatorDs, scoreDs, featureDx;
  ArrayAttr numeratorDp, denominatorDp, offsetDp, scoreDp;
  // One #attn.table_grad per read of a learnable input, in numerator,
  // denominator and score mod.
  SmallVector<Attribute> tableGrads;
  auto symbolOf = [](func::FuncOp function) { return FlatSymbolRefAttr::get(function); };

  // num/den(s, m, b, h, i, j, θ...): the region's (s, b, h, i, j, normalizer
  // params) with the shift m after s; stab(s, b, h, i, j, θ...).
  const unsigned kIndices = 4;
  SmallVector<Type> indexTypes(kIndices, index);
  SmallVector<Type> normalizerLeading{f, f};
  normalizerLeading.append(indexTypes);
  const unsigned normalizerParamsAt = normalizerLeading.size();
  // Derivatives of a normalizer function: by s (argument 0) and by its own params.
  SmallVector<unsigned> normalizerWrt{0};
  SmallVector<std::string> normalizerWrtNames{"s"};
  for (unsigned k = 0; k < numNormalizerParams; ++k) {
    normalizerWrt.push_back(normalizerParamsAt + k);
    normalizerWrtNames.push_back(params[k].str());
  }

  auto emitNormalizerFunction = [&](Region &region, StringRef name, TableGradRole role,
                                    FlatSymbolRefAttr &slot, FlatSymbolRefAttr &dsSlot,
                                    ArrayAttr &dpSlot) -> LogicalResult {
    func::FuncOp function = emitter.create(name, normalizerLeading, f);
    Block &entry = function.front();
    OpBuilder b = OpBuilder::atBlockEnd(&entry);
    SmallVector<Value> arguments{entry.getArgument(0)};
    llvm::append_range(arguments, entry.getArguments().slice(2, kIndices));
    for (unsigned k = 0; k < numNormalizerParams; ++k)
      arguments.push_back(entry.getArgument(normalizerParamsAt + k));
    SmallVector<LearnableRead> reads;
    Value result = emitter.inlineRegion(b, region, arguments, function, &reads, stabilised,
                                        entry.getArgument(1));
    func::ReturnOp::create(b, kernel.getLoc(), result);
    FailureOr<SmallVector<Attribute>> derivatives =
        deriveAll(function, normalizerWrt, normalizerWrtNames);
    if (failed(derivatives) || failed(emitter.tableGrads(function, reads, role, tableGrads)))
      return failure();
    slot = symbolOf(function);
    dsSlot = cast<FlatSymbolRefAttr>(derivatives->front());
    if (numNormalizerParams)
      dpSlot = ArrayAttr::get(ctx, ArrayRef(*derivatives).drop_front());
    return success();
  };

  if (failed(emitNormalizerFunction(normalizer.getNumerator(), names.numerator(),
                                    TableGradRole::Numerator, numerator, numeratorDs,
                                    numeratorDp)))
    return failure();
  if (normalizer.hasDenominatorRegion() &&
      failed(emitNormalizerFunction(normalizer.getDenominator(), names.denominator(),
                                    TableGradRole::Denominator, denominator, denominatorDs,
                                    denominatorDp)))
    return failure();

  if (online) {
    SmallVector<Type> leading{f};
    leading.append(indexTypes);
    func::FuncOp function = emitter.create(names.stabilizer(), leading, f);
    Block &entry = function.front();
    OpBuilder b = OpBuilder::atBlockEnd(&entry);
    SmallVector<Value> arguments(entry.getArguments().take_front(leading.size()));
    for (unsigned k = 0; k < numNormalizerParams; ++k)
      arguments.push_back(entry.getArgument(leading.size() + k));
    Value maximum;
    for (Region *region : {&normalizer.getNumerator(), &normalizer.getDenominator()}) {
      IRMapping mapping;
      mapping.map(region->front().getArguments(), arguments);
      for (Operation &op : region->front().without_terminator()) {
        emitter.cloneOp(b, op, mapping, function, /*reads=*/nullptr);
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

  if (normalizer.hasOffsetRegion()) {
    // offset(m, b, h, i, θ..., tables...): β at the shift m; its derivatives by the
    // normalizer's params and reads; online, offset.stab(b, h, i, θ..., tables...).
    Region &region = normalizer.getOffset();
    SmallVector<Type> rowIndices(3, index);
    SmallVector<Type> leading{f};
    leading.append(rowIndices);
    func::FuncOp function = emitter.create(names.offset(), leading, f);
    Block &entry = function.front();
    OpBuilder b = OpBuilder::atBlockEnd(&entry);
    Value shift = entry.getArgument(0);
    SmallVector<Value> arguments(entry.getArguments().slice(1, 3));
    for (unsigned k = 0; k < numNormalizerParams; ++k)
      arguments.push_back(entry.getArgument(leading.size() + k));
    SmallVector<LearnableRead> reads;
    Value beta = emitter.inlineRegion(b, region, arguments, function, &reads, stabilised, shift);
    if (online && online->offsetConstant) // c·e^-m
      beta = arith::MulFOp::create(
          b, kernel.getLoc(), beta,
          math::ExpOp::create(b, kernel.getLoc(),
                              arith::NegFOp::create(b, kernel.getLoc(), shift)));
    func::ReturnOp::create(b, kernel.getLoc(), beta);
    SmallVector<unsigned> wrt;
    SmallVector<std::string> wrtNames;
    for (unsigned k = 0; k < numNormalizerParams; ++k) {
      wrt.push_back(leading.size() + k);
      wrtNames.push_back(params[k].str());
    }
    FailureOr<SmallVector<Attribute>> derivatives = deriveAll(function, wrt, wrtNames);
    if (failed(derivatives) ||
        failed(emitter.tableGrads(function, reads, TableGradRole::Offset, tableGrads)))
      return failure();
    offset = symbolOf(function);
    if (numNormalizerParams)
      offsetDp = ArrayAttr::get(ctx, *derivatives);

    if (online) {
      func::FuncOp stab = emitter.create(names.offsetStab(), rowIndices, f);
      Block &stabEntry = stab.front();
      OpBuilder sb = OpBuilder::atBlockEnd(&stabEntry);
      SmallVector<Value> stabArguments(stabEntry.getArguments().take_front(3));
      for (unsigned k = 0; k < numNormalizerParams; ++k)
        stabArguments.push_back(stabEntry.getArgument(3 + k));
      Value exponent;
      if (online->offsetConstant) {
        exponent = arith::ConstantOp::create(sb, kernel.getLoc(), f,
                                             sb.getFloatAttr(f, std::log(*online->offsetConstant)));
      } else {
        IRMapping mapping;
        mapping.map(region.front().getArguments(), stabArguments);
        for (Operation &op : region.front().without_terminator()) {
          emitter.cloneOp(sb, op, mapping, stab, /*reads=*/nullptr);
          Value x;
          if (online->stabilisedExps.contains(&op))
            x = mapping.lookup(op.getOperand(0));
          else if (online->stabilisedProducts.count(&op))
            x = productExponent(sb, online->stabilisedProducts.at(&op), mapping);
          else
            continue;
          exponent = exponent ? arith::MaximumFOp::create(sb, op.getLoc(), exponent, x) : x;
        }
      }
      func::ReturnOp::create(sb, kernel.getLoc(), exponent);
      offsetStab = symbolOf(stab);
    }
  }

  if (score && score.hasMod()) {
    // score(r, b, h, i, j, θ...): the mod region's arguments, then every kernel
    // param (the region reads the score's).
    const unsigned leading = 1 + kIndices;
    SmallVector<Type> leadingTypes{f};
    leadingTypes.append(indexTypes);
    func::FuncOp function = emitter.create(names.score(), leadingTypes, f);
    Block &entry = function.front();
    OpBuilder b = OpBuilder::atBlockEnd(&entry);
    SmallVector<Value> arguments(entry.getArguments().take_front(leading));
    for (unsigned k = 0; k < score.getNumParams(); ++k)
      arguments.push_back(entry.getArgument(leading + numNormalizerParams + k));
    SmallVector<LearnableRead> reads;
    func::ReturnOp::create(b, kernel.getLoc(),
                           emitter.inlineRegion(b, score.getMod(), arguments, function, &reads));
    SmallVector<unsigned> wrt{0};
    SmallVector<std::string> wrtNames{"s"};
    for (unsigned k = 0; k < score.getNumParams(); ++k) {
      wrt.push_back(leading + numNormalizerParams + k);
      wrtNames.push_back(params[numNormalizerParams + k].str());
    }
    FailureOr<SmallVector<Attribute>> derivatives = deriveAll(function, wrt, wrtNames);
    if (failed(derivatives) ||
        failed(emitter.tableGrads(function, reads, TableGradRole::Score, tableGrads)))
      return failure();
    scoreFn = symbolOf(function);
    scoreDs = cast<FlatSymbolRefAttr>(derivatives->front());
    if (score.getNumParams())
      scoreDp = ArrayAttr::get(ctx, ArrayRef(*derivatives).drop_front());
  }

  if (score && score.hasFeatureMap()) {
    OpBuilder b = OpBuilder::atBlockEnd(emitter.module.getBody());
    auto function =
        func::FuncOp::create(b, kernel.getLoc(), names.feature(), b.getFunctionType({f}, {f}));
    function.setPrivate();
    Block *entry = function.addEntryBlock();
    b.setInsertionPointToEnd(entry);
    func::ReturnOp::create(
        b, kernel.getLoc(), emitter.inlineRegion(b, score.getFeature(), entry->getArguments(), function));
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
      // s, b, h and params are unused: the phase depends on i and j only
      // (KernelisedAnalysis); they are bound to zeros of their types.
      Value zero = arith::ConstantOp::create(b, kernel.getLoc(), f, b.getFloatAttr(f, 0.0));
      Value zeroIndex = arith::ConstantIndexOp::create(b, kernel.getLoc(), 0);
      for (BlockArgument arg : mod.getArguments())
        mapping.map(arg, isa<IndexType>(arg.getType()) ? zeroIndex : zero);
      mapping.map(mod.getArgument(3), entry->getArgument(0));
      mapping.map(mod.getArgument(4), entry->getArgument(1));
      for (Operation &op : mod.without_terminator())
        b.clone(op, mapping);
      func::ReturnOp::create(b, kernel.getLoc(),
                             mapping.lookup(kernelised->positionFactor.getOperand()));
      phase = symbolOf(function);
    }
  }

  if (mask) {
    // mask(b, h, i, j, θ..., tables...) -> i1 (the params are unused).
    func::FuncOp function = emitter.create(names.mask(), indexTypes, IntegerType::get(ctx, 1));
    Block &entry = function.front();
    OpBuilder b = OpBuilder::atBlockEnd(&entry);
    func::ReturnOp::create(b, kernel.getLoc(),
                           emitter.inlineRegion(b, mask.getBody(),
                                                entry.getArguments().take_front(kIndices), function));
    maskFn = symbolOf(function);
  }

  auto functions = KernelFunctionsAttr::get(
      ctx, f, /*lanes=*/0, numerator, denominator, stabilizer, offset, offsetStab, scoreFn,
      feature, maskFn, phase, numeratorDs, denominatorDs, scoreDs, featureDx, numeratorDp,
      denominatorDp, offsetDp, scoreDp,
      tableGrads.empty() ? ArrayAttr() : ArrayAttr::get(ctx, tableGrads));
  kernel.setFunctionsAttr(ArrayAttr::get(ctx, {functions}));
  return boundFunctionSizes(kernel, functions, limits);
}

MemRefType mlir::attn::tableType(InputOp input, FloatType floatType) {
  Type element = isa<FloatType>(input.getElementType()) ? floatType : input.getElementType();
  int64_t rank = input.getRank();
  SmallVector<int64_t> dynamic(rank, ShapedType::kDynamic);
  return MemRefType::get(dynamic, element,
                         StridedLayoutAttr::get(input.getContext(), ShapedType::kDynamic, dynamic));
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
    // Tensor inputs stay memrefs (float ones of the new type); lanes read them
    // through vector indices.
    if (auto memref = dyn_cast<MemRefType>(t))
      return isa<FloatType>(memref.getElementType())
                 ? MemRefType::get(memref.getShape(), type, memref.getLayout())
                 : memref;
    Type element = isa<FloatType>(t) ? type : t;
    return vectorWidth ? VectorType::get({vectorWidth}, element) : element;
  };
  OpBuilder b(function);
  b.setInsertionPointAfter(function);
  SmallVector<Type> inputs = llvm::map_to_vector(function.getArgumentTypes(), retype);
  SmallVector<Type> results = llvm::map_to_vector(function.getResultTypes(), retype);
  auto clone = func::FuncOp::create(b, function.getLoc(), name, b.getFunctionType(inputs, results));
  clone.setPrivate();
  clone.setNoInline(function.getNoInline());
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
                            if (auto grad = dyn_cast<TableGradAttr>(ref))
                              return TableGradAttr::get(ctx, grad.getRole(), grad.getInput(),
                                                        one(grad.getDerivative()),
                                                        one(grad.getPosition()));
                            return one(cast<FlatSymbolRefAttr>(ref));
                          }));
  };
  auto mapped = KernelFunctionsAttr::get(
      ctx, type, lanes, one(functions.getNumerator()), one(functions.getDenominator()),
      one(functions.getStabilizer()), one(functions.getOffset()), one(functions.getOffsetStab()),
      one(functions.getScore()), one(functions.getFeature()), one(functions.getMask()),
      one(functions.getPhase()), one(functions.getNumeratorDs()),
      one(functions.getDenominatorDs()), one(functions.getScoreDs()), one(functions.getFeatureDx()),
      list(functions.getNumeratorDp()), list(functions.getDenominatorDp()),
      list(functions.getOffsetDp()), list(functions.getScoreDp()), list(functions.getTableGrads()));
  if (failedAny)
    return failure();
  return mapped;
}

static void forEachFunction(KernelFunctionsAttr functions, ModuleOp module,
                            function_ref<void(func::FuncOp)> visit) {
  llvm::SmallDenseSet<Operation *> seen;
  (void)mapFunctions(functions, functions.getType(), functions.getLanes(),
                     [&](FlatSymbolRefAttr ref) -> FailureOr<FlatSymbolRefAttr> {
                       auto function = module.lookupSymbol<func::FuncOp>(ref.getAttr());
                       if (function && seen.insert(function).second)
                         visit(function);
                       return ref;
                     });
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
  fns.offset = resolve(functions.getOffset());
  fns.offsetStab = resolve(functions.getOffsetStab());
  fns.score = resolve(functions.getScore());
  fns.feature = resolve(functions.getFeature());
  fns.mask = resolve(functions.getMask());
  fns.phase = resolve(functions.getPhase());
  fns.numeratorDs = resolve(functions.getNumeratorDs());
  fns.denominatorDs = resolve(functions.getDenominatorDs());
  fns.scoreDs = resolve(functions.getScoreDs());
  fns.featureDx = resolve(functions.getFeatureDx());
  // One entry per normalizer param (null without a summed denominator) and
  // score param.
  ScoreOp score = kernel.getScoreOp();
  unsigned numNormalizerParams = kernel.getNormalizerOp().getNumParams();
  fns.numeratorDp = resolveAll(functions.getNumeratorDp(), numNormalizerParams);
  fns.denominatorDp = resolveAll(functions.getDenominatorDp(), numNormalizerParams);
  fns.offsetDp = resolveAll(functions.getOffsetDp(), numNormalizerParams);
  fns.scoreDp = resolveAll(functions.getScoreDp(), score ? score.getNumParams() : 0);
  if (ArrayAttr grads = functions.getTableGrads())
    for (auto grad : grads.getAsRange<TableGradAttr>())
      fns.tableGrads.push_back({grad.getRole(), static_cast<unsigned>(grad.getInput()),
                                resolve(grad.getDerivative()), resolve(grad.getPosition())});
  return fns;
}
