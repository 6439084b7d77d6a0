//===- AttnOps.cpp - attn dialect ops: syntax and verifiers ---------------===//
#include "dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <charconv>
#include <cmath>

using namespace mlir;
using namespace mlir::attn;

#define GET_OP_CLASSES
#include "dialect/AttnOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

namespace {
/// One expected block argument of a scalar region: its role (for messages), the
/// name a block header gives it, and its type; a null type means "the region's
/// float type".
struct ExpectedArg {
  std::string role;
  std::string name;
  Type type;
};
} // namespace

/// The four indices every region but the feature map sees, in this order; a row
/// offset (one per query row) sees all but the key index.
static SmallVector<ExpectedArg> indexArgs(MLIRContext *ctx, bool withKey = true) {
  Type index = IndexType::get(ctx);
  SmallVector<ExpectedArg> args{{"the batch index", "b", index},
                                {"the head index", "h", index},
                                {"the query index", "i", index}};
  if (withKey)
    args.push_back({"the key index", "j", index});
  return args;
}

/// The block header a region with `expected` arguments is written with, e.g.
/// `^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index)`.
static std::string blockHeader(ArrayRef<ExpectedArg> expected, Type floatType) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "^bb0(";
  llvm::interleaveComma(expected, os, [&](const ExpectedArg &a) {
    os << "%" << a.name << ": " << (a.type ? a.type : floatType);
  });
  os << ")";
  return text;
}

static bool isScalarType(Type type) {
  return type.isIntOrIndexOrFloat();
}

/// Verifies that `region` is one block of side-effect-free scalar arith/math ops
/// (and, with `readsInputs`, attn.read ops) taking `expected` arguments and ending
/// in attn.yield; returns the float type, the type of the first argument whose
/// expected type is null.
static FailureOr<Type> verifyRegionBody(Operation *owner, Region &region,
                                        StringRef regionName,
                                        ArrayRef<ExpectedArg> expected, bool readsInputs) {
  if (region.empty())
    return owner->emitOpError() << regionName << " region must not be empty";
  Block &block = region.front();
  if (block.getNumArguments() != expected.size()) {
    std::string roles;
    llvm::raw_string_ostream os(roles);
    llvm::interleaveComma(expected, os, [&](const ExpectedArg &a) { os << a.role; });
    // The header to write, in the region's float type where it has one.
    Type floatType = Float32Type::get(owner->getContext());
    for (auto [want, arg] : llvm::zip(expected, block.getArguments()))
      if (!want.type && isa<FloatType>(arg.getType())) {
        floatType = arg.getType();
        break;
      }
    return owner->emitOpError()
           << regionName << " region must take " << expected.size() << " arguments ("
           << os.str() << "), got " << block.getNumArguments() << "; write "
           << blockHeader(expected, floatType);
  }
  Type floatType;
  for (auto [index, arg] : llvm::enumerate(block.getArguments())) {
    const ExpectedArg &want = expected[index];
    if (want.type) {
      if (arg.getType() != want.type)
        return owner->emitOpError()
               << regionName << " region argument #" << index << " (" << want.role
               << ") must be " << want.type << ", got " << arg.getType();
      continue;
    }
    if (!floatType) {
      if (!isa<FloatType>(arg.getType()))
        return owner->emitOpError()
               << regionName << " region argument #" << index << " (" << want.role
               << ") must be a float type, got " << arg.getType();
      floatType = arg.getType();
      continue;
    }
    if (arg.getType() != floatType)
      return owner->emitOpError()
             << regionName << " region argument #" << index << " (" << want.role
             << ") must have the score type " << floatType << ", got "
             << arg.getType();
  }

  if (block.empty() || !isa<YieldOp>(block.back()))
    return owner->emitOpError() << regionName << " region must end in attn.yield";
  for (Operation &op : block.without_terminator()) {
    if (isa<YieldOp>(op))
      return op.emitOpError() << "must be the last op of the " << regionName << " region";
    if (isa<ReadOp>(op)) {
      if (!readsInputs)
        return op.emitOpError() << "reads a tensor input in the " << regionName
                                << " region, which sees no indices to read it at";
      continue;
    }
    // The most specific reason first: control flow and side effects get their
    // own message (and a hint), any other foreign op the general one.
    if (isa<RegionBranchOpInterface>(op))
      return op.emitOpError() << "is control flow, which is not allowed in the "
                              << regionName << " region; use arith.select";
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if ((effects && !effects.hasNoEffect()) || isa<CallOpInterface>(op))
      return op.emitOpError() << "has side effects, which are not allowed in the "
                              << regionName << " region";
    if (!isa_and_nonnull<arith::ArithDialect, math::MathDialect>(op.getDialect()))
      return op.emitOpError() << "is not allowed in the " << regionName
                              << " region of '" << owner->getName()
                              << "': regions hold scalar arith and math ops"
                              << (readsInputs ? " and attn.read" : "") << " only";
    // A NaN constant only makes every weight and gradient it reaches NaN. An infinity
    // is a bound to compare with (an additive mask's -inf test); added, multiplied or
    // exponentiated it makes a row's weights ∞/∞ = NaN.
    if (auto constant = dyn_cast<arith::ConstantOp>(op))
      if (auto value = dyn_cast<FloatAttr>(constant.getValue())) {
        if (value.getValue().isNaN())
          return op.emitOpError() << "is NaN in the " << regionName
                                  << " region; expected a number (a NaN constant makes every "
                                     "weight and gradient it reaches NaN)";
        if (value.getValue().isInfinity())
          for (Operation *user : constant->getUsers())
            if (!isa<arith::CmpFOp>(user))
              return op.emitOpError()
                     << "is " << (value.getValue().isNegative() ? "-" : "+")
                     << "infinity in the " << regionName << " region and used by '"
                     << user->getName()
                     << "'; expected a finite number (an infinite constant may only be "
                        "compared with)";
      }
    for (Type type : llvm::concat<Type>(op.getOperandTypes(), op.getResultTypes()))
      if (!isScalarType(type))
        return op.emitOpError() << "uses " << type << " in the " << regionName
                                << " region; only scalar values are allowed";
  }

  return floatType;
}

/// verifyRegionBody, for a region that yields one `yieldType` (null: the float type).
static LogicalResult verifyScalarRegion(Operation *owner, Region &region,
                                        StringRef regionName,
                                        ArrayRef<ExpectedArg> expected,
                                        Type yieldType, bool readsInputs = true) {
  FailureOr<Type> floatType = verifyRegionBody(owner, region, regionName, expected, readsInputs);
  if (failed(floatType))
    return failure();
  auto yield = cast<YieldOp>(region.front().back());
  if (yield.getValues().size() != 1)
    return yield.emitOpError() << "in the " << regionName << " region must yield one value, got "
                               << yield.getValues().size()
                               << " (only a normalizer's shared region yields several)";
  Type want = yieldType ? yieldType : *floatType;
  if (yield.getValue().getType() != want)
    return yield.emitOpError() << "in the " << regionName << " region must yield "
                               << want << ", got " << yield.getValue().getType();
  return success();
}

/// The symbol name of `op` (an attn.normalizer, score, mask or kernel) is written
/// into the artifact's manifest as one whitespace-separated token: it must be an
/// MLIR bare identifier, which the printer also writes without quotes.
static LogicalResult verifySymbolName(Operation *op) {
  StringRef name = SymbolTable::getSymbolName(op).getValue();
  bool bare = !name.empty() && (llvm::isAlpha(name.front()) || name.front() == '_') &&
              llvm::all_of(name, [](char c) {
                return llvm::isAlnum(c) || c == '_' || c == '$' || c == '.';
              });
  if (bare)
    return success();
  std::string shown;
  llvm::raw_string_ostream os(shown);
  llvm::printEscapedString(name, os);
  return op->emitOpError() << "symbol name \"" << shown
                           << "\" cannot be written into the artifact's manifest; expected "
                              "a letter or '_' followed by letters, digits, '_', '$' or '.'";
}

/// Param, weight and tensor-input names become manifest tokens and the keys of the
/// Python API (attn.Kernel.param_names, nn.ParameterDict): letters, digits and '_',
/// not starting with a digit.
static LogicalResult verifyValueName(Operation *op, StringRef role, StringRef name) {
  if (!name.empty() && !llvm::isDigit(name.front()) &&
      llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; }))
    return success();
  std::string shown;
  llvm::raw_string_ostream os(shown);
  llvm::printEscapedString(name, os);
  return op->emitOpError() << role << " name \"" << shown
                           << "\" is not an identifier; expected letters, digits and '_', "
                              "not starting with a digit";
}

/// A number the artifact's manifest and the kernels can hold: not NaN or infinite.
static LogicalResult verifyFinite(Operation *op, const Twine &what, double value) {
  if (std::isfinite(value))
    return success();
  return op->emitOpError() << what << " is "
                           << (std::isnan(value) ? "NaN" : value > 0 ? "+infinity" : "-infinity")
                           << "; expected a finite number";
}

static LogicalResult verifyParams(Operation *op, ArrayAttr names,
                                  ArrayRef<double> inits) {
  if (names.size() != inits.size())
    return op->emitOpError() << "declares " << names.size() << " param names but "
                             << inits.size() << " initial values";
  llvm::StringSet<> seen;
  for (auto [attr, init] : llvm::zip(names, inits)) {
    StringRef name = cast<StringAttr>(attr).getValue();
    if (failed(verifyValueName(op, "param", name)) ||
        failed(verifyFinite(op, "the initial value of param '" + name + "'", init)))
      return failure();
    if (!seen.insert(name).second)
      return op->emitOpError() << "declares param '" << name << "' twice";
  }
  return success();
}

static SmallVector<ExpectedArg> paramArgs(ArrayAttr names) {
  SmallVector<ExpectedArg> args;
  for (Attribute name : names)
    args.push_back({"param '" + cast<StringAttr>(name).getValue().str() + "'",
                    cast<StringAttr>(name).getValue().str(), Type()});
  return args;
}

/// `params(name = init, ...)`, optional.
static ParseResult parseParams(OpAsmParser &parser, OperationState &result,
                               StringAttr namesAttrName, StringAttr initsAttrName) {
  SmallVector<Attribute> names;
  SmallVector<double> inits;
  if (succeeded(parser.parseOptionalKeyword("params"))) {
    if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
          std::string name;
          double init;
          if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
              parser.parseFloat(init))
            return failure();
          names.push_back(parser.getBuilder().getStringAttr(name));
          inits.push_back(init);
          return success();
        }))
      return failure();
  }
  result.addAttribute(namesAttrName, parser.getBuilder().getArrayAttr(names));
  result.addAttribute(initsAttrName, parser.getBuilder().getDenseF64ArrayAttr(inits));
  return success();
}

/// Prints the shortest decimal that reads back as `value` (1.0e-06, not
/// 9.9999999999999995E-7), always with a '.' so it lexes as a float literal.
static void printFloatValue(OpAsmPrinter &p, double value) {
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, error == std::errc() ? end : buffer);
  if (text.find_first_of(".ein") == std::string::npos)
    text += ".0";
  else if (text.find('.') == std::string::npos && text.find('e') != std::string::npos)
    text.insert(text.find('e'), ".0");
  if (text.find_first_of("in") != std::string::npos) // inf, nan: MLIR's own spelling
    return p.printFloat(llvm::APFloat(value));
  p << text;
}

static void printParams(OpAsmPrinter &p, ArrayAttr names, ArrayRef<double> inits) {
  if (names.empty())
    return;
  p << " params(";
  llvm::interleaveComma(llvm::zip(names, inits), p, [&](auto pair) {
    p.printKeywordOrString(cast<StringAttr>(std::get<0>(pair)).getValue());
    p << " = ";
    printFloatValue(p, std::get<1>(pair));
  });
  p << ")";
}


/// Names region arguments after their roles (%s, %i, %j, then the params) so
/// printed IR reads like the source a user wrote.
static void nameRegionArguments(Region &region, ArrayRef<StringRef> leading,
                                ArrayAttr paramNames, OpAsmSetValueNameFn setName) {
  if (region.empty())
    return;
  Block &block = region.front();
  for (auto [index, arg] : llvm::enumerate(block.getArguments())) {
    if (index < leading.size())
      setName(arg, leading[index]);
    else if (paramNames && index - leading.size() < paramNames.size())
      setName(arg, cast<StringAttr>(paramNames[index - leading.size()]).getValue());
  }
}

//===----------------------------------------------------------------------===//
// NormalizerOp
//===----------------------------------------------------------------------===//

void NormalizerOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setName) {
  if (&region == &getOffset())
    return nameRegionArguments(region, {"b", "h", "i"}, getParamNames(), setName);
  nameRegionArguments(region, {"s", "b", "h", "i", "j"}, getParamNames(), setName);
  // The shared values, after the params: %v0, %v1, ... (their header's names).
  unsigned first = 5 + getNumParams();
  if (&region == &getShared() || region.empty() || region.front().getNumArguments() <= first)
    return;
  for (BlockArgument arg : region.front().getArguments().drop_front(first))
    setName(arg, "v" + std::to_string(arg.getArgNumber() - first));
}

Type NormalizerOp::getScalarType() {
  Region &num = getNumerator();
  if (num.empty() || num.front().getNumArguments() == 0)
    return {};
  return num.front().getArgument(0).getType();
}

ParseResult NormalizerOp::parse(OpAsmParser &parser, OperationState &result) {
  StringAttr symName;
  MLIRContext *ctx = parser.getContext();
  if (parser.parseSymbolName(symName, getSymNameAttrName(result.name), result.attributes) ||
      parseParams(parser, result, getParamNamesAttrName(result.name),
                  getParamInitsAttrName(result.name)) ||
      parser.parseOptionalAttrDictWithKeyword(result.attributes) || parser.parseLBrace())
    return failure();
  Region *numerator = result.addRegion();
  Region *denominator = result.addRegion();
  Region *offset = result.addRegion();
  Region *shared = result.addRegion();
  if ((succeeded(parser.parseOptionalKeyword("shared")) && parser.parseRegion(*shared)) ||
      parser.parseKeyword("numerator") || parser.parseRegion(*numerator) ||
      parser.parseKeyword("denominator"))
    return failure();

  DenominatorKind kind = DenominatorKind::Sum;
  double value;
  if (succeeded(parser.parseOptionalKeyword("constant"))) {
    kind = DenominatorKind::Constant;
    if (parser.parseFloat(value))
      return failure();
    result.addAttribute(getDenominatorConstantAttrName(result.name),
                        parser.getBuilder().getF64FloatAttr(value));
  } else if (succeeded(parser.parseOptionalKeyword("count"))) {
    kind = DenominatorKind::Count;
  } else if (succeeded(parser.parseOptionalKeyword("log_survival"))) {
    kind = DenominatorKind::LogSurvival;
    if (parser.parseRegion(*denominator))
      return failure();
    if (succeeded(parser.parseOptionalKeyword("left_over"))) {
      if (parser.parseKeyword("current", ": the left-over weight goes to the value at the "
                                         "query's position (`left_over current`)"))
        return failure();
      result.addAttribute(getLeftOverToCurrentAttrName(result.name),
                          parser.getBuilder().getUnitAttr());
    }
  } else if (succeeded(parser.parseOptionalKeyword("threshold"))) {
    kind = DenominatorKind::Threshold;
    if (parser.parseFloat(value))
      return failure();
    result.addAttribute(getDenominatorConstantAttrName(result.name),
                        parser.getBuilder().getF64FloatAttr(value));
  } else {
    if (succeeded(parser.parseOptionalKeyword("epsilon"))) {
      if (parser.parseFloat(value))
        return failure();
      result.addAttribute(getEpsilonAttrName(result.name),
                          parser.getBuilder().getF64FloatAttr(value));
    }
    if (succeeded(parser.parseOptionalKeyword("sum"))) {
      result.addAttribute(getSumOfNumeratorAttrName(result.name),
                          parser.getBuilder().getUnitAttr());
    } else {
      OptionalParseResult region = parser.parseOptionalRegion(*denominator);
      if (!region.has_value())
        return parser.emitError(parser.getCurrentLocation(),
                                "expected a denominator region, or `sum` to sum the numerator");
      if (failed(*region))
        return failure();
    }
  }
  result.addAttribute(getDenominatorKindAttrName(result.name),
                      DenominatorKindAttr::get(ctx, kind));
  if (succeeded(parser.parseOptionalKeyword("offset")) && parser.parseRegion(*offset))
    return failure();
  return parser.parseRBrace();
}

void NormalizerOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  printParams(p, getParamNames(), getParamInits());
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(),
      {getSymNameAttrName(), getParamNamesAttrName(), getParamInitsAttrName(),
       getDenominatorKindAttrName(), getDenominatorConstantAttrName(),
       getEpsilonAttrName(), getSumOfNumeratorAttrName(), getLeftOverToCurrentAttrName()});
  p << " {";
  p.increaseIndent();
  p.printNewline();
  if (!getShared().empty()) {
    p << "shared ";
    p.printRegion(getShared());
    p.printNewline();
  }
  p << "numerator ";
  p.printRegion(getNumerator());
  p.printNewline();
  p << "denominator ";
  switch (getDenominatorKind()) {
  case DenominatorKind::Constant:
    p << "constant ";
    printFloatValue(p, getDenominatorConstant()->convertToDouble());
    break;
  case DenominatorKind::Count:
    p << "count";
    break;
  case DenominatorKind::LogSurvival:
    p << "log_survival ";
    p.printRegion(getDenominator());
    if (getLeftOverToCurrent())
      p << " left_over current";
    break;
  case DenominatorKind::Threshold:
    p << "threshold ";
    printFloatValue(p, getDenominatorConstant()->convertToDouble());
    break;
  case DenominatorKind::Sum:
    if (auto eps = getEpsilon()) {
      p << "epsilon ";
      printFloatValue(p, eps->convertToDouble());
      p << ' ';
    }
    if (getSumOfNumerator())
      p << "sum";
    else
      p.printRegion(getDenominator());
    break;
  }
  if (hasOffsetRegion()) {
    p.printNewline();
    p << "offset ";
    p.printRegion(getOffset());
  }
  p.decreaseIndent();
  p.printNewline();
  p << "}";
}

LogicalResult NormalizerOp::requireExpanded() {
  if (!hasShortForms())
    return success();
  return emitOpError() << "is written with "
                       << (getShared().empty() ? "`denominator sum`" : "a shared region")
                       << ", which this pass does not read; run attn-expand-shared-regions "
                          "first";
}

/// The row offset region: (b, h, i, params...) -> the normalizer's float type, after a
/// summed denominator without epsilon.
LogicalResult NormalizerOp::verifyOffset() {
  if (getDenominatorKind() != DenominatorKind::Sum)
    return emitOpError() << "an offset applies to a summed denominator (C_i = β + Σ_j h), "
                            "not to a "
                         << stringifyDenominatorKind(getDenominatorKind()) << " denominator";
  if (getEpsilon())
    return emitOpError("epsilon is a constant row offset; write either epsilon or an offset "
                       "region, not both");
  SmallVector<ExpectedArg> args = indexArgs(getContext(), /*withKey=*/false);
  args.append(paramArgs(getParamNames()));
  if (failed(verifyScalarRegion(*this, getOffset(), "offset", args, getScalarType())))
    return failure();
  for (BlockArgument arg : getOffset().front().getArguments().drop_front(3))
    if (arg.getType() != getScalarType())
      return emitOpError() << "offset region argument #" << arg.getArgNumber()
                           << " (a param) must have the score type " << getScalarType()
                           << ", got " << arg.getType();
  return success();
}

LogicalResult NormalizerOp::verify() {
  if (failed(verifySymbolName(*this)) ||
      failed(verifyParams(*this, getParamNames(), getParamInits())))
    return failure();
  if (auto constant = getDenominatorConstant();
      constant && failed(verifyFinite(*this, "the constant denominator",
                                      constant->convertToDouble())))
    return failure();
  if (auto epsilon = getEpsilon();
      epsilon && failed(verifyFinite(*this, "epsilon", epsilon->convertToDouble())))
    return failure();
  SmallVector<ExpectedArg> args{{"the score", "s", Type()}};
  args.append(indexArgs(getContext()));
  args.append(paramArgs(getParamNames()));
  // The numerator and the denominator take the shared values after the params.
  SmallVector<ExpectedArg> withShared(args);
  if (!getShared().empty()) {
    if (failed(verifyRegionBody(*this, getShared(), "shared", args, /*readsInputs=*/true)))
      return failure();
    auto yield = cast<YieldOp>(getShared().front().back());
    if (yield.getValues().empty())
      return yield.emitOpError("in the shared region must yield at least one value");
    for (auto [index, type] : llvm::enumerate(yield.getValues().getTypes()))
      withShared.push_back(
          {"shared value #" + std::to_string(index), "v" + std::to_string(index), type});
  }
  if (failed(verifyScalarRegion(*this, getNumerator(), "numerator", withShared, Type())))
    return failure();
  if (!getShared().empty() &&
      getShared().front().getArgument(0).getType() != getScalarType())
    return emitOpError() << "shared region computes in "
                         << getShared().front().getArgument(0).getType()
                         << " but the numerator region in " << getScalarType();

  if (getDenominatorKind() == DenominatorKind::Threshold) {
    if (!getDenominatorConstant())
      return emitOpError("a threshold denominator needs the value c of Σ_j w_ij = c");
    if (getDenominatorConstant()->convertToDouble() <= 0.0)
      return emitOpError() << "a threshold denominator's c must be > 0 (Σ_j g(s_ij - τ_i) = c "
                              "with g >= 0), got "
                           << getDenominatorConstant()->convertToDouble();
  }
  switch (getDenominatorKind()) {
  case DenominatorKind::Sum:
    if (getDenominatorConstant())
      return emitOpError("a summed denominator takes no constant value");
    if (getSumOfNumerator()) {
      if (!getDenominator().empty())
        return emitOpError("`denominator sum` sums the numerator and takes no region; "
                           "write either `denominator sum` or a denominator region");
      break;
    }
    if (getDenominator().empty())
      return emitOpError("a summed denominator needs a region, or `denominator sum` to sum "
                         "the numerator");
    if (failed(verifyScalarRegion(*this, getDenominator(), "denominator", withShared, Type())))
      return failure();
    if (getDenominator().front().getArgument(0).getType() != getScalarType())
      return emitOpError() << "denominator region computes in "
                           << getDenominator().front().getArgument(0).getType()
                           << " but the numerator region in " << getScalarType();
    break;
  case DenominatorKind::Constant:
    if (!getDenominatorConstant())
      return emitOpError("a constant denominator needs a value");
    if (getDenominatorConstant()->convertToDouble() == 0.0)
      return emitOpError("a constant denominator must not be 0");
    [[fallthrough]];
  case DenominatorKind::Threshold:
  case DenominatorKind::Count:
    if (getSumOfNumerator())
      return emitOpError() << "sum_of_numerator applies to a summed denominator, not to a "
                           << stringifyDenominatorKind(getDenominatorKind()) << " denominator";
    if (!getDenominator().empty())
      return emitOpError() << "a " << stringifyDenominatorKind(getDenominatorKind())
                           << " denominator takes no region";
    if (getEpsilon())
      return emitOpError("epsilon applies to a summed denominator only");
    break;
  case DenominatorKind::LogSurvival:
    if (getDenominatorConstant() || getEpsilon() || getSumOfNumerator())
      return emitOpError("a log_survival denominator takes a region only (no constant, "
                         "epsilon or `sum`)");
    if (getDenominator().empty())
      return emitOpError("a log_survival denominator needs a region yielding the pair's "
                         "log-survival d(s) <= 0");
    if (failed(verifyScalarRegion(*this, getDenominator(), "log_survival", withShared, Type())))
      return failure();
    if (getDenominator().front().getArgument(0).getType() != getScalarType())
      return emitOpError() << "log_survival region computes in "
                           << getDenominator().front().getArgument(0).getType()
                           << " but the numerator region in " << getScalarType();
    break;
  }
  if (getLeftOverToCurrent() && getDenominatorKind() != DenominatorKind::LogSurvival)
    return emitOpError() << "left_over_to_current applies to a log_survival denominator "
                            "(the weight a scan leaves), not to a "
                         << stringifyDenominatorKind(getDenominatorKind()) << " denominator";
  if (hasOffsetRegion() && failed(verifyOffset()))
    return failure();
  // The linear-time form depends on the score and mask too, so only a kernel has it.
  if (getAlgorithm() == Algorithm::Kernelised)
    return emitOpError("algorithm kernelised belongs to an attn.kernel (it depends on the "
                       "score and mask); a normalizer is online, plain or implicit");
  return success();
}

//===----------------------------------------------------------------------===//
// ScoreOp
//===----------------------------------------------------------------------===//

void ScoreOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setName) {
  if (&region == &getFeature())
    return nameRegionArguments(region, {"x"}, ArrayAttr(), setName);
  nameRegionArguments(region, {"s", "b", "h", "i", "j"}, getParamNames(), setName);
}

Type ScoreOp::getScalarType() {
  for (Region *region : {&getMod(), &getFeature()})
    if (!region->empty() && region->front().getNumArguments() != 0)
      return region->front().getArgument(0).getType();
  return {};
}

/// `weights(name: 64x64 = identity, v: 64 = 0.5)`, optional.
static ParseResult parseWeights(OpAsmParser &parser, OperationState &result) {
  if (failed(parser.parseOptionalKeyword("weights")))
    return success();
  Builder &builder = parser.getBuilder();
  SmallVector<Attribute> names, shapes, inits;
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
        std::string name;
        SmallVector<int64_t> shape;
        if (parser.parseKeywordOrString(&name) || parser.parseColon() ||
            parser.parseDimensionList(shape, /*allowDynamic=*/false,
                                      /*withTrailingX=*/false) ||
            parser.parseEqual())
          return failure();
        names.push_back(builder.getStringAttr(name));
        shapes.push_back(builder.getDenseI64ArrayAttr(shape));
        if (succeeded(parser.parseOptionalKeyword("identity"))) {
          inits.push_back(builder.getStringAttr("identity"));
          return success();
        }
        double fill;
        if (parser.parseFloat(fill))
          return failure();
        inits.push_back(builder.getF64FloatAttr(fill));
        return success();
      }))
    return failure();
  result.addAttribute(ScoreOp::getWeightNamesAttrName(result.name), builder.getArrayAttr(names));
  result.addAttribute(ScoreOp::getWeightShapesAttrName(result.name), builder.getArrayAttr(shapes));
  result.addAttribute(ScoreOp::getWeightInitsAttrName(result.name), builder.getArrayAttr(inits));
  return success();
}

ArrayRef<int64_t> ScoreOp::getWeightShape(unsigned index) {
  return cast<DenseI64ArrayAttr>((*getWeightShapes())[index]).asArrayRef();
}

int64_t ScoreOp::getWeightSize(unsigned index) {
  int64_t size = 1;
  for (int64_t extent : getWeightShape(index))
    size *= extent;
  return size;
}

int64_t ScoreOp::getRequiredHeadDim() {
  if (getNumWeights() == 0)
    return 0;
  return getWeightShape(0).back(); // W [d x d] (bilinear), W_q [n x d] (additive)
}

/// The weights' attributes agree with each other, are well-formed, and their
/// names are distinct from each other and from the scalar params.
static LogicalResult verifyWeightDeclarations(ScoreOp op) {
  if (!op.getWeightNames() && !op.getWeightShapes() && !op.getWeightInits())
    return success();
  if (!op.getWeightNames() || !op.getWeightShapes() || !op.getWeightInits() ||
      op.getWeightShapes()->size() != op.getNumWeights() ||
      op.getWeightInits()->size() != op.getNumWeights())
    return op.emitOpError("weight_names, weight_shapes and weight_inits must be given "
                          "together, one entry per weight");
  llvm::StringSet<> seen;
  for (Attribute name : op.getParamNames())
    seen.insert(cast<StringAttr>(name).getValue());
  for (unsigned w = 0; w < op.getNumWeights(); ++w) {
    StringRef name = cast<StringAttr>((*op.getWeightNames())[w]).getValue();
    if (failed(verifyValueName(op, "weight", name)))
      return failure();
    if (!seen.insert(name).second)
      return op.emitOpError() << "declares '" << name << "' twice (params and weights share one namespace)";
    auto shape = dyn_cast<DenseI64ArrayAttr>((*op.getWeightShapes())[w]);
    if (!shape || shape.empty() || llvm::any_of(shape.asArrayRef(), [](int64_t e) { return e <= 0; }))
      return op.emitOpError() << "weight '" << name
                              << "' must have a non-empty shape of positive extents";
    Attribute init = (*op.getWeightInits())[w];
    auto kind = dyn_cast<StringAttr>(init);
    if (!isa<FloatAttr>(init) && !(kind && kind.getValue() == "identity"))
      return op.emitOpError() << "weight '" << name
                              << "' must be initialised with a number or 'identity'";
    if (auto fill = dyn_cast<FloatAttr>(init);
        fill && failed(verifyFinite(op, "the initial value of weight '" + name + "'",
                                    fill.getValueAsDouble())))
      return failure();
    if (kind && shape.size() != 2)
      return op.emitOpError() << "weight '" << name << "': 'identity' needs a 2-D weight, got "
                              << shape.size() << "-D";
  }
  return success();
}

/// The weights a contraction needs: shapes in terms of d and `hidden`.
static LogicalResult verifyContractWeights(ScoreOp op) {
  auto shapeText = [&](unsigned w) {
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm::interleave(op.getWeightShape(w), os, "x");
    return text;
  };
  switch (op.getContract()) {
  case ContractKind::Bilinear: {
    if (op.getNumWeights() != 1)
      return op.emitOpError() << "contract bilinear needs one weight W of shape dxd "
                                 "(s = q·W·k), got "
                              << op.getNumWeights() << " weights";
    ArrayRef<int64_t> shape = op.getWeightShape(0);
    if (shape.size() != 2 || shape[0] != shape[1])
      return op.emitOpError() << "contract bilinear needs a square weight W of shape dxd, got "
                              << shapeText(0);
    return success();
  }
  case ContractKind::Additive: {
    int64_t hidden = op.getHiddenAttr().getInt();
    if (op.getNumWeights() != 3)
      return op.emitOpError() << "contract additive needs three weights W_q [" << hidden
                              << "xd], W_k [" << hidden << "xd] and v [" << hidden
                              << "] (s = v·tanh(W_q q + W_k k)), got " << op.getNumWeights()
                              << " weights";
    ArrayRef<int64_t> wq = op.getWeightShape(0), wk = op.getWeightShape(1),
                      v = op.getWeightShape(2);
    if (wq.size() != 2 || wq[0] != hidden)
      return op.emitOpError() << "weight W_q of contract additive must have shape " << hidden
                              << "xd (hidden x head dim), got " << shapeText(0);
    if (wk.size() != 2 || wk[0] != hidden || wk[1] != wq[1])
      return op.emitOpError() << "weight W_k of contract additive must have shape " << hidden
                              << "x" << wq[1] << " (the shape of W_q), got " << shapeText(1);
    if (v.size() != 1 || v[0] != hidden)
      return op.emitOpError() << "weight v of contract additive must have shape " << hidden
                              << ", got " << shapeText(2);
    return success();
  }
  case ContractKind::Dot:
  case ContractKind::ScaledDot:
    // A learnable projection before the feature map: s = φ(W q)·φ(W k).
    if (op.getNumWeights() == 0)
      return success();
    if (!op.hasFeatureMap())
      return op.emitOpError() << "a weight on contract " << stringifyContractKind(op.getContract())
                              << " projects q and k before a feature map, but there is no "
                                 "feature region";
    if (op.getNumWeights() != 1 || op.getWeightShape(0).size() != 2)
      return op.emitOpError() << "a projection before the feature map takes one weight W of "
                                 "shape mxd (s = φ(W q)·φ(W k)), got "
                              << op.getNumWeights() << " weights, the first of shape "
                              << shapeText(0);
    return success();
  case ContractKind::Cosine:
    if (op.getNumWeights() != 0)
      return op.emitOpError() << "weights apply to contracts bilinear, additive, and dot or "
                                 "scaled_dot with a feature map, not cosine";
    return success();
  }
  llvm_unreachable("unknown contract kind");
}

ParseResult ScoreOp::parse(OpAsmParser &parser, OperationState &result) {
  StringAttr symName;
  MLIRContext *ctx = parser.getContext();
  if (parser.parseSymbolName(symName, getSymNameAttrName(result.name), result.attributes) ||
      parser.parseKeyword("contract"))
    return failure();
  llvm::SMLoc kindLoc = parser.getCurrentLocation();
  std::string kindName;
  if (parser.parseKeywordOrString(&kindName))
    return failure();
  std::optional<ContractKind> kind = symbolizeContractKind(kindName);
  if (!kind)
    return parser.emitError(kindLoc)
           << "unknown contract '" << kindName
           << "'; expected dot, scaled_dot, bilinear, additive or cosine";
  result.addAttribute(getContractAttrName(result.name), ContractKindAttr::get(ctx, *kind));

  double scale;
  if (succeeded(parser.parseOptionalKeyword("scale"))) {
    if (parser.parseFloat(scale))
      return failure();
    result.addAttribute(getScaleAttrName(result.name),
                        parser.getBuilder().getF64FloatAttr(scale));
  }
  int64_t hidden;
  if (succeeded(parser.parseOptionalKeyword("hidden"))) {
    if (parser.parseInteger(hidden))
      return failure();
    result.addAttribute(getHiddenAttrName(result.name),
                        parser.getBuilder().getI64IntegerAttr(hidden));
  }
  if (llvm::SMLoc at = parser.getCurrentLocation();
      succeeded(parser.parseOptionalKeyword("row_inputs")))
    return parser.emitError(at)
           << "row_inputs(...) is retired: declare the input as a tensor, e.g. "
              "`attn.input @p : tensor<?x?x?xf32>` (learnable: `attn.input @p learnable : ...`), "
              "and read it in the mod region with `attn.read @p[%b, %h, %i] : f32`";
  if (parseParams(parser, result, getParamNamesAttrName(result.name),
                  getParamInitsAttrName(result.name)) ||
      parseWeights(parser, result) ||
      parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  Region *feature = result.addRegion();
  Region *mod = result.addRegion();
  if (succeeded(parser.parseOptionalKeyword("feature")) && parser.parseRegion(*feature))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("mod")))
    return parser.parseRegion(*mod);
  return success();
}

void ScoreOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  p << " contract " << stringifyContractKind(getContract());
  if (auto scale = getScale()) {
    p << " scale ";
    printFloatValue(p, scale->convertToDouble());
  }
  if (auto hidden = getHidden())
    p << " hidden " << *hidden;
  printParams(p, getParamNames(), getParamInits());
  if (getNumWeights() != 0) {
    p << " weights(";
    for (unsigned w = 0; w < getNumWeights(); ++w) {
      if (w)
        p << ", ";
      p.printKeywordOrString(cast<StringAttr>((*getWeightNames())[w]).getValue());
      p << ": ";
      llvm::interleave(getWeightShape(w), p, "x");
      p << " = ";
      Attribute init = (*getWeightInits())[w];
      if (auto fill = dyn_cast<FloatAttr>(init))
        printFloatValue(p, fill.getValueAsDouble());
      else
        p << cast<StringAttr>(init).getValue();
    }
    p << ")";
  }
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(), {getSymNameAttrName(), getContractAttrName(), getScaleAttrName(),
                            getHiddenAttrName(), getParamNamesAttrName(),
                            getParamInitsAttrName(),
                            getWeightNamesAttrName(),
                            getWeightShapesAttrName(), getWeightInitsAttrName()});
  if (hasFeatureMap()) {
    p << " feature ";
    p.printRegion(getFeature());
  }
  if (hasMod()) {
    p << " mod ";
    p.printRegion(getMod());
  }
}

LogicalResult ScoreOp::verify() {
  if (failed(verifySymbolName(*this)) ||
      failed(verifyParams(*this, getParamNames(), getParamInits())))
    return failure();
  if (auto scale = getScale();
      scale && failed(verifyFinite(*this, "'scale'", scale->convertToDouble())))
    return failure();
  if (getScale() && getContract() != ContractKind::ScaledDot &&
      getContract() != ContractKind::Cosine && getContract() != ContractKind::Bilinear)
    return emitOpError() << "'scale' applies to contracts scaled_dot, cosine and bilinear only, not "
                         << stringifyContractKind(getContract());
  if (getContract() == ContractKind::Additive) {
    if (!getHidden())
      return emitOpError("contract additive needs 'hidden <n>', the width of "
                         "v·tanh(W_q q + W_k k)");
    if (int64_t hidden = getHiddenAttr().getInt(); hidden <= 0)
      return emitOpError() << "'hidden' must be positive, got " << hidden;
  } else if (getHidden()) {
    return emitOpError() << "'hidden' applies to contract additive only, not "
                         << stringifyContractKind(getContract());
  }
  if (hasFeatureMap()) {
    if (getContract() != ContractKind::Dot && getContract() != ContractKind::ScaledDot)
      return emitOpError() << "a feature map applies to dot and scaled_dot contracts only, not "
                           << stringifyContractKind(getContract());
    if (failed(verifyScalarRegion(*this, getFeature(), "feature", {{"a q or k entry", "x", Type()}},
                                  Type(), /*readsInputs=*/false)))
      return failure();
  }
  if (failed(verifyWeightDeclarations(*this)) || failed(verifyContractWeights(*this)))
    return failure();
  if (!hasMod()) {
    if (getNumParams() != 0)
      return emitOpError("declares params but has no mod region to use them");
    return success();
  }
  SmallVector<ExpectedArg> args{{"the score", "s", Type()}};
  args.append(indexArgs(getContext()));
  args.append(paramArgs(getParamNames()));
  if (failed(verifyScalarRegion(*this, getMod(), "mod", args, Type())))
    return failure();
  if (hasFeatureMap() && getFeature().front().getArgument(0).getType() !=
                             getMod().front().getArgument(0).getType())
    return emitOpError() << "feature region computes in "
                         << getFeature().front().getArgument(0).getType()
                         << " but the mod region in " << getMod().front().getArgument(0).getType();
  return success();
}

//===----------------------------------------------------------------------===//
// MaskOp
//===----------------------------------------------------------------------===//

void MaskOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setName) {
  nameRegionArguments(region, {"b", "h", "i", "j"}, ArrayAttr(), setName);
}

LogicalResult MaskOp::verify() {
  if (failed(verifySymbolName(*this)))
    return failure();
  return verifyScalarRegion(*this, getBody(), "mask", indexArgs(getContext()),
                            IntegerType::get(getContext(), 1));
}

//===----------------------------------------------------------------------===//
// KernelOp
//===----------------------------------------------------------------------===//

template <typename OpTy>
static OpTy lookupSymbol(Operation *from, FlatSymbolRefAttr ref) {
  if (!ref)
    return {};
  return SymbolTable::lookupNearestSymbolFrom<OpTy>(from, ref.getAttr());
}

NormalizerOp KernelOp::getNormalizerOp() {
  return lookupSymbol<NormalizerOp>(*this, getNormalizerAttr());
}
ScoreOp KernelOp::getScoreOp() { return lookupSymbol<ScoreOp>(*this, getScoreAttr()); }
MaskOp KernelOp::getMaskOp() { return lookupSymbol<MaskOp>(*this, getMaskAttr()); }

LogicalResult KernelOp::verify() { return verifySymbolName(*this); }

/// Reports a reference that names nothing, or names an op of another kind.
template <typename OpTy>
static LogicalResult verifyReference(KernelOp kernel, SymbolTableCollection &symbolTable,
                                     FlatSymbolRefAttr ref, StringRef role) {
  if (!ref)
    return success();
  Operation *target = symbolTable.lookupNearestSymbolFrom(kernel, ref.getAttr());
  if (!target)
    return kernel.emitOpError() << role << " " << ref << " does not name any symbol";
  if (!isa<OpTy>(target))
    return kernel.emitOpError() << role << " " << ref << " must name an '"
                                << OpTy::getOperationName() << "', but names a '"
                                << target->getName() << "'";
  return success();
}

/// Every function an #attn.functions names must be a function of the module.
static LogicalResult verifyFunctionReferences(KernelOp kernel, SymbolTableCollection &symbolTable) {
  if (!kernel.getFunctions())
    return success();
  WalkResult result = kernel.getFunctionsAttr().walk([&](FlatSymbolRefAttr ref) {
    Operation *target = symbolTable.lookupNearestSymbolFrom(kernel, ref.getAttr());
    if (target && isa<FunctionOpInterface>(target))
      return WalkResult::advance();
    kernel.emitOpError() << "functions name " << ref << ", which is not a function of the module";
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

LogicalResult KernelOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (failed(verifyReference<NormalizerOp>(*this, symbolTable, getNormalizerAttr(),
                                           "normalizer")) ||
      failed(verifyReference<ScoreOp>(*this, symbolTable, getScoreAttr(), "score")) ||
      failed(verifyReference<MaskOp>(*this, symbolTable, getMaskAttr(), "mask")) ||
      failed(verifyFunctionReferences(*this, symbolTable)))
    return failure();

  NormalizerOp normalizer = getNormalizerOp();
  // A float input is read in the kernel's float type (instances at other types
  // retype it with the regions).
  for (Operation *region : {normalizer.getOperation(), getScoreOp().getOperation(),
                            getMaskOp().getOperation()}) {
    if (!region)
      continue;
    WalkResult walk = region->walk([&](ReadOp read) {
      auto input = SymbolTable::lookupNearestSymbolFrom<InputOp>(read, read.getInputAttr());
      if (!input || !isa<FloatType>(input.getElementType()) ||
          input.getElementType() == normalizer.getScalarType())
        return WalkResult::advance();
      emitOpError() << "reads float input " << read.getInputAttr() << " of element type "
                    << input.getElementType() << " but computes in "
                    << normalizer.getScalarType()
                    << "; a float input has the kernel's float type";
      return WalkResult::interrupt();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  ScoreOp score = getScoreOp();
  if (!score)
    return success();
  if (Type scoreType = score.getScalarType();
      scoreType && scoreType != normalizer.getScalarType())
    return emitOpError() << "score " << getScoreAttr() << " computes in " << scoreType
                         << " but normalizer " << getNormalizerAttr() << " in "
                         << normalizer.getScalarType();
  llvm::StringSet<> normalizerParams;
  for (Attribute name : normalizer.getParamNames())
    normalizerParams.insert(cast<StringAttr>(name).getValue());
  SmallVector<Attribute> scoreNames(score.getParamNames().getValue());
  if (score.getWeightNames())
    llvm::append_range(scoreNames, score.getWeightNames()->getValue());
  for (Attribute name : scoreNames)
    if (normalizerParams.contains(cast<StringAttr>(name).getValue()))
      return emitOpError() << "param '" << cast<StringAttr>(name).getValue()
                           << "' is declared by both score " << getScoreAttr()
                           << " and normalizer " << getNormalizerAttr();
  return success();
}

//===----------------------------------------------------------------------===//
// InputOp, ReadOp and the table ops of the outlined functions
//===----------------------------------------------------------------------===//

/// Ranks an input may have (the ABI's attn_table holds up to ATTN_MAX_TABLE_RANK).
static constexpr int64_t kMaxInputRank = 4;

/// How dims(...) writes extent `entry`: a call dimension's name, the number, or '?'.
static std::string extentText(Attribute entry) {
  if (auto dim = dyn_cast<CallDimAttr>(entry))
    return stringifyCallDim(dim.getValue()).str();
  if (auto fixed = dyn_cast<IntegerAttr>(entry))
    return std::to_string(fixed.getInt());
  return "?";
}

// attn.input @NAME [learnable] [= FLOAT] : TYPE [dims(EXTENT, ...)] [attr-dict]
ParseResult InputOp::parse(OpAsmParser &parser, OperationState &result) {
  Builder &builder = parser.getBuilder();
  StringAttr name;
  if (parser.parseSymbolName(name, getSymNameAttrName(result.name), result.attributes))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("learnable")))
    result.addAttribute(getLearnableAttrName(result.name), builder.getUnitAttr());
  if (succeeded(parser.parseOptionalEqual())) {
    double init;
    if (parser.parseFloat(init))
      return failure();
    result.addAttribute(getInitAttrName(result.name), builder.getF64FloatAttr(init));
  }
  Type type;
  if (parser.parseColonType(type))
    return failure();
  result.addAttribute(getTypeAttrName(result.name), TypeAttr::get(type));
  if (succeeded(parser.parseOptionalKeyword("dims"))) {
    SmallVector<Attribute> dims;
    if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
          if (succeeded(parser.parseOptionalQuestion())) {
            dims.push_back(builder.getUnitAttr());
            return success();
          }
          int64_t fixed;
          OptionalParseResult number = parser.parseOptionalInteger(fixed);
          if (number.has_value()) {
            if (failed(*number))
              return failure();
            dims.push_back(builder.getI64IntegerAttr(fixed));
            return success();
          }
          SMLoc at = parser.getCurrentLocation();
          StringRef keyword;
          if (parser.parseOptionalKeyword(&keyword))
            return parser.emitError(at, "expected an extent: B, H, Hkv, Nq, Nk, ? or a number");
          std::optional<CallDim> dim = symbolizeCallDim(keyword);
          if (!dim)
            return parser.emitError(at) << "'" << keyword
                                        << "' is not a dimension of the call; expected B, H, "
                                           "Hkv, Nq, Nk, ? or a number";
          dims.push_back(CallDimAttr::get(builder.getContext(), *dim));
          return success();
        }))
      return failure();
    result.addAttribute(getDimsAttrName(result.name), builder.getArrayAttr(dims));
  }
  return parser.parseOptionalAttrDict(result.attributes);
}

void InputOp::print(OpAsmPrinter &p) {
  p << " ";
  p.printSymbolName(getSymName());
  if (getLearnable())
    p << " learnable";
  if (FloatAttr init = getInitAttr()) {
    p << " = ";
    printFloatValue(p, init.getValueAsDouble());
  }
  p << " : " << getType();
  if (ArrayAttr dims = getDimsAttr()) {
    p << " dims(";
    llvm::interleaveComma(dims, p, [&](Attribute entry) { p << extentText(entry); });
    p << ")";
  }
  p.printOptionalAttrDict((*this)->getAttrs(), {getSymNameAttrName(), getLearnableAttrName(),
                                                getInitAttrName(), getTypeAttrName(),
                                                getDimsAttrName()});
}

std::optional<CallDim> InputOp::getCallDim(int64_t d) {
  ArrayAttr dims = getDimsAttr();
  if (!dims)
    return std::nullopt;
  if (auto dim = dyn_cast<CallDimAttr>(dims[d]))
    return dim.getValue();
  return std::nullopt;
}

LogicalResult InputOp::verify() {
  // The name is a manifest token and the key of the Python API's inputs= dict.
  if (failed(verifyValueName(*this, "input", getSymName())))
    return failure();
  RankedTensorType type = getTensorType();
  if (type.getRank() < 1 || type.getRank() > kMaxInputRank)
    return emitOpError() << "must have rank 1 to " << kMaxInputRank << ", got " << type;
  for (int64_t extent : type.getShape())
    if (!ShapedType::isDynamic(extent) && extent < 1)
      return emitOpError() << "extents must be '?' or positive, got " << type;
  Type element = type.getElementType();
  bool integer = element.isSignlessInteger(8) || element.isSignlessInteger(32) ||
                 element.isSignlessInteger(64);
  if (!isa<FloatType>(element) && !integer)
    return emitOpError() << "elements must be a float type or i8, i32, i64, got " << element;
  if (getLearnable() && !isa<FloatType>(element))
    return emitOpError() << "is learnable but has element type " << element
                         << "; only float inputs have gradients";
  if (getInit() && !getLearnable())
    return emitOpError() << "has an initial value but is not learnable; only a learnable "
                            "input is created as a parameter (write 'learnable = FLOAT')";
  if (FloatAttr init = getInitAttr(); init && !std::isfinite(init.getValueAsDouble()))
    return emitOpError() << "has a non-finite initial value; expected a finite number";
  ArrayAttr dims = getDimsAttr();
  if (!dims)
    return success();
  if (static_cast<int64_t>(dims.size()) != type.getRank())
    return emitOpError() << "has " << dims.size() << " entries in dims(...) but its type "
                         << type << " has rank " << type.getRank() << "; one per dimension";
  for (auto [d, entry] : llvm::enumerate(dims)) {
    int64_t extent = type.getDimSize(d);
    std::string typeExtent = ShapedType::isDynamic(extent) ? "?" : std::to_string(extent);
    if (isa<CallDimAttr>(entry)) {
      if (ShapedType::isDynamic(extent))
        continue;
      return emitOpError() << "names dim " << d << " " << extentText(entry)
                           << " but its type fixes it to " << extent
                           << "; a named extent is '?' in the type, e.g. "
                           << "tensor<?x...> dims(" << extentText(entry) << ", ...)";
    }
    if (extentText(entry) == typeExtent)
      continue;
    return emitOpError() << "has extent " << extentText(entry) << " in dims(...) for dim " << d
                         << " but " << typeExtent << " in its type " << type
                         << "; a '?' or a number in dims(...) repeats the type's";
  }
  return success();
}

LogicalResult ReadOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  Operation *target = symbolTable.lookupNearestSymbolFrom(*this, getInputAttr());
  auto input = dyn_cast_or_null<InputOp>(target);
  if (!input)
    return emitOpError() << getInputAttr() << " must name an 'attn.input', but "
                         << (target ? "names a '" + target->getName().getStringRef().str() + "'"
                                    : std::string("names nothing"));
  if (static_cast<int64_t>(getIndices().size()) != input.getRank())
    return emitOpError() << "reads " << getInputAttr() << " of rank " << input.getRank()
                         << " with " << getIndices().size() << " indices; one index per dimension";
  if (getResult().getType() != input.getElementType())
    return emitOpError() << "yields " << getResult().getType() << " but " << getInputAttr()
                         << " holds " << input.getElementType();
  return success();
}

/// The shared checks of table_load and table_position: one index per dimension,
/// all scalar `index` or all vector<n x index>; `result` is the element type
/// (`element` null: index) in the same shape.
static LogicalResult verifyTableAccess(Operation *op, Value table, ValueRange indices,
                                       Type result, Type element) {
  auto memref = cast<MemRefType>(table.getType());
  if (static_cast<int64_t>(indices.size()) != memref.getRank())
    return op->emitOpError() << "takes one index per dimension of " << memref << ", got "
                             << indices.size();
  Type indexType = IndexType::get(op->getContext());
  Type first = indices.empty() ? indexType : indices.front().getType();
  auto lanes = dyn_cast<VectorType>(first);
  if (first != indexType && !(lanes && lanes.getRank() == 1 && lanes.getElementType() == indexType))
    return op->emitOpError() << "indices must be index or vector<n x index>, got " << first;
  for (Value index : indices)
    if (index.getType() != first)
      return op->emitOpError() << "indices must all have one type, got " << first << " and "
                               << index.getType();
  Type want = element ? element : indexType;
  if (lanes)
    want = VectorType::get(lanes.getShape(), want);
  if (result != want)
    return op->emitOpError() << "must yield " << want << ", got " << result;
  return success();
}

LogicalResult TableLoadOp::verify() {
  return verifyTableAccess(*this, getTable(), getIndices(), getResult().getType(),
                           getTable().getType().getElementType());
}

LogicalResult TablePositionOp::verify() {
  return verifyTableAccess(*this, getTable(), getIndices(), getResult().getType(), Type());
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

LogicalResult KernelFunctionsAttr::verify(function_ref<InFlightDiagnostic()> emitError, Type type,
                                          int64_t lanes, FlatSymbolRefAttr, FlatSymbolRefAttr,
                                          FlatSymbolRefAttr, FlatSymbolRefAttr, FlatSymbolRefAttr,
                                          FlatSymbolRefAttr, FlatSymbolRefAttr, FlatSymbolRefAttr,
                                          FlatSymbolRefAttr, FlatSymbolRefAttr, FlatSymbolRefAttr,
                                          FlatSymbolRefAttr, FlatSymbolRefAttr,
                                          ArrayAttr numeratorDp, ArrayAttr denominatorDp,
                                          ArrayAttr offsetDp, ArrayAttr scoreDp,
                                          ArrayAttr tableGrads) {
  if (!isa<FloatType>(type))
    return emitError() << "functions are instantiated at a float type, got " << type;
  if (lanes < 0)
    return emitError() << "lanes must be 0 (scalars) or a vector width, got " << lanes;
  for (ArrayAttr list : {numeratorDp, denominatorDp, offsetDp, scoreDp})
    if (list && !llvm::all_of(list, llvm::IsaPred<FlatSymbolRefAttr>))
      return emitError() << "derivative lists hold function symbols, got " << list;
  if (tableGrads && !llvm::all_of(tableGrads, llvm::IsaPred<TableGradAttr>))
    return emitError() << "table_grads holds #attn.table_grad entries, got " << tableGrads;
  return success();
}

LogicalResult TableGradAttr::verify(function_ref<InFlightDiagnostic()> emitError, TableGradRole,
                                    int64_t input, FlatSymbolRefAttr, FlatSymbolRefAttr) {
  if (input < 0)
    return emitError() << "input must be a position in the kernel's inputs, got " << input;
  return success();
}

LogicalResult EntryAttr::verify(function_ref<InFlightDiagnostic()> emitError, EntryRole role,
                                Type type, FlatSymbolRefAttr kernel) {
  if (!type.isF32() && !type.isF64())
    return emitError() << "an entry point's element type is f32 or f64 (the CPU entry points "
                          "of abi.h), got "
                       << type;
  return success();
}

LogicalResult CpuScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError, Type type,
                                      CpuVariant variant, int64_t headDim, int64_t lanes,
                                      int64_t rows, int64_t forwardKeys, int64_t backwardKeys,
                                      int64_t backwardRows) {
  if (!isa<FloatType>(type))
    return emitError() << "a CPU schedule is for a float element type, got " << type;
  if (variant == CpuVariant::Decode) {
    if (lanes <= 0 || !llvm::isPowerOf2_64(lanes))
      return emitError() << "a decode schedule needs lanes that are a power of two, got "
                         << lanes;
    if (headDim <= 0 || headDim % lanes != 0)
      return emitError() << "a decode schedule needs a head_dim that is a positive multiple of "
                            "lanes, got head_dim "
                         << headDim << " and lanes " << lanes;
    if (rows < 1)
      return emitError() << "a decode schedule needs rows >= 1 (the most query rows of a call "
                            "it serves), got "
                         << rows;
    if (forwardKeys <= 0 || forwardKeys % lanes != 0)
      return emitError() << "forward_keys must be a positive multiple of lanes (" << lanes
                         << "), got " << forwardKeys;
    if (backwardKeys || backwardRows)
      return emitError() << "a decode schedule has no backward (the tiled schedule of its head "
                            "dim serves it): expected no backward_keys or backward_rows";
    return success();
  }
  if (variant != CpuVariant::Tiled) {
    if (headDim || lanes || rows || forwardKeys || backwardKeys || backwardRows)
      return emitError() << "a " << stringifyCpuVariant(variant)
                         << " schedule takes no head_dim, lanes, rows or keys";
    return success();
  }
  // Row reductions and the key packing's transposes halve the lanes at each round.
  if (lanes <= 0 || !llvm::isPowerOf2_64(lanes))
    return emitError() << "a tiled schedule needs lanes that are a power of two, got " << lanes;
  if (headDim <= 0 || headDim % lanes != 0)
    return emitError() << "a tiled schedule needs a head_dim that is a positive multiple of "
                          "lanes, got head_dim "
                       << headDim << " and lanes " << lanes;
  for (auto [count, name] : {std::pair(rows, "rows"), std::pair(backwardRows, "backward_rows")})
    if (count < 1)
      return emitError() << "a tiled schedule needs " << name << " >= 1, got " << count;
  for (auto [keys, name] : {std::pair(forwardKeys, "forward_keys"),
                            std::pair(backwardKeys, "backward_keys")})
    if (keys <= 0 || keys % lanes != 0)
      return emitError() << name << " must be a positive multiple of lanes (" << lanes
                         << "), got " << keys;
  return success();
}

LogicalResult GpuScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      StringRef chip, Type type, int64_t headDim,
                                      int64_t blockM, int64_t blockN, int64_t numWarps,
                                      int64_t numStages, int64_t backwardBlockM,
                                      int64_t backwardBlockN, int64_t backwardNumWarps,
                                      int64_t backwardNumStages) {
  int version = 0;
  if (!chip.starts_with("sm_") || chip.drop_front(3).getAsInteger(10, version) || version < 80)
    return emitError() << "chip must be sm_XY with XY >= 80 (the Triton kernels' tensor cores), got '"
                       << chip << "'";
  if (!(type.isF16() || type.isBF16() || type.isF32()))
    return emitError() << "a GPU schedule is for storage type f16, bf16 or f32, got " << type;
  if (headDim <= 0)
    return emitError() << "head_dim must be positive, got " << headDim;
  auto powerOfTwo = [](int64_t n) { return n > 0 && (n & (n - 1)) == 0; };
  for (auto [tile, name] : {std::pair(blockM, "block_m"), std::pair(blockN, "block_n"),
                            std::pair(backwardBlockM, "backward_block_m"),
                            std::pair(backwardBlockN, "backward_block_n")})
    if (!powerOfTwo(tile) || tile < 16 || tile > 256)
      return emitError() << name << " must be a power of two from 16 to 256 (a tl.dot operand), got "
                         << tile;
  for (auto [warps, name] : {std::pair(numWarps, "num_warps"),
                             std::pair(backwardNumWarps, "backward_num_warps")})
    if (!powerOfTwo(warps) || warps > 16)
      return emitError() << name << " must be a power of two from 1 to 16, got " << warps;
  for (auto [stages, name] : {std::pair(numStages, "num_stages"),
                              std::pair(backwardNumStages, "backward_num_stages")})
    if (stages < 1 || stages > 8)
      return emitError() << name << " must be from 1 to 8, got " << stages;
  return success();
}
