//===- TritonEmitter.cpp - a kernel as a Python module of Triton kernels ---===//
#include "lib/Codegen/Triton/TritonEmitter.h"

#include "lib/Analysis/KernelSignature.h"
#include "lib/Analysis/MaskIntervals.h"
#include "lib/Analysis/NormalizerAnalysis.h"
#include "lib/Codegen/RowAlgorithm.h"
#include "lib/Transforms/ScalarFunctions.h"

#include "attn/abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace mlir::attn;

namespace {

/// The decode forward's tile of rows: a decode step's query rows (up to 16) of one
/// head, or of several heads of a GQA group together.
constexpr int64_t kDecodeBlockM = 16;
/// A scan's per-key-tile row states (BACKWARD_PLAN's tile_states), S and B.
constexpr llvm::StringLiteral kTileLogSurvival("TileLogSurvival"), kTileSuffix("TileSuffix");
/// Its key tile, warps and stages: the one of 32, 64 and 128 keys, 2, 4 and 8 warps that
/// ptxas fits without spills at d = 64 and 128 on sm_80 and sm_90 (bench/ptxas_report.py;
/// 64 keys spill at d = 128 on sm_80).
constexpr int64_t kDecodeBlockN = 32, kDecodeWarps = 4, kDecodeStages = 2;
/// The additive contraction's tiles, warps and stages, of every kernel (forward,
/// backward and decode alike): its tanh tile [BLOCK_M, BLOCK_N, kAdditiveHiddenChunk]
/// lives in registers, one chunk of the hidden columns at a time, so they do not grow
/// with n (bench/ptxas_report.py, docs/gpu.md).
constexpr int64_t kAdditiveBlock = 16, kAdditiveStages = 1, kAdditiveWarps = 4;
constexpr int64_t kAdditiveHiddenChunk = 16;
/// Up to this BLOCK_HIDDEN the tanh tile is one chunk: ptxas fits n = 32 in 255
/// registers without spills as one tile, and spills (at 168) as two chunks of 16.
constexpr int64_t kAdditiveOneChunk = 32;
/// The backward tiles of projected features (φ(W q)·φ(W k)), whose projected rows and
/// their float32 projections add to the dot kernels' registers: 32 x 32 keeps d = m = 64
/// bf16 without spills on sm_90 (64 x 64 spills on both chips; bench/ptxas_report.py).
constexpr int64_t kProjectedBackwardBlock = 32;

// --- scalar functions as @triton.jit functions -----------------------------------

/// A Python literal of `value`.
std::string floatLiteral(double value) {
  if (std::isnan(value))
    return "float(\"nan\")";
  if (std::isinf(value))
    return value > 0 ? "float(\"inf\")" : "float(\"-inf\")";
  std::string text = llvm::formatv("{0}", llvm::format("%.17g", value)).str();
  if (text.find_first_of(".e") == std::string::npos)
    text += ".0";
  return text;
}

/// The Triton dtype a region value computes in: the IR's own width, so that index
/// and i64 arithmetic is 64-bit as on the CPU path (absolute positions and their
/// products exceed 2^31).
std::string tritonType(Type type) {
  if (type.isF32())
    return "tl.float32";
  if (type.isF64())
    return "tl.float64";
  if (type.isF16())
    return "tl.float16";
  if (type.isBF16())
    return "tl.bfloat16";
  if (type.isIndex())
    return "tl.int64";
  assert(type.isSignlessInteger() && "regions compute in floats and signless integers");
  unsigned width = type.getIntOrFloatBitWidth();
  return width == 1 ? "tl.int1" : "tl.int" + std::to_string(width);
}

/// The bits of an integer type (index: 64, as the CPU path lowers it).
unsigned integerWidth(Type type) { return type.isIndex() ? 64 : type.getIntOrFloatBitWidth(); }

/// A tensor input as the kernels and functions take it: a pointer `name`, then its
/// extents `name_n<d>` and its strides `name_s<d>` (in elements, 0 = broadcast).
struct TableArgs {
  std::string name;
  unsigned rank;
  std::string extent(unsigned d) const { return name + "_n" + std::to_string(d); }
  std::string stride(unsigned d) const { return name + "_s" + std::to_string(d); }
  SmallVector<std::string> args() const {
    SmallVector<std::string> all{name};
    for (unsigned d = 0; d < rank; ++d)
      all.push_back(extent(d));
    for (unsigned d = 0; d < rank; ++d)
      all.push_back(stride(d));
    return all;
  }
};

/// Every table's arguments, in the kernel's input order.
SmallVector<std::string> tableArgList(ArrayRef<TableArgs> tables) {
  SmallVector<std::string> all;
  for (const TableArgs &table : tables)
    llvm::append_range(all, table.args());
  return all;
}

void requireHelper(llvm::StringSet<> &helpers, StringRef name);

/// Prints one scalar function as a @triton.jit function: every op one assignment,
/// constants inline. Arguments are Triton tensors of any broadcastable shape
/// (the kernels pass [BLOCK_M, BLOCK_N] scores, [BLOCK_M, 1] query and [1, BLOCK_N]
/// key indices, scalar batch and head indices and params).
class FunctionPrinter {
public:
  FunctionPrinter(llvm::raw_ostream &os, llvm::StringSet<> &helpers, ArrayRef<TableArgs> tables)
      : os(os), helpers(helpers), tables(tables) {}

  /// `argNames` name the scalar arguments; the trailing memref arguments are the
  /// tables (ScalarFunctions.h), which take their TableArgs.
  LogicalResult print(func::FuncOp function, StringRef name, ArrayRef<std::string> argNames) {
    Block &body = function.getBody().front();
    assert(body.getNumArguments() == argNames.size() + tables.size() &&
           "attn-derive-backward's signatures (ScalarFunctions.h)");
    for (auto [arg, argName] : llvm::zip(body.getArguments(), argNames))
      names[arg] = argName;
    for (auto [index, arg] : llvm::enumerate(body.getArguments().drop_front(argNames.size())))
      tableOf[arg] = index;
    SmallVector<std::string> all(argNames.begin(), argNames.end());
    llvm::append_range(all, tableArgList(tables));
    os << "@triton.jit\ndef " << name << "(" << llvm::join(all, ", ") << "):\n";
    // The kernels pass int32 indices (program ids, aranges) or int64 positions: each
    // integer argument takes its IR width here, once.
    for (auto [arg, argName] : llvm::zip(body.getArguments(), argNames))
      if (isa<IntegerType, IndexType>(arg.getType()) && !arg.use_empty())
        os << "    " << argName << " = tl.cast(" << argName << ", " << tritonType(arg.getType())
           << ")\n";
    for (Operation &op : body) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        SmallVector<std::string> results;
        for (Value result : ret.getOperands())
          results.push_back(names.lookup(result));
        os << "    return " << llvm::join(results, ", ") << "\n\n\n";
        continue;
      }
      FailureOr<std::string> expression = translate(op);
      if (failed(expression))
        return failure();
      Value result = op.getResult(0);
      // Constants inline, and casts between equal widths (index, i64) are no-ops.
      if (isa<arith::ConstantOp>(op) ||
          (op.getNumOperands() == 1 && *expression == names.lookup(op.getOperand(0)))) {
        names[result] = *expression;
        continue;
      }
      std::string local = "t" + std::to_string(next++);
      os << "    " << local << " = " << *expression << "\n";
      names[result] = local;
    }
    return success();
  }

private:
  std::string operand(Operation &op, unsigned index) { return names.lookup(op.getOperand(index)); }

  std::string binary(Operation &op, StringRef infix) {
    return "(" + operand(op, 0) + " " + infix.str() + " " + operand(op, 1) + ")";
  }

  std::string call(StringRef callee, Operation &op) {
    SmallVector<std::string> args;
    for (unsigned i = 0; i < op.getNumOperands(); ++i)
      args.push_back(operand(op, i));
    return (callee + "(" + llvm::join(args, ", ") + ")").str();
  }

  /// An integer operand reinterpreted as unsigned of its width (arith's u* ops).
  std::string unsignedOperand(Operation &op, unsigned index) {
    Value value = op.getOperand(index);
    unsigned width = integerWidth(value.getType());
    if (auto constant = value.getDefiningOp<arith::ConstantOp>())
      if (auto integer = dyn_cast<IntegerAttr>(constant.getValue()))
        return std::to_string(integer.getValue().zextOrTrunc(width).getZExtValue());
    if (width == 1) // true is 1 unsigned
      return "tl.cast(" + operand(op, index) + ", tl.int32)";
    return "tl.cast(" + operand(op, index) + ", tl.uint" + std::to_string(width) +
           ", bitcast=True)";
  }

  /// The integer casts, by the IR's widths: truncation keeps the low bits, extension
  /// is signed (extsi, index_cast: i1 true is -1) or unsigned (extui, index_castui).
  std::string integerCast(Operation &op, bool zeroExtend) {
    Type from = op.getOperand(0).getType(), to = op.getResult(0).getType();
    unsigned fromWidth = integerWidth(from), toWidth = integerWidth(to);
    std::string x = operand(op, 0), type = tritonType(to);
    if (fromWidth == toWidth)
      return x;
    if (toWidth == 1)
      return "((" + x + " & 1) != 0)";
    if (fromWidth > toWidth || (zeroExtend && fromWidth == 1))
      return "tl.cast(" + x + ", " + type + ")";
    if (fromWidth == 1)
      return "(-tl.cast(" + x + ", " + type + "))";
    if (zeroExtend)
      return "tl.cast(" + unsignedOperand(op, 0) + ", " + type + ")";
    return "tl.cast(" + x + ", " + type + ")";
  }

  FailureOr<std::string> compareFloat(arith::CmpFOp op) {
    std::string x = names.lookup(op.getLhs()), y = names.lookup(op.getRhs());
    auto ordered = [&](StringRef infix) { return "(" + x + " " + infix.str() + " " + y + ")"; };
    // Unordered: true where either side is NaN (x != x).
    auto unordered = [&](StringRef infix) {
      return "((" + x + " " + infix.str() + " " + y + ") | (" + x + " != " + x + ") | (" + y +
             " != " + y + "))";
    };
    switch (op.getPredicate()) {
    case arith::CmpFPredicate::OEQ:
      return ordered("==");
    case arith::CmpFPredicate::OGT:
      return ordered(">");
    case arith::CmpFPredicate::OGE:
      return ordered(">=");
    case arith::CmpFPredicate::OLT:
      return ordered("<");
    case arith::CmpFPredicate::OLE:
      return ordered("<=");
    case arith::CmpFPredicate::ONE:
      return "((" + x + " != " + y + ") & (" + x + " == " + x + ") & (" + y + " == " + y + "))";
    case arith::CmpFPredicate::ORD:
      return "((" + x + " == " + x + ") & (" + y + " == " + y + "))";
    case arith::CmpFPredicate::UEQ:
      return unordered("==");
    case arith::CmpFPredicate::UGT:
      return unordered(">");
    case arith::CmpFPredicate::UGE:
      return unordered(">=");
    case arith::CmpFPredicate::ULT:
      return unordered("<");
    case arith::CmpFPredicate::ULE:
      return unordered("<=");
    case arith::CmpFPredicate::UNE:
      return ordered("!=");
    case arith::CmpFPredicate::UNO:
      return "((" + x + " != " + x + ") | (" + y + " != " + y + "))";
    case arith::CmpFPredicate::AlwaysTrue:
      return std::string("True");
    case arith::CmpFPredicate::AlwaysFalse:
      return std::string("False");
    }
    return failure();
  }

  std::string compareInt(arith::CmpIOp op) {
    Operation &raw = *op;
    auto signedCompare = [&](StringRef infix) { return binary(raw, infix); };
    auto unsignedCompare = [&](StringRef infix) {
      return "(" + unsignedOperand(raw, 0) + " " + infix.str() + " " + unsignedOperand(raw, 1) +
             ")";
    };
    switch (op.getPredicate()) {
    case arith::CmpIPredicate::eq:
      return signedCompare("==");
    case arith::CmpIPredicate::ne:
      return signedCompare("!=");
    case arith::CmpIPredicate::slt:
      return signedCompare("<");
    case arith::CmpIPredicate::sle:
      return signedCompare("<=");
    case arith::CmpIPredicate::sgt:
      return signedCompare(">");
    case arith::CmpIPredicate::sge:
      return signedCompare(">=");
    case arith::CmpIPredicate::ult:
      return unsignedCompare("<");
    case arith::CmpIPredicate::ule:
      return unsignedCompare("<=");
    case arith::CmpIPredicate::ugt:
      return unsignedCompare(">");
    case arith::CmpIPredicate::uge:
      return unsignedCompare(">=");
    }
    llvm_unreachable("unknown cmpi predicate");
  }

  std::string cast(Operation &op) {
    return "tl.cast(" + operand(op, 0) + ", " + tritonType(op.getResult(0).getType()) + ")";
  }

  /// The flat element offset of a table read: each index clamped to [0, extent),
  /// times the table's stride (`position`: times the row-major extent products,
  /// where a learnable table's gradient goes).
  std::string tableOffset(Operation &op, bool position) {
    const TableArgs &table = tables[tableOf.lookup(op.getOperand(0))];
    std::string offset;
    for (unsigned d = 0; d < table.rank; ++d) {
      // Within the extent, so int32: the pointer arithmetic stays 32-bit.
      std::string clamped = "tl.cast(tl.minimum(tl.maximum(" + operand(op, d + 1) + ", 0), " +
                            table.extent(d) + " - 1), tl.int32)";
      if (position)
        offset = d == 0 ? clamped : "(" + offset + ") * " + table.extent(d) + " + " + clamped;
      else
        offset += (d ? " + " : "") + clamped + " * " + table.stride(d);
    }
    return offset;
  }

  FailureOr<std::string> translate(Operation &op) {
    if (op.getNumResults() != 1)
      return unsupported(op);
    // Triton's scalars: integers of 1, 8, 16, 32 and 64 bits and four float types.
    auto tritonScalar = [](Type type) {
      if (isa<IntegerType>(type))
        return llvm::is_contained({1u, 8u, 16u, 32u, 64u}, type.getIntOrFloatBitWidth());
      if (isa<FloatType>(type))
        return type.isF16() || type.isBF16() || type.isF32() || type.isF64();
      return true; // index, and a table's memref
    };
    if (!llvm::all_of(op.getOperandTypes(), tritonScalar) ||
        !tritonScalar(op.getResult(0).getType()))
      return op.emitOpError("computes in a type Triton does not have (it has i1, i8, i16, i32, "
                            "i64, index, f16, bf16, f32 and f64)");
    if (isa<TableLoadOp>(op)) {
      Type type = op.getResult(0).getType();
      return "tl.load(" + tables[tableOf.lookup(op.getOperand(0))].name + " + " +
             tableOffset(op, false) + ").to(" + tritonType(type) + ")";
    }
    if (isa<TablePositionOp>(op))
      return "(" + tableOffset(op, true) + ")";
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      Attribute value = constant.getValue();
      if (auto number = dyn_cast<FloatAttr>(value))
        return floatLiteral(number.getValueAsDouble());
      if (auto integer = dyn_cast<IntegerAttr>(value)) {
        if (integer.getType().isInteger(1))
          return std::string(integer.getValue().isOne() ? "True" : "False");
        return std::to_string(integer.getValue().getSExtValue());
      }
      return unsupported(op);
    }
    if (auto cmp = dyn_cast<arith::CmpFOp>(op))
      return compareFloat(cmp);
    if (auto cmp = dyn_cast<arith::CmpIOp>(op))
      return compareInt(cmp);
    StringRef name = op.getName().getStringRef();
    StringRef infix = llvm::StringSwitch<StringRef>(name)
                          .Cases({"arith.addf", "arith.addi"}, "+")
                          .Cases({"arith.subf", "arith.subi"}, "-")
                          .Cases({"arith.mulf", "arith.muli"}, "*")
                          .Case("arith.divf", "/")
                          .Case("arith.remf", "%")
                          // Triton's integer // and % truncate, as divsi and remsi do.
                          .Case("arith.divsi", "//")
                          .Case("arith.remsi", "%")
                          .Case("arith.andi", "&")
                          .Case("arith.ori", "|")
                          .Case("arith.xori", "^")
                          .Case("arith.shli", "<<")
                          .Case("arith.shrsi", ">>")
                          .Default("");
    if (!infix.empty())
      return binary(op, infix);
    FailureOr<std::string> integer = translateInteger(op);
    if (succeeded(integer))
      return integer;
    StringRef function =
        llvm::StringSwitch<StringRef>(name)
            .Case("math.exp", "tl.exp")
            .Case("math.exp2", "tl.exp2")
            .Case("math.log", "tl.log")
            .Case("math.log2", "tl.log2")
            .Case("math.sqrt", "tl.sqrt")
            .Case("math.rsqrt", "tl.rsqrt")
            .Case("math.absf", "tl.abs")
            .Case("math.absi", "tl.abs")
            .Case("math.sin", "tl.sin")
            .Case("math.cos", "tl.cos")
            .Case("math.erf", "tl.erf")
            .Case("math.floor", "tl.floor")
            .Case("math.ceil", "tl.ceil")
            .Case("math.fma", "tl.fma")
            .Cases({"arith.maxnumf", "arith.maxsi"}, "tl.maximum")
            .Cases({"arith.minnumf", "arith.minsi"}, "tl.minimum")
            .Case("arith.select", "tl.where")
            // No tl.math function: a @triton.jit helper of the module's prelude.
            .Case("math.tanh", "tanh_")
            .Case("math.log1p", "log1p_")
            .Case("math.expm1", "expm1_")
            .Case("math.trunc", "trunc_")
            .Case("math.round", "round_")
            .Case("math.roundeven", "roundeven_")
            .Case("math.atan", "atan_")
            .Case("math.atan2", "atan2_")
            .Case("math.asin", "asin_")
            .Case("math.acos", "acos_")
            .Case("math.asinh", "asinh_")
            .Case("math.acosh", "acosh_")
            .Case("math.atanh", "atanh_")
            .Case("math.sinh", "sinh_")
            .Case("math.cosh", "cosh_")
            .Case("math.powf", "pow_")
            .Case("math.cbrt", "cbrt_")
            .Case("math.erfc", "erfc_")
            .Default("");
    if (!function.empty()) {
      if (function.ends_with("_"))
        requireHelper(helpers, function);
      return call(function, op);
    }
    FailureOr<std::string> inline_ = translateInlineMath(op);
    if (succeeded(inline_))
      return inline_;
    if (name == "arith.maximumf" || name == "arith.minimumf")
      return (name == "arith.maximumf" ? "tl.maximum(" : "tl.minimum(") + operand(op, 0) + ", " +
             operand(op, 1) + ", propagate_nan=tl.PropagateNan.ALL)";
    if (name == "arith.negf")
      return "(-" + operand(op, 0) + ")";
    if (name == "arith.index_cast" || name == "arith.extsi" || name == "arith.trunci")
      return integerCast(op, /*zeroExtend=*/false);
    if (name == "arith.index_castui" || name == "arith.extui")
      return integerCast(op, /*zeroExtend=*/true);
    if (name == "arith.sitofp" && op.getOperand(0).getType().isInteger(1))
      return "(-" + cast(op) + ")"; // i1 true is -1
    if (name == "arith.sitofp" || name == "arith.extf" || name == "arith.truncf" ||
        name == "arith.fptosi")
      return cast(op);
    if (name == "arith.fptoui") {
      unsigned width = integerWidth(op.getResult(0).getType());
      return "tl.cast(tl.cast(" + operand(op, 0) + ", tl.uint" + std::to_string(width) + "), " +
             tritonType(op.getResult(0).getType()) + ", bitcast=True)";
    }
    if (name == "arith.uitofp")
      return "tl.cast(" + unsignedOperand(op, 0) + ", " + tritonType(op.getResult(0).getType()) +
             ")";
    return unsupported(op);
  }

  /// The integer ops Triton has no operator or function for: bit counts,
  /// rounding divisions and the unsigned ops (on the operands' bits, of their width).
  FailureOr<std::string> translateInteger(Operation &op) {
    StringRef name = op.getName().getStringRef();
    if (name == "math.ctlz" || name == "math.cttz" || name == "math.ctpop") {
      // The count depends on the operand's width; the helpers count in int32.
      StringRef helper = name == "math.ctlz" ? "ctlz_" : name == "math.cttz" ? "cttz_" : "ctpop_";
      requireHelper(helpers, helper);
      Type type = op.getResult(0).getType();
      std::string count =
          (helper + "(" + operand(op, 0) + ", " + Twine(integerWidth(type)) + ")").str();
      return integerWidth(type) == 32 ? count : "tl.cast(" + count + ", " + tritonType(type) + ")";
    }
    if (name == "arith.floordivsi" || name == "arith.ceildivsi") {
      StringRef helper = name == "arith.floordivsi" ? "floordiv_" : "ceildiv_";
      requireHelper(helpers, helper);
      return call(helper, op);
    }
    StringRef infix = llvm::StringSwitch<StringRef>(name)
                          .Case("arith.divui", "//")
                          .Case("arith.remui", "%")
                          .Case("arith.shrui", ">>")
                          .Default("");
    std::string resultType = tritonType(op.getResult(0).getType());
    auto asSigned = [&](const std::string &value) {
      return "tl.cast(" + value + ", " + resultType + ", bitcast=True)";
    };
    if (!infix.empty())
      return asSigned("(" + unsignedOperand(op, 0) + " " + infix.str() + " " +
                     unsignedOperand(op, 1) + ")");
    if (name == "arith.maxui" || name == "arith.minui")
      return asSigned((name == "arith.maxui" ? "tl.maximum(" : "tl.minimum(") +
                     unsignedOperand(op, 0) + ", " + unsignedOperand(op, 1) + ")");
    if (name == "arith.ceildivui") {
      std::string x = unsignedOperand(op, 0), y = unsignedOperand(op, 1);
      return asSigned("tl.where(" + x + " == 0, 0, (" + x + " - 1) // " + y + " + 1)");
    }
    return failure();
  }

  /// The math ops that are one expression of tl functions: their bits (copysign, the
  /// classes), a power of an integer (fpowi through pow_), a quotient (tan, log10).
  FailureOr<std::string> translateInlineMath(Operation &op) {
    StringRef name = op.getName().getStringRef();
    std::string x = operand(op, 0);
    Type type = op.getOperand(0).getType();
    if (name == "math.tan")
      return "(tl.sin(" + x + ") / tl.cos(" + x + "))";
    if (name == "math.log10")
      return "(tl.log(" + x + ") * " + floatLiteral(1.0 / std::log(10.0)) + ")";
    if (name == "math.fpowi") {
      requireHelper(helpers, "pow_");
      return "pow_(" + x + ", tl.cast(" + operand(op, 1) + ", " + tritonType(type) + "))";
    }
    if (name == "arith.bitcast")
      return "tl.cast(" + x + ", " + tritonType(op.getResult(0).getType()) + ", bitcast=True)";
    if (!isa<FloatType>(type))
      return failure();
    std::string magnitude = "tl.abs(" + x + ")";
    if (name == "math.copysign") {
      // The sign bit of y, as the signed integer of its width (-0.0 and NaN's too).
      std::string bits = "tl.cast(" + operand(op, 1) + ", tl.int" +
                         std::to_string(type.getIntOrFloatBitWidth()) + ", bitcast=True)";
      return "tl.where(" + bits + " < 0, -" + magnitude + ", " + magnitude + ")";
    }
    if (name == "math.isnan")
      return "(" + x + " != " + x + ")";
    if (name == "math.isinf")
      return "(" + magnitude + " == float(\"inf\"))";
    if (name == "math.isfinite")
      return "(" + magnitude + " < float(\"inf\"))";
    if (name == "math.isnormal") {
      const llvm::fltSemantics &semantics = llvm::cast<FloatType>(type).getFloatSemantics();
      double smallest = APFloat::getSmallestNormalized(semantics).convertToDouble();
      return "((" + magnitude + " >= " + floatLiteral(smallest) + ") & (" + magnitude +
             " < float(\"inf\")))";
    }
    return failure();
  }

  LogicalResult unsupported(Operation &op) {
    return op.emitOpError("is not supported by the Triton emitter yet");
  }

  llvm::raw_ostream &os;
  llvm::StringSet<> &helpers;
  ArrayRef<TableArgs> tables;
  DenseMap<Value, std::string> names;
  DenseMap<Value, unsigned> tableOf;
  unsigned next = 0;
};

/// A @triton.jit helper of the module's prelude: an op without a tl function, as an
/// exact composition (Triton's interpreter runs no libdevice), and the helpers it calls.
struct Helper {
  StringRef name;
  StringRef calls; // the helper it calls, if any
  StringRef text;
};

const Helper kHelpers[] = {
    {"tanh_", "", R"(@triton.jit
def tanh_(x):
    # (1 - e^-2|x|) / (1 + e^-2|x|) with the sign of x: finite for every x.
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


)"},
    {"log1p_", "", R"(@triton.jit
def log1p_(x):
    # log(1 + x) with the rounding of 1 + x compensated (Goldberg).
    u = 1.0 + x
    return tl.where(u == 1.0, x, tl.log(u) * x / (u - 1.0))


)"},
    {"ctlz_", "", R"(@triton.jit
def ctlz_(x, WIDTH: tl.constexpr):
    # The leading zeros of x as a WIDTH-bit integer (math.ctlz), by halving: Triton has
    # no clz that its interpreter runs too. The bits are moved to the top of 64 first.
    u = x.to(tl.int64).to(tl.uint64, bitcast=True)
    if WIDTH < 64:
        u = (u & ((1 << WIDTH) - 1)) << (64 - WIDTH)
    n = tl.zeros(u.shape, tl.int32)
    for step in tl.static_range(6):  # halves of 32, 16, ..., 1 bits
        empty = (u >> (64 - (32 >> step))) == 0
        n += tl.where(empty, 32 >> step, 0)
        u = tl.where(empty, u << (32 >> step), u)
    n += (u == 0).to(tl.int32)
    return tl.minimum(n, WIDTH)


)"},
    {"cttz_", "ctlz_", R"(@triton.jit
def cttz_(x, WIDTH: tl.constexpr):
    # The trailing zeros of x (math.cttz): the ones below its lowest set bit.
    below = (~x.to(tl.int64)) & (x.to(tl.int64) - 1)
    return WIDTH - ctlz_(below, WIDTH)


)"},
    {"ctpop_", "", R"(@triton.jit
def ctpop_(x, WIDTH: tl.constexpr):
    # The set bits of x as a WIDTH-bit integer (math.ctpop), summed in ever wider fields.
    u = x.to(tl.int64).to(tl.uint64, bitcast=True)
    if WIDTH < 64:
        u = u & ((1 << WIDTH) - 1)
    u = u - ((u >> 1) & 0x5555555555555555)
    u = (u & 0x3333333333333333) + ((u >> 2) & 0x3333333333333333)
    u = (u + (u >> 4)) & 0x0F0F0F0F0F0F0F0F
    u = u + (u >> 8)
    u = u + (u >> 16)
    u = u + (u >> 32)
    return (u & 0x7F).to(tl.int32)


)"},
    {"floordiv_", "", R"(@triton.jit
def floordiv_(x, y):
    # Rounded toward -inf (arith.floordivsi); Triton's // truncates.
    q = x // y
    return tl.where((q * y != x) & ((x < 0) != (y < 0)), q - 1, q)


)"},
    {"ceildiv_", "", R"(@triton.jit
def ceildiv_(x, y):
    # Rounded toward +inf (arith.ceildivsi); Triton's // truncates.
    q = x // y
    return tl.where((q * y != x) & ((x < 0) == (y < 0)), q + 1, q)


)"},
    {"expm1_", "", R"(@triton.jit
def expm1_(x):
    # e^x - 1 with the rounding of e^x compensated (Kahan).
    u = tl.exp(x)
    return tl.where(u == 1.0, x, tl.where(u - 1.0 == -1.0, -1.0, (u - 1.0) * x / tl.log(u)))


)"},
    {"trunc_", "", R"(@triton.jit
def trunc_(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


)"},
    {"round_", "trunc_", R"(@triton.jit
def round_(x):
    # Halves away from zero (math.round): the integer part, one more where the
    # fraction is at least 1/2 (x - trunc(x) is exact).
    t = trunc_(x)
    return tl.where(tl.abs(x - t) >= 0.5, t + tl.where(x < 0, -1.0, 1.0), t)


)"},
    {"roundeven_", "", R"(@triton.jit
def roundeven_(x):
    # Halves to even (math.roundeven): floor, one more above the half and at the half
    # of an odd floor; a zero keeps the sign of x (roundeven(-0.3) = -0.0).
    r = tl.floor(x)
    d = x - r
    odd = r - 2.0 * tl.floor(0.5 * r) == 1.0
    y = tl.where((d > 0.5) | ((d == 0.5) & odd), r + 1.0, r)
    return tl.where(y == 0, x * 0.0, y)


)"},
    {"atan_", "", R"(@triton.jit
def atan_(x):
    # Cephes' atanf: |x| reduced about 0, pi/4 or pi/2 to at most tan(pi/8), then an odd
    # polynomial (2 ulp in float32); Triton's interpreter runs no libdevice.
    a = tl.abs(x)
    big = a > 2.414213562373095
    mid = a > 0.41421356237309503
    z = tl.where(big, -1.0 / a, tl.where(mid, (a - 1.0) / (a + 1.0), a))
    base = tl.where(big, 1.5707963267948966, tl.where(mid, 0.78539816339744831, 0.0))
    zz = z * z
    p = ((8.05374449538e-2 * zz - 1.38776856032e-1) * zz + 1.99777106478e-1) * zz - 3.33329491539e-1
    y = base + (p * zz * z + z)
    return tl.where(x < 0, -y, y)


)"},
    {"atan2_", "atan_", R"(@triton.jit
def atan2_(y, x):
    # atan(y/x) moved to the quadrant of (x, y); on the axis x = 0, +-pi/2 by the sign of y.
    t = atan_(y / x)
    t = tl.where(x < 0, tl.where(y < 0, t - 3.1415926535897931, t + 3.1415926535897931), t)
    axis = tl.where(y > 0, 1.5707963267948966, tl.where(y < 0, -1.5707963267948966, 0.0))
    return tl.where(x == 0, axis, t)


)"},
    {"asin_", "atan_", R"(@triton.jit
def asin_(x):
    # atan(x / sqrt(1 - x^2)), with 1 - x^2 as (1 - x)(1 + x): exact near |x| = 1.
    return atan_(x / tl.sqrt((1.0 - x) * (1.0 + x)))


)"},
    {"acos_", "atan_", R"(@triton.jit
def acos_(x):
    # 2 atan(sqrt((1 - x) / (1 + x))): pi at x = -1 (atan(inf)), 0 at x = 1.
    return 2.0 * atan_(tl.sqrt((1.0 - x) / (1.0 + x)))


)"},
    {"asinh_", "log1p_", R"(@triton.jit
def asinh_(x):
    # log(a + sqrt(a^2 + 1)) = log1p(a + a^2 / (1 + sqrt(1 + a^2))), a = |x|: no
    # cancellation near 0; log(2a) where a^2 would overflow.
    a = tl.abs(x)
    y = log1p_(a + a * a / (1.0 + tl.sqrt(1.0 + a * a)))
    y = tl.where(a > 1e18, tl.log(a) + 0.69314718055994531, y)
    return tl.where(x < 0, -y, y)


)"},
    {"acosh_", "log1p_", R"(@triton.jit
def acosh_(x):
    # log(x + sqrt(x^2 - 1)) = log1p(t + sqrt(2t + t^2)), t = x - 1: exact near 1;
    # log(2x) where x^2 would overflow; NaN below 1.
    t = x - 1.0
    y = log1p_(t + tl.sqrt(2.0 * t + t * t))
    return tl.where(x > 1e18, tl.log(x) + 0.69314718055994531, y)


)"},
    {"atanh_", "log1p_", R"(@triton.jit
def atanh_(x):
    # log((1 + a) / (1 - a)) / 2 = log1p(2a / (1 - a)) / 2, a = |x|: no cancellation near 0.
    a = tl.abs(x)
    y = 0.5 * log1p_(2.0 * a / (1.0 - a))
    return tl.where(x < 0, -y, y)


)"},
    {"sinh_", "expm1_", R"(@triton.jit
def sinh_(x):
    # Below 1 from expm1 (e^a - e^-a cancels there); above, from h = e^(a/2) as
    # h/2 * h - 1/(2h) / h, finite wherever sinh is (e^a alone overflows first).
    a = tl.abs(x)
    u = expm1_(a)
    h = tl.exp(0.5 * a)
    y = tl.where(a < 1.0, 0.5 * (u + u / (u + 1.0)), (0.5 * h) * h - (0.5 / h) / h)
    return tl.where(x < 0, -y, y)


)"},
    {"cosh_", "", R"(@triton.jit
def cosh_(x):
    # (e^a + e^-a) / 2 from h = e^(a/2), finite wherever cosh is.
    h = tl.exp(0.5 * tl.abs(x))
    return (0.5 * h) * h + (0.5 / h) / h


)"},
    {"pow_", "", R"(@triton.jit
def pow_(x, y):
    # |x|^y = 2^(y log2|x|); a negative x keeps the sign of an odd integer y and has no
    # real power for another y (NaN); x^0 = 1^y = 1, as C's pow.
    r = tl.exp2(y * tl.log2(tl.abs(x)))
    integer = tl.floor(y) == y
    odd = integer & (y - 2.0 * tl.floor(0.5 * y) == 1.0)
    r = tl.where(x < 0, tl.where(integer, tl.where(odd, -r, r), float("nan")), r)
    # Two wheres, not one of (y == 0) | (x == 1): the interpreter cannot or a scalar
    # mask (a constant y) with a tile's.
    return tl.where(x == 1, 1.0, tl.where(y == 0, 1.0, r))


)"},
    {"cbrt_", "", R"(@triton.jit
def cbrt_(x):
    # 2^(log2|x| / 3), refined by one Newton step on y^3 = |x| (0 and inf as they are).
    a = tl.abs(x)
    y = tl.exp2(tl.log2(a) / 3.0)
    y = tl.where((y > 0) & (y < float("inf")), y - (y * y * y - a) / (3.0 * y * y), y)
    return tl.where(x < 0, -y, y)


)"},
    {"erfc_", "", R"(@triton.jit
def erfc_(x):
    # Numerical Recipes' erfcc (relative error below 1.2e-7 for every x), where 1 - erf(x)
    # would lose the tail's digits.
    z = tl.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    p = 1.48851587 + t * (-0.82215223 + t * 0.17087277)
    p = 0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * p)))
    p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * p))
    r = t * tl.exp(p - z * z)
    return tl.where(x < 0, 2.0 - r, r)


)"},
};

/// Adds `name` and the helpers it calls to `helpers`.
void requireHelper(llvm::StringSet<> &helpers, StringRef name) {
  if (!helpers.insert(name).second)
    return;
  for (const Helper &helper : kHelpers)
    if (helper.name == name && !helper.calls.empty())
      requireHelper(helpers, helper.calls);
}

/// The helpers FunctionPrinter called, in kHelpers' order.
void printHelpers(const llvm::StringSet<> &helpers, llvm::raw_ostream &os) {
  for (const Helper &helper : kHelpers)
    if (helpers.contains(helper.name))
      os << helper.text;
}

// --- the kernel templates ------------------------------------------------------------

/// The Python name of param `index` (`name` in the IR): p_<name>, which no name
/// of the templates starts with.
std::string pythonName(StringRef name, unsigned index) {
  bool identifier = !name.empty() &&
                    llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; });
  return identifier ? "p_" + name.str() : "p" + std::to_string(index);
}

// --- the row algorithm as Python text ---------------------------------------------

/// A Python expression and how tightly it binds (an atom, a name or a call: never
/// parenthesised as an operand); empty is RowEquations' absent value.
struct PyValue {
  enum Precedence { Comparison = 1, BitOr, BitAnd, Sum, Product, Unary, Atom };
  PyValue() = default;
  PyValue(std::string text, Precedence precedence = Atom)
      : text(std::move(text)), precedence(precedence) {}
  PyValue(const char *text) : text(text) {}
  explicit operator bool() const { return !text.empty(); }
  bool operator==(const PyValue &other) const { return text == other.text; }

  std::string text;
  Precedence precedence = Atom;
};

/// RowEquations' value algebra as Python text over [BLOCK_M] rows, float32: `name`
/// prints `name = value` at the indent and the equations refer to the name after;
/// e^x is tl.exp2 with log2 e folded in; a row is its index arguments ("b, h, pos_m").
class TritonRowOps {
public:
  using Value = PyValue;
  using Sum = PyValue;
  using Row = std::string;

  TritonRowOps(llvm::raw_ostream &os, int indent, bool offsetStabilizer, bool offset,
               std::function<std::string(StringRef)> withParams)
      : os(os), indent(indent), hasStabilizer(offsetStabilizer), hasOffset(offset),
        withParams(std::move(withParams)) {}

  bool hasOffsetStabilizer() const { return hasStabilizer; }
  Value offsetStabilizer(const Row &row) {
    return rowConstant(0.0).text + " + offset_stabilizer(" + withParams(row) + ")";
  }
  Value offsetRegion(const Value &m, const Row &row) {
    if (!hasOffset)
      return {};
    return "offset(" + withParams(m.text + ", " + row) + ")";
  }
  Value rowConstant(double value) {
    if (value == 0.0)
      return "tl.zeros([BLOCK_M], tl.float32)";
    return "tl.full([BLOCK_M], " + floatLiteral(value) + ", tl.float32)";
  }
  Sum emptySum() { return rowConstant(0.0); }
  Value noKeys() { return rowConstant(0.0); }
  Value constantLike(const Value &, double value) {
    std::string literal = floatLiteral(value);
    return {literal, literal.front() == '-' ? PyValue::Unary : PyValue::Atom};
  }
  Value maximum(const Value &x, const Value &y) {
    return "tl.maximum(" + x.text + ", " + y.text + ")";
  }
  Value exp(const Value &x) {
    return "tl.exp2(" + binary(x, "*", PyValue::Product, "LOG2E").text + ")";
  }
  Value negate(const Value &x) { return {"-" + operand(x, PyValue::Unary), PyValue::Unary}; }
  Value add(const Value &x, const Value &y) { return binary(x, "+", PyValue::Sum, y); }
  Value sub(const Value &x, const Value &y) { return binary(x, "-", PyValue::Sum, y); }
  Value mul(const Value &x, const Value &y) { return binary(x, "*", PyValue::Product, y); }
  Value addCount(const Value &count, const Value &kept) { return add(count, kept); }
  Value compare(RowComparison comparison, const Value &x, const Value &y) {
    auto op = [&]() -> StringRef {
      switch (comparison) {
      case RowComparison::Equal:
        return "==";
      case RowComparison::NotEqual:
        return "!=";
      case RowComparison::Greater:
        return ">";
      case RowComparison::GreaterEqual:
        return ">=";
      case RowComparison::Less:
        return "<";
      }
      llvm_unreachable("a row comparison");
    };
    return binary(x, op(), PyValue::Comparison, y);
  }
  Value divide(const Value &x, const Value &y) { return binary(x, "/", PyValue::Product, y); }
  Value select(const Value &condition, const Value &x, const Value &y) {
    return "tl.where(" + condition.text + ", " + x.text + ", " + y.text + ")";
  }
  Value both(const Value &x, const Value &y) { return binary(x, "&", PyValue::BitAnd, y); }
  Value either(const Value &x, const Value &y) { return binary(x, "|", PyValue::BitOr, y); }
  Value negateFlag(const Value &x) { return {"~" + operand(x, PyValue::Unary), PyValue::Unary}; }
  Value rowFlag(bool value) {
    return value ? "tl.full([BLOCK_M], 1, tl.int1)" : "tl.zeros([BLOCK_M], tl.int1)";
  }
  /// x / y where `condition`, else 0, dividing by 1 where it does not hold (no
  /// division by zero in the lanes tl.where drops).
  Value quotientWhere(const Value &condition, const Value &x, const Value &y) {
    return select(condition, binary(x, "/", PyValue::Product, select(condition, y, "1.0")),
                  "0.0");
  }
  Sum accumulate(const Sum &acc, const Value &alpha, const Value &term) {
    Value scaled = alpha ? mul(acc, alpha) : acc;
    return term ? add(scaled, term) : scaled;
  }
  Value name(StringRef name, const Value &value) {
    if (value.text != name)
      os.indent(indent) << name << " = " << value.text << "\n";
    return name.str();
  }

private:
  /// `x` as an operand of an operator of `precedence`: parenthesised where it binds
  /// less tightly (or as tightly: the right operand of - and /, comparisons' chains).
  static std::string operand(const Value &x, PyValue::Precedence precedence, bool right = false) {
    bool wrap = right ? x.precedence <= precedence : x.precedence < precedence;
    return wrap ? "(" + x.text + ")" : x.text;
  }
  static Value binary(const Value &x, StringRef op, PyValue::Precedence precedence,
                      const Value &y) {
    bool chain = precedence == PyValue::Comparison;
    return {operand(x, precedence, chain) + " " + op.str() + " " + operand(y, precedence, true),
            precedence};
  }

  llvm::raw_ostream &os;
  int indent;
  bool hasStabilizer, hasOffset;
  std::function<std::string(StringRef)> withParams;
};

using TritonRows = RowEquations<TritonRowOps>;

class KernelPrinter {
public:
  KernelPrinter(KernelOp kernel, llvm::raw_ostream &os) : kernel(kernel), os(os) {}

  LogicalResult print();

private:
  LogicalResult checkCovered();
  LogicalResult printFunctions();
  /// tile_class(b, h, row_lo, row_hi, key_lo, key_hi) -> (any_kept, all_kept).
  LogicalResult printTileClass(llvm::raw_ostream &body, llvm::StringSet<> &helpers);
  /// any_kept and all_kept of the tile of rows `rowLo`..`rowHi` and keys from `keyStart`,
  /// of head `h` (or, `packedHeads`, of every head from head_lo to head_hi).
  void skipTiles(int indent, StringRef rowLo, StringRef rowHi, StringRef keyStart,
                 bool packedHeads = false);
  void printHeader();
  std::string inputsText();
  std::string schedulesText();
  /// The additive contraction's schedule (kAdditiveBlock), in place of the selected one's:
  /// the tanh tile, not the dots, bounds its tiles.
  std::string additiveTiles() const {
    std::string tiles =
        llvm::formatv("({0}, {0}, {1}, {2})", kAdditiveBlock, kAdditiveWarps, kAdditiveStages)
            .str();
    return "forward=" + tiles + ", backward=" + tiles + ", decode=" + tiles;
  }
  void printForward();
  /// The decode forward: attn_fwd_split (the GQA group's rows packed into one tile, one
  /// chunk of keys per program, the chunk's partial row state out) and attn_fwd_merge
  /// (the chunks' states combined, then attn_fwd's epilogue).
  void printForwardSplit();
  void printForwardMerge();
  /// `@triton.jit def name(`: `pointers`, the tables (with `gradients` their gradient
  /// slots), H, NQ, HEAD_DIM_V, `scalars`; then a program of one tile of rows of one
  /// (b, h) that reads no q, k or v (attn_bwd_preprocess, attn_fwd_merge).
  void rowTileProgram(StringRef name, StringRef pointers, bool gradients,
                      StringRef scalars = "");
  /// The row equations (RowEquations.h), printing at `indent`.
  TritonRows rowsAt(int indent) {
    return TritonRows(TritonRowOps(os, indent, bool(functions.getOffsetStab()),
                                   bool(functions.getOffset()),
                                   [this](StringRef leading) { return withParams(leading); }),
                      normalizer, online);
  }
  /// The forward's running row state: m_i (online; plain: 0), l_i, count.
  TritonRows::State runningState() const { return {online ? "m_i" : "0.0", "l_i", "count"}; }
  /// The running row state set to `next` (the fields it changes).
  void assignState(int indent, const TritonRows::State &next);
  /// The running row state starting as `start`, and acc = 0.
  void forwardState(int indent, const TritonRows::State &start);
  /// One key tile (scoreTile's s and keep) into the running row state; `masked` false:
  /// a tile whose every pair is kept (scoreValues' s, no keep), as before full_stop.
  void forwardTile(int indent, bool masked = true);
  /// The forward's key tiles: where splitsWholeTiles, those before full_stop first,
  /// with no keep to compute, then the rest masked (FlashAttention's split).
  void forwardKeyTiles();
  /// Without a mask function, scan or threshold, a whole tile (its keys inside the key
  /// length and, causal, each at or before each row) keeps every pair: no keep to
  /// compute, no tl.where, no row predicate in the K and V loads.
  bool splitsWholeTiles() const { return !functions.getMask() && !scan && !implicit; }
  /// Where splitsWholeTiles, the key tiles before full_stop, whole with the program's
  /// query block (attn_fwd, attn_bwd_dq), each with its raw and s, then `wholeTile`'s
  /// body; none where `rowsInside` and the block has rows past NQ, whose pair terms (at
  /// q = 0) may be NaN: attn_bwd_dq's dW sums over its rows. Returns the first key of
  /// the masked tiles.
  StringRef wholeKeyTiles(bool rowsInside, llvm::function_ref<void(int)> wholeTile);
  /// The row's end from its state (the offset added once), then O, row_max and row_sum.
  void forwardEpilogue();
  /// A scan's forward: S_i = 0 and acc = 0; the key tiles (openKeyTiles, last to
  /// first), each a chunk of the row combined into it (scanTile); the end of the row
  /// (scanEpilogue, with `leftOver` the query's own value weighted by r = e^S).
  void scanTile(int indent);
  void scanEpilogue(bool leftOver);
  /// An implicit normalizer's forward (RowEquations' threshold equations): the row's max
  /// score and kept keys, the bracket, the Newton iteration of τ_i (each trial a pass
  /// over the key tiles, thresholdSumsPass), then O = Σ_j g(s_ij − τ_i)·v_j.
  void thresholdForward();
  /// `weights` (and `slopes`, if not empty) = Σ_j g(s_ij − tau), Σ_j g'(s_ij − tau) over
  /// the kept keys above tau, a pass over the key tiles at `indent`.
  void thresholdSumsPass(int indent, StringRef tau, StringRef weights, StringRef slopes);
  /// A scan's backward tile from the rows' S_i and B_i as they enter it: each pair's
  /// e^S, w, dP·e^S (scaled_dp) and B' − D (suffix_delta), then ds and draw. In
  /// attn_bwd_dq (keys last to first) the rows' states are then advanced and stored per
  /// key tile (TileLogSurvival, TileSuffix), which attn_bwd_dkdv reads.
  void scanGradTile(int indent);
  /// The pairs of a scan's backward tile: shift, d, e^S (survival), w, dp and w_dp.
  TritonRows::ScanStep scanPairTile(int indent);
  /// What a pair's gradient takes for dP and D: (g'·dP − h'·D)/C, a scan's at C = 1
  /// with dP·e^S and B' − D.
  std::string pairDP() const { return scan ? "scaled_dp" : "dp"; }
  std::string pairDelta() const { return scan ? "suffix_delta" : "delta[:, None]"; }
  /// draw = ds·∂s/∂raw of the tile (a score mod's), masked unless `masked` is false.
  void scoreDraw(int indent, bool masked = true);
  void printPreprocess();
  void printDkDv();
  /// dq += the tile's draw·k (or its additive contraction's gradient).
  void accumulateDq(int indent);
  void printDq();

  // Fragments the kernels share, written at `indent`.
  void line(int indent, const Twine &text) { os.indent(indent) << text << "\n"; }
  /// `leading`, then the params and the tables: how every scalar function is called.
  std::string withParams(StringRef leading) const {
    std::string args = leading.str();
    for (const std::string &param : params)
      args += ", " + param;
    for (const std::string &table : tableArgList(tables))
      args += ", " + table;
    return args;
  }
  /// The tables' kernel arguments, then each learnable table's gradient slots
  /// (`gradients`): one line of the signature.
  std::string tableParameters(bool gradients) {
    std::string text;
    for (const std::string &arg : tableArgList(tables))
      text += arg + ", ";
    if (gradients)
      for (auto [table, input] : llvm::zip(tables, inputs))
        if (input.getLearnable())
          text += gradientSlots(table) + ", ";
    return text;
  }
  static std::string gradientSlots(const TableArgs &table) { return "d" + table.name; }
  /// The number of elements of `table` (its gradient's size), as an expression.
  static std::string tableSize(const TableArgs &table) {
    SmallVector<std::string> extents;
    for (unsigned d = 0; d < table.rank; ++d)
      extents.push_back(table.extent(d));
    return llvm::join(extents, " * ");
  }
  /// Adds one tile's (or row block's) gradient of table-read `site` into this
  /// program's own slots (which the launcher sums in a fixed order): `value` at
  /// `position` where `where`, reduced per element read in a fixed order.
  void addTableGradient(int indent, unsigned site, StringRef slot, StringRef value,
                        StringRef position, StringRef where, StringRef shape);
  void loadParams(int indent);
  /// The gradients of every learnable-table read of `role`s in the tile.
  void pairTableGradients(int indent, StringRef slot);
  /// `@triton.jit def name(`: the pointers, four strides of each tensor in
  /// `strided`, the tables (with `gradients` also the learnable ones' gradient
  /// slots), then the sizes, flags and tiles.
  void signature(StringRef name, StringRef pointers, ArrayRef<StringRef> strided,
                 bool gradients = false, StringRef scalars = "");
  /// A program of one query block of one (b, h): indices, q, and the keys it visits.
  void rowProgram();
  /// k and v of the tile; `wholeTile`: every key row is inside the key length (no row
  /// predicate in the loads' masks).
  void loadKeysAndValues(int indent, bool wholeTile = false);
  /// `name` = the tile `load` (cosine: its unit rows, the rows as loaded in
  /// `name`_rows, which chainRows needs).
  void loadContracted(int indent, StringRef name, const std::string &load);
  /// The gradient of the rows as loaded from `gradient`, that of the contracted rows.
  std::string chainRows(StringRef name, StringRef gradient) const;
  void printRowHelpers();
  /// weight: the bilinear contraction's W as a [BLOCK_D, BLOCK_D] tile (float32);
  /// projected rows' offs_hidden.
  void loadWeight(int indent);
  /// The columns the contraction runs over: BLOCK_D, or BLOCK_HIDDEN of projected rows.
  StringRef contractedWidth() const { return additive || projected ? "BLOCK_HIDDEN" : "BLOCK_D"; }
  /// The weight that projects `name`'s rows (q or k), loaded where it is used (in the
  /// loop over key tiles, a load that feeds a dot: held across the loop, its float32
  /// tile spilled).
  std::string projectionWeight(StringRef name) const {
    return "projection_weight(Params + " + std::to_string(weights[name == "k" && additive].offset) +
           ", HEAD_DIM, BLOCK_D)";
  }
  /// The additive contraction's weights as arguments of its helpers: W_q, W_k and v.
  std::string additiveWeights() const {
    return llvm::formatv("Params + {0}, Params + {1}, Params + {2}", weights[0].offset,
                         weights[1].offset, weights[2].offset)
        .str();
  }
  /// The additive contraction's gradient of `name`'s projected rows (q: d_a summed over
  /// the tile's keys, axis 1; k: d_c over its rows, axis 0) into the accumulator
  /// `gradient`, one hidden chunk at a time; the dK programs also sum dv into d_weight_v.
  void additiveGradients(int indent, StringRef name, StringRef gradient);
  /// Projected rows (additive, projected): `gradient`, that of `name`'s contracted rows,
  /// back to the projection as d_<name>_proj, and its share of the projecting weight's
  /// gradient, d_projᵀ·rows, stored in `slots` (this program's: `program`).
  void chainProjection(int indent, StringRef name, StringRef gradient, StringRef slots,
                       StringRef program);
  std::string weightsText();
  /// A row program's loop over key tiles from `first` to `stop` (skipping those the mask
  /// keeps nothing of), with the tile's keys and values loaded; returns the tile body's
  /// indent. `packedHeads`: the rows are attn_fwd_split's (several heads, pos_m's span);
  /// `lastToFirst`: the tiles in reverse (a scan's); `indent`: the loop's own (an
  /// implicit normalizer's passes run inside its iterations); `wholeTiles`: every tile's
  /// keys are inside the key length (loadKeysAndValues).
  int openKeyTiles(StringRef first = "0", StringRef stop = "key_stop", bool packedHeads = false,
                   bool lastToFirst = false, int indent = 4, bool wholeTiles = false);
  void loadRowStatistics(int indent);
  /// kv_end: the keys a row of batch b sees before causal and the mask; causal_shift,
  /// the causal bound on a pair's key row minus its query row.
  void keyEnd(int indent);
  /// raw, s and keep of the tile (q: [BLOCK_M, D], k: [BLOCK_N, D]); `live`
  /// and-s a row predicate into keep.
  void scoreTile(int indent, StringRef live);
  /// raw and s of the tile alone.
  void scoreValues(int indent);
  /// shift and ds of the tile from the prepared rows (loadRowStatistics) and dp; draw.
  /// A threshold row's pairs take dP − r_i (r_i in delta) at C = 1. `masked` false: a
  /// whole tile (no keep; see splitsWholeTiles).
  void scoreGrad(int indent, bool masked = true);
  /// A threshold row's tile after scoreTile: s becomes g's argument s − τ_i (τ_i in
  /// row_max) and keep keeps the keys above τ_i.
  void thresholdPairs(int indent);
  /// r_i = Σ g'·dP / Σ g' of the program's rows, a pass over the key tiles, into delta
  /// and Delta (attn_bwd_dkdv reads it).
  void thresholdCorrection();
  /// The load of a [rows, cols] tile, masked to rows < rowLimit (none where it is empty)
  /// and cols < colLimit, 0 outside.
  std::string tileLoad(StringRef pointer, StringRef base, StringRef rows, StringRef rowStride,
                       StringRef rowLimit, StringRef cols, StringRef colStride,
                       StringRef colLimit) const;

  SmallVector<TableGradAttr> tableGrads() const {
    SmallVector<TableGradAttr> sites;
    if (ArrayAttr all = functions.getTableGrads())
      for (Attribute site : all)
        sites.push_back(cast<TableGradAttr>(site));
    return sites;
  }
  /// <role>_<kind>_<table>_<site>: d (by the value read) or at (where it was read).
  std::string tableGradName(unsigned site, StringRef kind) const {
    TableGradAttr read = tableGrads()[site];
    StringRef role = read.getRole() == TableGradRole::Score ? "score_mod"
                                                            : stringifyTableGradRole(read.getRole());
    return (role + "_" + kind + "_" + tables[read.getInput()].name + "_" + Twine(site)).str();
  }

  KernelOp kernel;
  llvm::raw_ostream &os;
  NormalizerOp normalizer;
  bool online = false;
  KernelFunctionsAttr functions;
  SmallVector<std::string> params;
  SmallVector<InputOp> inputs;
  SmallVector<TableArgs> tables;
  /// How derivative functions name each param: numerator_d_<suffix>.
  SmallVector<std::string> paramSuffixes;
  unsigned numNormalizerParams = 0;
  /// The bilinear contraction: q' = q·W with W [d, d] after the params in Params
  /// (kernelWeights); dq = dq'·Wᵀ and dW = Σ qᵀ dq' (the dQ programs' slots).
  bool bilinear = false;
  SmallVector<KernelWeight> weights;
  /// Params and weight elements: each program's dθ slot.
  int64_t slotCount = 0;
  /// A feature map φ (quadratic form): the templates contract φ(q) and φ(k), taken
  /// elementwise as the tiles are loaded, and chain dq and dk through φ'.
  bool featureMap = false;
  /// The cosine contraction: the templates contract unit rows q/|q|_ε and k/|k|_ε
  /// and chain dq and dk back through the norms.
  bool cosine = false;
  /// Rows projected by a learnable weight to `hidden` columns (HIDDEN, tile
  /// BLOCK_HIDDEN): the additive contraction's a = q·W_qᵀ and c = k·W_kᵀ,
  /// s = Σ_n v_n·tanh(a_in + c_jn) over [BLOCK_M, BLOCK_N, HIDDEN_CHUNK] tiles, each
  /// chunk of a and c projected where it is used; or (projected) φ(q·Wᵀ) and φ(k·Wᵀ) of
  /// one W [m, d] as the rows are loaded, contracted by the dot.
  /// The backward chains dq and dk through the projection; each program writes its
  /// share of dW into its own slot (the launcher sums them in a fixed order).
  bool additive = false, projected = false;
  int64_t hidden = 0;
  /// A scan normalizer (stick-breaking): its kernels walk a row's key tiles from the
  /// last to the first carrying S (and B backward): scanTile, scanGradTile.
  bool scan = false;
  /// A scan with `left_over current`: O_i += r_i·v_i.
  bool scanLeftOver = false;
  /// An implicit normalizer (sparsemax, α-entmax): τ_i solved per row (thresholdForward);
  /// no decode split (τ_i needs every key of its row) and no attn_bwd_preprocess: attn_bwd_dq
  /// finds r_i first (thresholdCorrection), then attn_bwd_dkdv reads it.
  bool implicit = false;
  /// Whether attn_fwd_split and attn_fwd_merge exist (DECODE's max_rows > 0): not for an
  /// implicit normalizer, nor for a scan's left-over, which attn_fwd_merge has no V for.
  bool decodes() const { return !implicit && !scanLeftOver; }
  /// Whether attn_bwd_dq runs before attn_bwd_dkdv and finds each row's D itself, so
  /// that there is no attn_bwd_preprocess (BACKWARD_PLAN's rows_first): a scan's rows
  /// carry S and B from their last key, an implicit normalizer's finds r_i first.
  bool rowsFirst() const { return scan || implicit; }
  /// A scan's per-key-tile row states, parameters of attn_bwd_dq (which stores them)
  /// and attn_bwd_dkdv (which reads them), in that order: BACKWARD_PLAN's tile_states.
  SmallVector<StringRef> tileStates() const {
    if (!scan)
      return {};
    return {kTileLogSurvival, kTileSuffix};
  }
  /// ", " and the tile states' names, for a signature ("" where there are none).
  std::string tileStateParams() const {
    std::string text;
    for (StringRef state : tileStates())
      text += (", " + state).str();
    return text;
  }
  /// BLOCK_HIDDEN: `hidden` padded to a power of two of at least 16 (a multiple of
  /// kAdditiveHiddenChunk).
  int64_t blockHidden() const { return std::max<int64_t>(16, llvm::PowerOf2Ceil(hidden)); }
  /// The additive contraction's HIDDEN_CHUNK: BLOCK_HIDDEN up to kAdditiveOneChunk,
  /// else kAdditiveHiddenChunk.
  int64_t hiddenChunk() const {
    return blockHidden() <= kAdditiveOneChunk ? blockHidden() : kAdditiveHiddenChunk;
  }
  /// The mask's tiles are classified (block_sparsity `indices`): the loops skip
  /// the tiles it keeps no pair of and evaluate it only on the partial ones.
  bool blockSparse = false;
};

LogicalResult KernelPrinter::checkCovered() {
  FailureOr<Algorithm> algorithm = requireAlgorithm(kernel);
  if (failed(algorithm))
    return failure();
  if (!kernel.getFunctions() || kernel.getFunctions()->empty())
    return kernel.emitOpError("has no scalar functions; run attn-derive-backward first");
  auto refuse = [&](const Twine &feature) {
    return kernel.emitOpError("uses ")
           << feature << ", which the Triton emitter does not cover yet";
  };
  if (*algorithm == Algorithm::Kernelised)
    return refuse("the kernelised (linear-time) form");
  if (ScoreOp score = kernel.getScoreOp()) {
    ContractKind contract = score.getContract();
    bilinear = contract == ContractKind::Bilinear;
    additive = contract == ContractKind::Additive;
    projected = score.getNumWeights() && !bilinear && !additive;
    cosine = contract == ContractKind::Cosine;
    featureMap = score.hasFeatureMap();
  }
  online = *algorithm == Algorithm::Online;
  scan = *algorithm == Algorithm::Scan;
  implicit = *algorithm == Algorithm::Implicit;
  scanLeftOver = scan && kernel.getNormalizerOp().getLeftOverToCurrent();
  normalizer = kernel.getNormalizerOp();
  functions = cast<KernelFunctionsAttr>((*kernel.getFunctions())[0]);
  numNormalizerParams = normalizer.getNumParams();
  for (auto [index, name] : llvm::enumerate(kernelParamNames(kernel))) {
    params.push_back(pythonName(name, index));
    paramSuffixes.push_back(StringRef(params.back()).starts_with("p_") ? name.str()
                                                                        : params.back());
  }
  weights = kernelWeights(kernel);
  if (additive || projected)
    hidden = weights[0].shape[0]; // W_q [n, d] or W [m, d]
  slotCount = params.size();
  for (const KernelWeight &weight : weights)
    slotCount += weight.size;
  blockSparse = kernel.getMaskOp() && kernel.getBlockSparsity() == BlockSparsity::Indices;
  inputs = kernelInputs(kernel);
  for (auto [index, input] : llvm::enumerate(inputs)) {
    std::string name = pythonName(input.getSymName(), index);
    tables.push_back({"t" + name.substr(1), static_cast<unsigned>(input.getRank())});
  }
  return success();
}

LogicalResult KernelPrinter::printFunctions() {
  ModuleOp module = kernel->getParentOfType<ModuleOp>();
  std::string text;
  llvm::raw_string_ostream body(text);
  llvm::StringSet<> helpers;
  auto emit = [&](FlatSymbolRefAttr symbol, StringRef name,
                  ArrayRef<StringRef> leading) -> LogicalResult {
    if (!symbol)
      return success();
    auto function = module.lookupSymbol<func::FuncOp>(symbol);
    assert(function && "the kernel verifier checks that its functions exist");
    SmallVector<std::string> args(leading.begin(), leading.end());
    args.append(params.begin(), params.end());
    FunctionPrinter printer(body, helpers, tables);
    return printer.print(function, name, args);
  };
  auto emitEach = [&](ArrayAttr symbols, StringRef prefix, ArrayRef<std::string> by,
                      ArrayRef<StringRef> leading) -> LogicalResult {
    if (!symbols)
      return success();
    for (auto [symbol, param] : llvm::zip(symbols, by))
      if (auto ref = dyn_cast_or_null<FlatSymbolRefAttr>(symbol))
        if (failed(emit(ref, (prefix + "_d_" + param).str(), leading)))
          return failure();
    return success();
  };
  const SmallVector<StringRef> pair{"s", "m", "b", "h", "i", "j"};
  const SmallVector<StringRef> scoreArgs{"raw", "b", "h", "i", "j"};
  const SmallVector<StringRef> row{"m", "b", "h", "i"};
  ArrayRef<std::string> normalizerParams =
      ArrayRef(paramSuffixes).take_front(numNormalizerParams);
  ArrayRef<std::string> scoreParams = ArrayRef(paramSuffixes).drop_front(numNormalizerParams);
  // φ and φ' take the element alone (no params or tables: ScalarFunctions.h).
  for (auto [symbol, name] : {std::pair(functions.getFeature(), "feature"),
                              std::pair(functions.getFeatureDx(), "feature_dx")})
    if (symbol && failed(FunctionPrinter(body, helpers, {})
                             .print(module.lookupSymbol<func::FuncOp>(symbol), name, {"x"})))
      return failure();
  if (failed(emit(functions.getScore(), "score_mod", scoreArgs)) ||
      failed(emit(functions.getMask(), "mask", {"b", "h", "i", "j"})) ||
      failed(emit(functions.getStabilizer(), "stabilizer", {"s", "b", "h", "i", "j"})) ||
      failed(emit(functions.getNumerator(), "numerator", pair)) ||
      failed(emit(functions.getDenominator(), "denominator", pair)) ||
      failed(emit(functions.getOffset(), "offset", row)) ||
      failed(emit(functions.getOffsetStab(), "offset_stabilizer", {"b", "h", "i"})) ||
      failed(emit(functions.getNumeratorDs(), "numerator_ds", pair)) ||
      failed(emit(functions.getDenominatorDs(), "denominator_ds", pair)) ||
      failed(emit(functions.getScoreDs(), "score_mod_draw", scoreArgs)) ||
      failed(emitEach(functions.getNumeratorDp(), "numerator", normalizerParams, pair)) ||
      failed(emitEach(functions.getDenominatorDp(), "denominator", normalizerParams, pair)) ||
      failed(emitEach(functions.getOffsetDp(), "offset", normalizerParams, row)) ||
      failed(emitEach(functions.getScoreDp(), "score_mod", scoreParams, scoreArgs)))
    return failure();
  for (auto [site, read] : llvm::enumerate(tableGrads())) {
    ArrayRef<StringRef> leading = read.getRole() == TableGradRole::Score    ? scoreArgs
                                  : read.getRole() == TableGradRole::Offset ? row
                                                                            : pair;
    if (failed(emit(read.getDerivative(), tableGradName(site, "d"), leading)) ||
        failed(emit(read.getPosition(), tableGradName(site, "at"), leading)))
      return failure();
  }
  if (blockSparse && failed(printTileClass(body, helpers)))
    return failure();
  if (additive)
    requireHelper(helpers, "tanh_"); // the templates' tanh tile
  os << "# --- the kernel's scalar functions (attn-derive-backward), as Triton ---\n\n";
  printHelpers(helpers, os);
  os << text;
  return success();
}

LogicalResult KernelPrinter::printTileClass(llvm::raw_ostream &body, llvm::StringSet<> &helpers) {
  // The interval arithmetic of attn-analyze-block-sparsity, built as a scalar
  // function of the tile's bounds in a scratch module and printed like the others.
  Location loc = kernel.getLoc();
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(loc);
  OpBuilder builder = OpBuilder::atBlockEnd(scratch->getBody());
  Type index = builder.getIndexType(), i1 = builder.getI1Type();
  auto function = func::FuncOp::create(builder, loc, "tile_class",
                                       builder.getFunctionType(SmallVector<Type>(6, index), {i1, i1}));
  Block *entry = function.addEntryBlock();
  ImplicitLocOpBuilder b(loc, OpBuilder::atBlockEnd(entry));
  ValueRange args = entry->getArguments();
  TileRanges tile{args[0], args[1], {args[2], args[3]}, {args[4], args[5]}};
  TileClass verdict = emitTileClass(b, kernel.getMaskOp(), tile,
                                    [](const MaskRead &, const TileRanges &) -> IntRange {
                                      llvm_unreachable("an `indices` mask reads no table");
                                    });
  func::ReturnOp::create(b, ValueRange{verdict.anyKept, verdict.allKept});
  FunctionPrinter printer(body, helpers, {});
  return printer.print(function, "tile_class",
                       {"b", "h", "row_lo", "row_hi", "key_lo", "key_hi"});
}

void KernelPrinter::skipTiles(int indent, StringRef rowLo, StringRef rowHi, StringRef keyStart,
                              bool packedHeads) {
  line(indent, "# Block sparsity (attn-analyze-block-sparsity): the mask over the whole tile.");
  std::string bounds =
      llvm::formatv("{0}, {1}, {2}, {2} + BLOCK_N - 1)", rowLo, rowHi, keyStart).str();
  if (!packedHeads) {
    line(indent, "any_kept, all_kept = tile_class(b, h, " + bounds);
    return;
  }
  // Any pair kept by one head, and all pairs by every head, over the rows' span.
  line(indent, "any_kept, all_kept = tile_class(b, head_lo, " + bounds);
  line(indent, "for other in range(head_lo + 1, head_hi + 1):");
  line(indent + 4, "other_any, other_all = tile_class(b, other, " + bounds);
  line(indent + 4, "any_kept = any_kept | other_any");
  line(indent + 4, "all_kept = all_kept & other_all");
}

std::string KernelPrinter::tileLoad(StringRef pointer, StringRef base, StringRef rows,
                                    StringRef rowStride, StringRef rowLimit, StringRef cols,
                                    StringRef colStride, StringRef colLimit) const {
  std::string mask = llvm::formatv("({0}[None, :] < {1})", cols, colLimit).str();
  if (!rowLimit.empty())
    mask = llvm::formatv("({0}[:, None] < {1}) & ", rows, rowLimit).str() + mask;
  return llvm::formatv("tl.load({0} + {1} + {2}[:, None] * {3} + {4}[None, :] * {5}, "
                       "mask={6}, other=0.0)",
                       pointer, base, rows, rowStride, cols, colStride, mask)
      .str();
}

void KernelPrinter::loadParams(int indent) {
  for (auto [index, param] : llvm::enumerate(params))
    line(indent, param + " = tl.load(Params + " + Twine(index) + ")");
}

void KernelPrinter::keyEnd(int indent) {
  line(indent, "# Absolute positions (abi.h): query row r of batch b is at q_start + r, key");
  line(indent, "# row n at key_start + n; int64, as they and the regions' indices are on the CPU.");
  line(indent, "q_start = tl.load(QueryStarts + b).to(tl.int64)");
  line(indent, "key_start = tl.load(KeyStarts + b).to(tl.int64)");
  line(indent, "kv_end = NK");
  line(indent, "if HAS_KEY_LENGTHS:");
  line(indent + 4, "kv_end = tl.minimum(NK, tl.load(KeyLengths + b).to(tl.int32))");
  line(indent, "# Causal: key row n pairs with query row m where n - m <= q_start - key_start, in");
  line(indent, "# int32 (int64 positions compared on every tile spilled registers, ptxas).");
  line(indent, "causal_shift = tl.minimum(tl.maximum(q_start - key_start, -2147483647), "
               "2147483647).to(tl.int32)");
}

void KernelPrinter::scoreTile(int indent, StringRef live) {
  scoreValues(indent);
  line(indent, "keep = " + live + " & (offs_n[None, :] < kv_end)");
  line(indent, "if IS_CAUSAL:");
  line(indent + 4, "keep = keep & (offs_n[None, :] - offs_m[:, None] <= causal_shift)");
  if (!functions.getMask())
    return;
  if (blockSparse) {
    line(indent, "if not all_kept:");
    indent += 4;
  }
  line(indent, "keep = keep & mask(" + withParams("b, h, i, j") + ")");
}

void KernelPrinter::scoreValues(int indent) {
  if (additive) {
    line(indent, "raw = additive_scores(q_rows, k_rows, " + additiveWeights() +
                     ", HEAD_DIM, BLOCK_D, DOT_PRECISION) * scale");
  } else {
    line(indent, "raw = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale");
  }
  if (functions.getScore())
    line(indent, "s = score_mod(" + withParams("raw, b, h, i, j") + ")");
  else
    line(indent, "s = raw");
}

/// `value` at the pairs the tile keeps, `dropped` elsewhere; every pair of a whole tile
/// (`masked` false) is kept.
static std::string keptOnly(bool masked, const std::string &value, StringRef dropped) {
  return masked ? "tl.where(keep, " + value + ", " + dropped.str() + ")" : value;
}

void KernelPrinter::scoreGrad(int indent, bool masked) {
  line(indent, online ? "shift = row_max[:, None]" : "shift = 0.0");
  line(indent, "dp = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)");
  if (implicit)
    line(indent, "dp = " + rowsAt(indent).thresholdPairDP("dp", "delta[:, None]").text);
  std::string gradient = "numerator_ds(" + withParams("s, shift, b, h, i, j") + ") * dp";
  if (functions.getDenominatorDs())
    gradient = "(" + gradient + " - denominator_ds(" + withParams("s, shift, b, h, i, j") +
               ") * delta[:, None])";
  line(indent, "ds = " + keptOnly(masked, gradient + " * inv_c", "0.0"));
  scoreDraw(indent, masked);
}

void KernelPrinter::scoreDraw(int indent, bool masked) {
  if (functions.getScoreDs())
    line(indent,
         "draw = " +
             keptOnly(masked, "ds * score_mod_draw(" + withParams("raw, b, h, i, j") + ")", "0.0"));
  else
    line(indent, "draw = ds");
}

void KernelPrinter::signature(StringRef name, StringRef pointers, ArrayRef<StringRef> strided,
                              bool gradients, StringRef scalars) {
  os << "@triton.jit\ndef " << name << "(\n    " << pointers << ",\n";
  for (StringRef tensor : strided) {
    // Rows of q, o, do and dq are queries (m), of k, v, dk and dv keys (n).
    StringRef rows = tensor.back() == 'q' || tensor.back() == 'o' ? "m" : "n";
    os << llvm::formatv("    stride_{0}b, stride_{0}h, stride_{0}{1}, stride_{0}d,\n", tensor, rows);
  }
  if (!tables.empty())
    os << "    " << tableParameters(gradients) << "\n";
  os << "    H, H_KV, NQ, NK, HEAD_DIM, HEAD_DIM_V, scale, KeyStarts,"
     << (scalars.empty() ? "" : " ") << scalars;
  os << R"(
    IS_CAUSAL: tl.constexpr, HAS_KEY_LENGTHS: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):
)";
}

void KernelPrinter::rowProgram() {
  os << R"(    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    h_kv = h // (H // H_KV)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    row_in = offs_m < NQ
)";
  loadWeight(4);
  loadContracted(4, "q", tileLoad("Q", "b * stride_qb + h * stride_qh", "offs_m", "stride_qm",
                                   "NQ", "offs_d", "stride_qd", "HEAD_DIM"));
  keyEnd(4);
  line(4, "pos_m = offs_m + q_start");
  line(4, "i = pos_m[:, None]");
  line(4, "key_stop = kv_end");
  line(4, "if IS_CAUSAL:  # key rows at positions up to the block's last query");
  line(8, "key_stop = tl.minimum(kv_end, tl.maximum((start_m + 1) * BLOCK_M + q_start - "
          "key_start, 0)).to(tl.int32)");
}

void KernelPrinter::loadContracted(int indent, StringRef name, const std::string &load) {
  if (additive || projected) {
    line(indent, name + "_rows = " + load);
    if (additive) // additive_scores projects the rows a hidden chunk at a time
      return;
    std::string projection = "tl.dot(" + name.str() + "_rows, tl.trans(" + projectionWeight(name) +
                             ").to(" + name.str() + "_rows.dtype), input_precision=DOT_PRECISION)";
    line(indent, name + "_proj = " + projection);
    line(indent, "# φ of the hidden columns only (φ(0) of a padding column may not be 0).");
    line(indent, name + " = tl.where(offs_hidden[None, :] < HIDDEN, " +
                     (featureMap ? "feature(" + name + "_proj)" : name + "_proj") + ", 0.0).to(" +
                     name + "_rows.dtype)");
    return;
  }
  if (featureMap) {
    line(indent, name + "_rows = " + load);
    line(indent, "# φ of the head dim's columns only (φ(0) of a padding column may not be 0).");
    line(indent, name + " = tl.where(offs_d[None, :] < HEAD_DIM, feature(" + name +
                     "_rows.to(tl.float32)), 0.0).to(" + name + "_rows.dtype)");
  } else if (cosine) {
    line(indent, name + "_rows = " + load);
    line(indent, name + " = unit_rows(" + name + "_rows)");
  } else if (bilinear && name == "q") {
    line(indent, "q_rows = " + load);
    line(indent, "q = tl.dot(q_rows, weight.to(q_rows.dtype), input_precision=DOT_PRECISION)"
                 ".to(q_rows.dtype)  # q·W");
  } else {
    line(indent, name + " = " + load);
  }
}

std::string KernelPrinter::chainRows(StringRef name, StringRef gradient) const {
  if (additive || projected) // chainProjection's d_<name>_proj
    return ("tl.dot(d_" + name + "_proj, " + projectionWeight(name) +
            ", input_precision=DOT_PRECISION)")
        .str();
  if (featureMap)
    return ("(feature_dx(" + name + "_rows.to(tl.float32)) * " + gradient + ")").str();
  if (cosine)
    return ("through_unit_rows(" + name + "_rows, " + gradient + ")").str();
  if (bilinear && name == "q")
    return ("tl.dot(" + gradient + ", tl.trans(weight), input_precision=DOT_PRECISION)").str();
  return ("(" + gradient + ")").str();
}

void KernelPrinter::loadWeight(int indent) {
  if (additive || projected) {
    line(indent, "offs_hidden = tl.arange(0, BLOCK_HIDDEN)");
    return;
  }
  if (!bilinear)
    return;
  line(indent, llvm::formatv("weight = tl.load(Params + {0} + offs_d[:, None] * HEAD_DIM + "
                             "offs_d[None, :], mask=(offs_d[:, None] < HEAD_DIM) & "
                             "(offs_d[None, :] < HEAD_DIM), other=0.0)",
                             weights[0].offset)
                   .str());
}

void KernelPrinter::additiveGradients(int indent, StringRef name, StringRef gradient) {
  bool keys = name == "k";
  line(indent, keys ? "# ∂raw/∂c_jn = v_n·(1 - tanh²), ∂raw/∂v_n = tanh, summed over the tile's "
                      "rows,"
                    : "# ∂raw/∂a_in = v_n·(1 - tanh²), summed over the tile's keys,");
  line(indent, "# a hidden chunk at a time (the tanh tiles of additive_scores, recomputed).");
  line(indent, "for first in range(0, BLOCK_HIDDEN, HIDDEN_CHUNK):");
  line(indent + 4, "tanh_tile, weight_v = additive_chunk(q_rows, k_rows, " + additiveWeights() +
                       ", first, HEAD_DIM, BLOCK_D, DOT_PRECISION)");
  line(indent + 4, gradient + " = into_chunk(" + gradient +
                       ", tl.sum(draw[:, :, None] * weight_v[None, None, :] * "
                       "(1.0 - tanh_tile * tanh_tile), " + (keys ? "0" : "1") + "), first)");
  if (keys)
    line(indent + 4, "d_weight_v = into_chunk(d_weight_v, "
                     "tl.sum(tl.sum(draw[:, :, None] * tanh_tile, 0), 0)[None, :], first)");
}

void KernelPrinter::chainProjection(int indent, StringRef name, StringRef gradient,
                                    StringRef slots, StringRef program) {
  std::string proj = ("d_" + name + "_proj").str();
  if (projected && featureMap)
    line(indent, proj + " = feature_dx(" + name + "_proj) * (" + gradient + ")");
  else
    line(indent, proj + " = " + gradient);
  const KernelWeight &weight = weights[projected || name == "q" ? 0 : 1];
  line(indent, "# d" + weight.name +
                   " = d_projᵀ·rows of this program, in its own slot (summed in a fixed order).");
  line(indent, llvm::formatv("tl.store({0} + ({1}) * {2} + {3} + offs_hidden[:, None] * HEAD_DIM + "
                             "offs_d[None, :], tl.dot(tl.trans({4}), {5}_rows.to(tl.float32), "
                             "input_precision=DOT_PRECISION), mask=(offs_hidden[:, None] < HIDDEN) "
                             "& (offs_d[None, :] < HEAD_DIM))",
                             slots, program, slotCount, weight.offset, proj, name)
                   .str());
}

std::string KernelPrinter::weightsText() {
  std::string text;
  for (const KernelWeight &weight : weights) {
    SmallVector<std::string> extents;
    for (int64_t extent : weight.shape)
      extents.push_back(std::to_string(extent));
    std::string init = isa<StringAttr>(weight.init)
                           ? "\"" + cast<StringAttr>(weight.init).getValue().str() + "\""
                           : floatLiteral(cast<FloatAttr>(weight.init).getValueAsDouble());
    text += "(\"" + weight.name.str() + "\", (" + llvm::join(extents, ", ") + ",), " +
            std::to_string(weight.offset) + ", " + init + "), ";
  }
  return text;
}

void KernelPrinter::printRowHelpers() {
  if (additive || projected)
    os << "@triton.jit\ndef projection_weight(W, HEAD_DIM, BLOCK_D: tl.constexpr):\n"
       << "    # A weight [HIDDEN, HEAD_DIM] (row-major, float32) as a [BLOCK_HIDDEN, BLOCK_D] "
          "tile.\n"
       << "    rows = tl.arange(0, BLOCK_HIDDEN)[:, None]\n"
       << "    cols = tl.arange(0, BLOCK_D)[None, :]\n"
       << "    return tl.load(W + rows * HEAD_DIM + cols, mask=(rows < HIDDEN) & "
          "(cols < HEAD_DIM), other=0.0)\n\n\n";
  if (additive)
    os << R"(@triton.jit
def hidden_chunk(rows, W, first, HEAD_DIM, BLOCK_D: tl.constexpr, DOT_PRECISION: tl.constexpr):
    # Columns first .. first + HIDDEN_CHUNK of rows·Wᵀ (W [HIDDEN, HEAD_DIM], float32).
    hidden = first + tl.arange(0, HIDDEN_CHUNK)[:, None]
    cols = tl.arange(0, BLOCK_D)[None, :]
    w = tl.load(W + hidden * HEAD_DIM + cols, mask=(hidden < HIDDEN) & (cols < HEAD_DIM), other=0.0)
    return tl.dot(rows, tl.trans(w).to(rows.dtype), input_precision=DOT_PRECISION)


@triton.jit
def additive_chunk(q_rows, k_rows, WQ, WK, WV, first, HEAD_DIM, BLOCK_D: tl.constexpr,
                   DOT_PRECISION: tl.constexpr):
    # tanh(a_in + c_jn) [rows, keys, HIDDEN_CHUNK] of the hidden columns first ..
    # first + HIDDEN_CHUNK (a = q·W_qᵀ, c = k·W_kᵀ), and their v_n (0 on padding).
    a = hidden_chunk(q_rows, WQ, first, HEAD_DIM, BLOCK_D, DOT_PRECISION)
    c = hidden_chunk(k_rows, WK, first, HEAD_DIM, BLOCK_D, DOT_PRECISION)
    hidden = first + tl.arange(0, HIDDEN_CHUNK)
    return tanh_(a[:, None, :] + c[None, :, :]), tl.load(WV + hidden, mask=hidden < HIDDEN, other=0.0)


@triton.jit
def additive_scores(q_rows, k_rows, WQ, WK, WV, HEAD_DIM, BLOCK_D: tl.constexpr,
                    DOT_PRECISION: tl.constexpr):
    # Σ_n v_n·tanh(a_in + c_jn) [rows, keys], one chunk of hidden columns at a time: the
    # registers of the tanh tile do not grow with HIDDEN.
    raw = tl.zeros([q_rows.shape[0], k_rows.shape[0]], tl.float32)
    for first in range(0, BLOCK_HIDDEN, HIDDEN_CHUNK):
        tanh_tile, weight_v = additive_chunk(q_rows, k_rows, WQ, WK, WV, first, HEAD_DIM, BLOCK_D,
                                             DOT_PRECISION)
        raw += tl.sum(tanh_tile * weight_v[None, None, :], 2)
    return raw


@triton.jit
def into_chunk(acc, part, first):
    # acc [rows, HIDDEN_CHUNKS, HIDDEN_CHUNK] with part [rows, HIDDEN_CHUNK] added to the
    # chunk of hidden column first (a register tile has no dynamic slice).
    chunk = tl.arange(0, HIDDEN_CHUNKS) == first // HIDDEN_CHUNK
    return acc + tl.where(chunk[None, :, None], part[:, None, :], 0.0)


)";
  if (!cosine)
    return;
  os << "# The cosine contraction: q and k contract as unit rows x/|x|_eps,\n"
     << "# |x|_eps = sqrt(x.x + eps^2), in float32, stored back in x's type.\n"
     << "@triton.jit\ndef unit_rows(x):\n"
     << "    rows = x.to(tl.float32)\n"
     << "    inverse_norm = 1.0 / tl.sqrt(tl.sum(rows * rows, 1) + "
     << floatLiteral(kCosineEpsilon * kCosineEpsilon) << ")\n"
     << "    return (rows * inverse_norm[:, None]).to(x.dtype)\n\n\n"
     << "@triton.jit\ndef through_unit_rows(x, d_unit):\n"
     << "    # u = x/n, n = |x|_eps: dx = (du - u (u.du)) / n.\n"
     << "    rows = x.to(tl.float32)\n"
     << "    inverse_norm = 1.0 / tl.sqrt(tl.sum(rows * rows, 1) + "
     << floatLiteral(kCosineEpsilon * kCosineEpsilon) << ")\n"
     << "    unit = rows * inverse_norm[:, None]\n"
     << "    along = tl.sum(unit * d_unit, 1)\n"
     << "    return (d_unit - unit * along[:, None]) * inverse_norm[:, None]\n\n\n";
}

void KernelPrinter::loadKeysAndValues(int indent, bool wholeTile) {
  StringRef keyLimit = wholeTile ? "" : "kv_end";
  loadContracted(indent, "k", tileLoad("K", "b * stride_kb + h_kv * stride_kh", "offs_n",
                                       "stride_kn", keyLimit, "offs_d", "stride_kd", "HEAD_DIM"));
  line(indent, "v = " + tileLoad("V", "b * stride_vb + h_kv * stride_vh", "offs_n", "stride_vn",
                                 keyLimit, "offs_dv", "stride_vd", "HEAD_DIM_V"));
}

int KernelPrinter::openKeyTiles(StringRef first, StringRef stop, bool packedHeads,
                                bool lastToFirst, int indent, bool wholeTiles) {
  int body = indent + 4;
  if (lastToFirst) {
    line(indent, "key_tiles = (" + stop + " - " + first + " + BLOCK_N - 1) // BLOCK_N");
    line(indent, "for back in range(0, key_tiles):");
    line(body, "start_n = " + first + " + (key_tiles - 1 - back) * BLOCK_N");
  } else {
    line(indent, "for start_n in range(" + first + ", " + stop + ", BLOCK_N):");
  }
  line(body, "offs_n = start_n + tl.arange(0, BLOCK_N)");
  line(body, "j = (offs_n + key_start)[None, :]");
  int tileIndent = body;
  if (blockSparse) {
    if (packedHeads)
      skipTiles(body, "row_lo", "row_hi", "start_n + key_start", /*packedHeads=*/true);
    else
      skipTiles(body, "start_m * BLOCK_M + q_start", "start_m * BLOCK_M + q_start + BLOCK_M - 1",
                "start_n + key_start");
    line(body, "if any_kept:");
    tileIndent = body + 4;
  }
  loadKeysAndValues(tileIndent, wholeTiles);
  return tileIndent;
}

void KernelPrinter::loadRowStatistics(int indent) {
  line(indent, "row_max = tl.load(RowMax + bh * NQ + offs_m, mask=row_in, other=0.0)");
  line(indent, "row_sum = tl.load(RowSum + bh * NQ + offs_m, mask=row_in, other=0.0)");
  line(indent, "delta = tl.load(Delta + bh * NQ + offs_m, mask=row_in, other=0.0)");
  if (implicit) {
    line(indent, "# A threshold row (row_max = tau_i, delta = r_i): its pairs' gradients at C = 1.");
    line(indent, "live = " + rowsAt(indent).rowLive("row_sum").text);
    line(indent, "inv_c = tl.where(live, 1.0, 0.0)[:, None]");
    return;
  }
  rowsAt(indent).prepareBackward("row_max", "row_sum", "delta");
  line(indent, "inv_c = inv_c[:, None]  # a column of the tiles");
}

void KernelPrinter::thresholdPairs(int indent) {
  TritonRows rows = rowsAt(indent);
  line(indent, "# g's argument x = s - tau_i, and the keys above tau_i.");
  line(indent, "s = " + rows.thresholdArgument("s", "row_max[:, None]").text);
  line(indent, "keep = keep & (" + rows.thresholdAbove("s").text + ")");
}

std::string KernelPrinter::schedulesText() {
  std::string text;
  ArrayAttr schedules = kernel.getGpuScheduleAttr();
  if (!schedules)
    return text;
  for (auto schedule : schedules.getAsRange<GpuScheduleAttr>()) {
    std::string directions =
        additive ? additiveTiles()
                 : llvm::formatv("forward=({0}, {1}, {2}, {3}), backward=({4}, {5}, {6}, {7}), "
                                 "decode=({8}, {9}, {10}, {11})",
                                 schedule.getBlockM(), schedule.getBlockN(), schedule.getNumWarps(),
                                 schedule.getNumStages(),
                                 projected ? kProjectedBackwardBlock : schedule.getBackwardBlockM(),
                                 projected ? kProjectedBackwardBlock : schedule.getBackwardBlockN(),
                                 schedule.getBackwardNumWarps(),
                                 schedule.getBackwardNumStages(), kDecodeBlockM, kDecodeBlockN,
                                 kDecodeWarps, kDecodeStages)
                       .str();
    text += llvm::formatv("    (\"{0}\", \"{1}\", {2}): dict({3}),\n", schedule.getChip(),
                          elementTypeName(schedule.getType()), schedule.getHeadDim(), directions)
                .str();
  }
  return text;
}

std::string KernelPrinter::inputsText() {
  std::string text;
  for (auto [input, table] : llvm::zip(inputs, tables)) {
    Type element = input.getElementType();
    std::string type = isa<FloatType>(element)
                           ? "fp32"
                           : "i" + std::to_string(element.getIntOrFloatBitWidth());
    SmallVector<std::string> extents;
    for (int64_t extent : input.getTensorType().getShape())
      extents.push_back(std::to_string(ShapedType::isDynamic(extent) ? -1 : extent));
    text += "(\"" + input.getSymName().str() + "\", \"" + table.name + "\", \"" + type +
            "\", (" + llvm::join(extents, ", ") + ",), " +
            (input.getLearnable() ? "True" : "False") + "), ";
  }
  return text;
}

void KernelPrinter::printHeader() {
  std::string names, inits;
  for (StringRef name : kernelParamNames(kernel))
    names += "\"" + name.str() + "\", ";
  for (double init : kernelParamInits(kernel))
    inits += floatLiteral(init) + ", ";
  std::optional<double> scale = fixedScoreScale(kernel);
  os << "\"\"\"Triton kernels of attn.kernel @" << kernel.getSymName()
     << ", generated by attn-compile --emit=triton.\n\n"
     << (implicit ? std::string("attn_fwd computes O and the row statistics (row_max τ, "
                                "row_sum Σ w);\n")
         : scan   ? std::string("attn_fwd computes O and the row statistics (row_max S, the "
                                  "log-survival of the row, row_sum 1);\n")
                  : llvm::formatv("attn_fwd computes O and the row statistics (row_max m, "
                                    "row_sum C{0});\n",
                                online ? "·e^-m" : "")
                      .str())
     << (decodes() ? "attn_fwd_split and attn_fwd_merge the same for few query rows over many "
                     "keys, split over\nchunks of keys;\n"
                   : "")
     << (rowsFirst() ? "attn_bwd_dq (each row's D first) and attn_bwd_dkdv the gradients "
                       "(DESIGN.md §2).\n"
                     : "attn_bwd_preprocess, attn_bwd_dkdv and attn_bwd_dq the gradients "
                       "(DESIGN.md §2).\n")
     << "attn.triton_backend launches them.\n\"\"\"\n"
     << "import math\n\nimport triton\nimport triton.language as tl\n\n"
     << "KERNEL = \"" << kernel.getSymName() << "\"\n"
     << "ALGORITHM = \""
     << (scan       ? "scan"
         : implicit ? "implicit"
         : online   ? "online"
                    : "plain")
     << "\"\n"
     << "PARAM_NAMES = (" << names << ")\n"
     << "PARAM_INITS = (" << inits << ")\n"
     << "# Learnable weights after the params in Params: (name, shape, offset, init).\n"
     << "WEIGHTS = (" << weightsText() << ")\n"
     << "# Tensor inputs: (name, kernel argument, element type, extents (-1: the caller's),\n"
     << "# learnable). Float inputs are read as float32.\n"
     << "INPUTS = (" << inputsText() << ")\n"
     << "# Per (chip, storage type, head dim), attn-select-gpu-schedule's choice "
        "(#attn.gpu_schedule):\n"
     << "# (BLOCK_M, BLOCK_N, num_warps, num_stages) of attn_fwd, of the backward kernels and\n"
     << "# of the decode forward (attn_fwd_split and attn_fwd_merge: BLOCK_M rows of the GQA\n"
     << "# group).\n"
     << "SCHEDULES = {\n"
     << schedulesText() << "}\n"
     << "# Under the interpreter, and on a GPU without an entry above of its chip or an older "
        "one.\n"
     << "DEFAULT_SCHEDULE = dict("
     << (additive ? additiveTiles()
                  : llvm::formatv("forward=(64, 64, 4, 2), backward=({4}, {4}, 4, 2), "
                                  "decode=({0}, {1}, {2}, {3})",
                                  kDecodeBlockM, kDecodeBlockN, kDecodeWarps, kDecodeStages,
                                  projected ? kProjectedBackwardBlock : 64)
                        .str())
     << ")\n"
     << "# When the launcher runs the decode forward (docs/gpu.md): at most max_rows query rows,\n"
     << "# attn_fwd's programs fewer than the GPU's SMs; key chunks for programs_per_sm\n"
     << "# programs per SM.\n"
     << "DECODE = dict(max_rows=" << (decodes() ? kDecodeBlockM : 0) << ", programs_per_sm=2)\n"
     << "# How the launcher runs the backward (the launch description's \"backward\"):\n"
     << "# rows_first, attn_bwd_dq before attn_bwd_dkdv, finding each row's D itself (no\n"
     << "# attn_bwd_preprocess); tile_states, the parameters of both that take a float32\n"
     << "# [B * H, key tiles of the backward, NQ] buffer of zeros each, in their order.\n"
     << "BACKWARD_PLAN = dict(rows_first=" << (rowsFirst() ? "True" : "False") << ", tile_states=(";
  const SmallVector<StringRef> states = tileStates();
  llvm::interleaveComma(states, os, [&](StringRef state) { os << "\"" << state << "\""; });
  os << (states.size() == 1 ? ",))\n" : "))\n");
  if (implicit)
    os << "# An implicit normalizer runs attn_fwd only: τ_i needs every key of its row, which\n"
       << "# no chunk of keys has (docs/gpu.md). Its iteration (RowEquations' threshold\n"
       << "# equations): the bracket's doublings, the Newton steps at most.\n"
       << "THRESHOLD_BRACKET_DOUBLINGS = tl.constexpr(" << thresholdBracketDoublings << ")\n"
       << "THRESHOLD_STEPS = tl.constexpr(" << thresholdSteps(24) << ")  # float32\n";
  if (scanLeftOver)
    os << "# A scan with a left-over (r_i·v_i) runs attn_fwd only: attn_fwd_merge has no V\n"
       << "# to add the query's own value to (docs/gpu.md).\n";
  os << "LOG2E = tl.constexpr(1.4426950408889634)\n";
  if (additive || projected)
    os << "# The projected rows' width (the additive contraction's hidden n, the projection's\n"
       << "# m) and its tile.\n"
       << "HIDDEN = tl.constexpr(" << hidden << ")\n"
       << "BLOCK_HIDDEN = tl.constexpr(" << blockHidden() << ")\n";
  if (additive)
    os << "# The additive contraction's tanh tiles: HIDDEN_CHUNK hidden columns at a time.\n"
       << "HIDDEN_CHUNK = tl.constexpr(" << hiddenChunk() << ")\n"
       << "HIDDEN_CHUNKS = tl.constexpr(" << blockHidden() / hiddenChunk() << ")\n";
  os << "\n\n"
     << "def score_scale(head_dim):\n"
     << "    \"\"\"The factor of the contraction q·k.\"\"\"\n";
  if (projected && !scale) // q·k of the projected rows: 1/sqrt(m)
    scale = 1.0 / std::sqrt(static_cast<double>(hidden));
  if (scale)
    os << "    return " << floatLiteral(*scale) << "\n\n\n";
  else
    os << "    return 1.0 / math.sqrt(head_dim)\n\n\n";
}

void KernelPrinter::assignState(int indent, const TritonRows::State &next) {
  TritonRows::State running = runningState();
  if (online && !(next.max == running.max))
    line(indent, "m_i = " + next.max.text);
  if (!(next.sum == running.sum))
    line(indent, "l_i = " + next.sum.text);
  line(indent, "count = " + next.count.text);
}

void KernelPrinter::forwardState(int indent, const TritonRows::State &start) {
  if (online)
    line(indent, "m_i = " + start.max.text);
  line(indent, "l_i = " + start.sum.text);
  line(indent, "count = " + start.count.text);
  line(indent, "acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)");
}

/// alpha[:, None]: a row's factor for its output row (null stays null).
static PyValue outputColumn(const PyValue &alpha) {
  return alpha ? PyValue(alpha.text + "[:, None]") : PyValue();
}

void KernelPrinter::forwardTile(int tileIndent, bool masked) {
  TritonRows rows = rowsAt(tileIndent);
  // Where every pair is kept, the tile's values as they are and BLOCK_N kept keys a row.
  TritonRows::Rescale step{"0.0", {}};
  if (online)
    step = rows.advanceMax(
        "m_i",
        "tl.max(" +
            keptOnly(masked, "stabilizer(" + withParams("s, b, h, i, j") + ")", "float(\"-inf\")") +
            ", 1)",
        /*mayBeEmpty=*/true);
  line(tileIndent, "shift = " + (online ? step.max.text + "[:, None]" : step.max.text));
  line(tileIndent,
       "g = " + keptOnly(masked, "numerator(" + withParams("s, shift, b, h, i, j") + ")", "0.0"));
  PyValue hSum;
  if (functions.getDenominator())
    hSum = "tl.sum(" +
           keptOnly(masked, "denominator(" + withParams("s, shift, b, h, i, j") + ")", "0.0") +
           ", 1)";
  assignState(tileIndent,
              rows.foldTile(runningState(), step.max, step.alpha, hSum,
                            masked ? PyValue("tl.sum(keep.to(tl.float32), 1)") : "BLOCK_N"));
  line(tileIndent, "acc = " + rows.foldOutput("acc", outputColumn(step.alpha),
                                              "tl.dot(g.to(v.dtype), v, "
                                              "input_precision=DOT_PRECISION)")
                                  .text);
}

void KernelPrinter::forwardEpilogue() {
  TritonRows rows = rowsAt(4);
  TritonRows::RowResult result = rows.finalize(runningState(), "l_i", "b, h, pos_m");
  line(4, "tl.store(Out + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + "
          "offs_dv[None, :] * "
          "stride_od, (acc * " + result.outputScale.text +
              "[:, None]).to(Out.dtype.element_ty), "
              "mask=row_in[:, None] & (offs_dv[None, :] < HEAD_DIM_V))");
  line(4, "tl.store(RowMax + bh * NQ + offs_m, " + rows.rowMax(result).text + ", mask=row_in)");
  line(4, "tl.store(RowSum + bh * NQ + offs_m, " + rows.rowSum(result).text + ", mask=row_in)");
  os << "\n\n";
}

void KernelPrinter::scanTile(int indent) {
  TritonRows rows = rowsAt(indent);
  line(indent, "# The tile is a chunk of the row's keys farther than those folded so far: its");
  line(indent, "# pairs' S from 0, Σ d over the tile's kept keys after each (a masked pair adds");
  line(indent, "# nothing and does not advance S), then combined with the row's (S_i, acc).");
  line(indent, "d = tl.where(keep, denominator(" + withParams("s, 0.0, b, h, i, j") + "), 0.0)");
  TritonRows::ScanStep pair =
      rows.scanPair({PyValue("tl.cumsum(d, 1, reverse=True) - d", PyValue::Sum)},
                    "tl.where(keep, numerator(" + withParams("s, 0.0, b, h, i, j") + "), 0.0)",
                    "d");
  TritonRows::ScanCombined combined = rows.scanCombine({"tl.sum(d, 1)"}, {"S_i"});
  std::string tileOutput =
      "tl.dot(" + pair.weight.text + ".to(v.dtype), v, input_precision=DOT_PRECISION)";
  TritonRows::ScanCombined byColumn = combined;
  byColumn.fartherFactor = outputColumn(combined.fartherFactor);
  line(indent, "acc = " + rows.scanCombineOutput(byColumn, tileOutput, "acc").text);
  line(indent, "S_i = " + combined.state.logSurvival.text);
}

void KernelPrinter::scanEpilogue(bool leftOver) {
  TritonRows rows = rowsAt(4);
  if (leftOver) {
    line(4, "# The left-over r = e^S to the query's own key (abi.h: key row pos - key_start),");
    line(4, "# where that key is below the row's key length; a query without one gets none.");
    line(4, "own = pos_m - key_start");
    line(4, "own_in = row_in & (own >= 0) & (own < kv_end)");
    line(4, "v_own = tl.load(V + b * stride_vb + h_kv * stride_vh + own[:, None] * stride_vn + "
            "offs_dv[None, :] * stride_vd, mask=own_in[:, None] & (offs_dv[None, :] < "
            "HEAD_DIM_V), other=0.0)");
    line(4, "acc = acc + " + outputColumn(rows.scanLeftOver({"S_i"})).text +
                " * v_own.to(tl.float32)");
  }
  line(4, "# No denominator: O = acc; row_max = S (log r), row_sum = C = 1.");
  line(4, "tl.store(Out + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + "
          "offs_dv[None, :] * stride_od, acc.to(Out.dtype.element_ty), "
          "mask=row_in[:, None] & (offs_dv[None, :] < HEAD_DIM_V))");
  line(4, "tl.store(RowMax + bh * NQ + offs_m, S_i, mask=row_in)");
  line(4, "tl.store(RowSum + bh * NQ + offs_m, tl.full([BLOCK_M], 1.0, tl.float32), mask=row_in)");
  os << "\n\n";
}

TritonRows::ScanStep KernelPrinter::scanPairTile(int indent) {
  line(indent, "shift = 0.0  # a scan shifts nothing, and its C is 1");
  line(indent, "d = tl.where(keep, denominator(" + withParams("s, shift, b, h, i, j") + "), 0.0)");
  line(indent, "# Each pair's S: the row's S_i, then Σ d over the tile's kept keys after it.");
  TritonRows::ScanStep step = rowsAt(indent).scanPair(
      {PyValue("S_i[:, None] + (tl.cumsum(d, 1, reverse=True) - d)", PyValue::Sum)},
      "tl.where(keep, numerator(" + withParams("s, shift, b, h, i, j") + "), 0.0)", "d");
  line(indent, "dp = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)");
  line(indent, "w_dp = w * dp");
  return step;
}

void KernelPrinter::scanGradTile(int indent) {
  TritonRows rows = rowsAt(indent);
  TritonRows::ScanStep step = scanPairTile(indent);
  line(indent, "inv_c = 1.0");
  line(indent, "# Each pair's B before it: the row's B_i, then Σ w·dP over the tile's keys after.");
  TritonRows::ScanBackwardStep next = rows.scanBackwardFold(
      {step.next, PyValue("B_i[:, None] + (tl.cumsum(w_dp, 1, reverse=True) - w_dp)",
                          PyValue::Sum)},
      step, "dp", "delta[:, None]");
  line(indent, "scaled_dp = " + next.scaledDP.text);
  line(indent, "suffix_delta = " + next.suffixDelta.text);
  std::string gradient = "numerator_ds(" + withParams("s, shift, b, h, i, j") + ") * scaled_dp";
  if (functions.getDenominatorDs())
    gradient += " - denominator_ds(" + withParams("s, shift, b, h, i, j") + ") * suffix_delta";
  line(indent, "ds = tl.where(keep, " + gradient + ", 0.0)");
  scoreDraw(indent);
}

void KernelPrinter::thresholdSumsPass(int indent, StringRef tau, StringRef weights,
                                      StringRef slopes) {
  TritonRows rows = rowsAt(indent);
  TritonRows::ThresholdSums sums = rows.thresholdSumsInitial(!slopes.empty());
  line(indent, weights + " = " + sums.weights.text);
  if (!slopes.empty())
    line(indent, slopes + " = " + sums.slopes.text);
  int tileIndent = openKeyTiles("0", "key_stop", /*packedHeads=*/false, /*lastToFirst=*/false,
                                indent);
  scoreTile(tileIndent, "row_in[:, None]");
  TritonRows tile = rowsAt(tileIndent);
  line(tileIndent, "x = " + tile.thresholdArgument("s", (tau + "[:, None]").str()).text);
  line(tileIndent, "above = keep & (" + tile.thresholdAbove("x").text + ")");
  std::string at = withParams("x, 0.0, b, h, i, j");
  TritonRows::ThresholdSums terms = tile.thresholdKeyTerms(
      "above", "numerator(" + at + ")", slopes.empty() ? PyValue() : "numerator_ds(" + at + ")");
  TritonRows::ThresholdSums reduced{"tl.sum(" + terms.weights.text + ", 1)",
                                    terms.slopes ? "tl.sum(" + terms.slopes.text + ", 1)"
                                                 : PyValue()};
  TritonRows::ThresholdSums next =
      tile.thresholdAddTerms({weights.str(), slopes.empty() ? PyValue() : slopes.str()}, reduced);
  line(tileIndent, weights + " = " + next.weights.text);
  if (!slopes.empty())
    line(tileIndent, slopes + " = " + next.slopes.text);
}

void KernelPrinter::thresholdForward() {
  TritonRows rows = rowsAt(4);
  line(4, "# An implicit normalizer (docs/normalizer-classes.md): w_ij = g(s_ij - tau_i), tau_i");
  line(4, "# the root of sum_j g(s_ij - tau) = c. Each trial tau is a pass over the row's key");
  line(4, "# tiles. First the row's max score and its kept keys.");
  line(4, "m_i = tl.full([BLOCK_M], float(\"-inf\"), tl.float32)");
  line(4, "count = tl.zeros([BLOCK_M], tl.float32)");
  int tileIndent = openKeyTiles();
  scoreTile(tileIndent, "row_in[:, None]");
  line(tileIndent, "m_i = tl.maximum(m_i, tl.max(tl.where(keep, s, float(\"-inf\")), 1))");
  line(tileIndent, "count = count + tl.sum(keep.to(tl.float32), 1)");
  line(4, "any_key = count > 0.0");
  line(4, "# The bracket: x_c doubled from 1 until sum_j g(s_ij - m_i + x_c) >= c, while a row");
  line(4, "# with keys has not reached c (a row whose doublings all fail gets tau = NaN).");
  TritonRows::ThresholdBracket bracket = rows.thresholdBracketInitial();
  line(4, "width = " + bracket.width.text);
  line(4, "found = " + bracket.found.text);
  line(4, "doubling = 0");
  line(4, "while (tl.max((any_key & ~found).to(tl.int32)) > 0) & "
          "(doubling < THRESHOLD_BRACKET_DOUBLINGS):");
  TritonRows doublings = rowsAt(8);
  line(8, "tau = " + doublings.thresholdBracketTrial({"width", "found"}, "m_i").text);
  thresholdSumsPass(8, "tau", "sum_w", "");
  TritonRows::ThresholdBracket step = doublings.thresholdBracketStep({"width", "found"}, "sum_w");
  line(8, "width_next = " + step.width.text);
  line(8, "found = " + step.found.text);
  line(8, "width = width_next");
  line(8, "doubling += 1");
  line(4, "# The iteration from lo = m_i - x_c, hi = m_i: safeguarded Newton steps while a row");
  line(4, "# with keys has not converged; a converged row's state stays.");
  line(4, "lo = " + rows.thresholdStartLo("m_i", {"width", "found"}).text);
  thresholdSumsPass(4, "lo", "lo_w", "lo_slope");
  TritonRows::ThresholdState state = rows.thresholdInitial("m_i", "lo", {"lo_w", "lo_slope"});
  line(4, "hi = " + state.hi.text);
  line(4, "hi_moved = " + state.hiMoved.text);
  line(4, "converged = " + state.converged.text);
  line(4, "newton_step = 0");
  line(4, "while (tl.max((any_key & ~converged).to(tl.int32)) > 0) & "
          "(newton_step < THRESHOLD_STEPS):");
  TritonRows steps = rowsAt(8);
  TritonRows::ThresholdState running{"lo", "hi", {"lo_w", "lo_slope"}, "hi_moved", "converged"};
  line(8, "tau = " + steps.thresholdTrial(running).text);
  thresholdSumsPass(8, "tau", "tau_w", "tau_slope");
  TritonRows::ThresholdState next = steps.thresholdStep(running, "tau", {"tau_w", "tau_slope"});
  std::pair<StringRef, PyValue> fields[] = {
      {"lo", next.lo},           {"hi", next.hi},
      {"lo_w", next.atLo.weights}, {"lo_slope", next.atLo.slopes},
      {"hi_moved", next.hiMoved}, {"converged", next.converged}};
  for (auto &[name, value] : fields)
    line(8, name + "_next = " + value.text);
  for (auto &[name, value] : fields)
    line(8, name + " = tl.where(converged, " + name + ", " + name + "_next)");
  line(8, "newton_step += 1");
  line(4, "tau = " + rows.thresholdRoot(running).text);
  line(4, "# O_i = sum_j g(s_ij - tau_i) v_j and row_sum = sum_j w_ij over the keys above tau_i.");
  line(4, "total = tl.zeros([BLOCK_M], tl.float32)");
  line(4, "acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)");
  tileIndent = openKeyTiles();
  scoreTile(tileIndent, "row_in[:, None]");
  TritonRows tile = rowsAt(tileIndent);
  line(tileIndent, "x = " + tile.thresholdArgument("s", "tau[:, None]").text);
  line(tileIndent, "above = keep & (" + tile.thresholdAbove("x").text + ")");
  line(tileIndent, "w = " + tile.thresholdKeyTerms("above",
                                                    "numerator(" + withParams("x, 0.0, b, h, i, j") +
                                                        ")",
                                                    {})
                               .weights.text);
  line(tileIndent, "total = total + tl.sum(w, 1)");
  line(tileIndent, "acc = acc + tl.dot(w.to(v.dtype), v, input_precision=DOT_PRECISION)");
  line(4, "# A row without keys stores O = 0 and row_max = row_sum = 0.");
  line(4, "tl.store(Out + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + "
          "offs_dv[None, :] * stride_od, tl.where(any_key[:, None], acc, 0.0)"
          ".to(Out.dtype.element_ty), mask=row_in[:, None] & (offs_dv[None, :] < HEAD_DIM_V))");
  line(4, "tl.store(RowMax + bh * NQ + offs_m, tl.where(any_key, tau, 0.0), mask=row_in)");
  line(4, "tl.store(RowSum + bh * NQ + offs_m, tl.where(any_key, total, 0.0), mask=row_in)");
  os << "\n\n";
}

void KernelPrinter::printForward() {
  signature(ATTN_TRITON_FORWARD, "Q, K, V, Out, RowMax, RowSum, Params, KeyLengths, QueryStarts",
            {"q", "k", "v", "o"});
  rowProgram();
  loadParams(4);
  if (implicit) {
    thresholdForward();
    return;
  }
  if (scan) {
    line(4, "# A scan (docs/normalizer-classes.md): key tiles from the last to the first.");
    line(4, "S_i = " + rowsAt(4).scanInitial().logSurvival.text);
    line(4, "acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)");
    int tileIndent = openKeyTiles("0", "key_stop", /*packedHeads=*/false, /*lastToFirst=*/true);
    scoreTile(tileIndent, "row_in[:, None]");
    scanTile(tileIndent);
    scanEpilogue(scanLeftOver);
    return;
  }
  forwardState(4, rowsAt(4).initial("b, h, pos_m"));
  forwardKeyTiles();
  forwardEpilogue();
}

StringRef KernelPrinter::wholeKeyTiles(bool rowsInside, llvm::function_ref<void(int)> wholeTile) {
  if (!splitsWholeTiles())
    return "0";
  int indent = 4;
  line(indent, "# Keys before full_stop pair with every row of the block (whole tiles inside the");
  line(indent, "# key length and, causal, at or before its first query): no keep to compute.");
  line(indent, "full_stop = kv_end // BLOCK_N * BLOCK_N");
  if (rowsInside) {
    line(indent, "if (start_m + 1) * BLOCK_M > NQ:  # rows past NQ: dW sums over the rows");
    line(indent + 4, "full_stop = 0");
  }
  line(indent, "if IS_CAUSAL:");
  // The minimum in int64, then int32: a query block 2^31 keys past the first key would
  // wrap negative and start the masked tiles before key 0.
  line(indent + 4, "full_stop = tl.minimum(full_stop, tl.maximum(start_m * BLOCK_M + q_start - "
                   "key_start + 1, 0) // BLOCK_N * BLOCK_N).to(tl.int32)");
  int tileIndent = openKeyTiles("0", "full_stop", /*packedHeads=*/false, /*lastToFirst=*/false,
                                indent, /*wholeTiles=*/true);
  scoreValues(tileIndent);
  wholeTile(tileIndent);
  return "full_stop";
}

void KernelPrinter::forwardKeyTiles() {
  StringRef maskedFrom = wholeKeyTiles(/*rowsInside=*/false,
                                       [&](int indent) { forwardTile(indent, /*masked=*/false); });
  int tileIndent = openKeyTiles(maskedFrom, "key_stop");
  scoreTile(tileIndent, "row_in[:, None]");
  forwardTile(tileIndent);
}

void KernelPrinter::printForwardSplit() {
  signature(ATTN_TRITON_FORWARD_SPLIT,
            "Q, K, V, PartAcc, PartMax, PartSum, PartCount, Params, KeyLengths, QueryStarts",
            {"q", "k", "v"}, /*gradients=*/false, "KEYS_PER_SPLIT,");
  os << R"(    # One program per tile of rows of one (b, kv head) and one chunk of KEYS_PER_SPLIT
    # keys. The rows are the GQA group's query heads, NQ rows each, one head after the
    # other (row p: head h_kv * group + p // NQ, query row p % NQ): a decode step's few
    # rows per head fill the tile together, and K and V are read once for the group.
    start_m = tl.program_id(0)
    bhk = tl.program_id(1)
    split = tl.program_id(2)
    b = bhk // H_KV
    h_kv = bhk % H_KV
    group = H // H_KV
    offs_p = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_in = offs_p < group * NQ
    heads = h_kv * group + tl.where(row_in, offs_p // NQ, 0)
    offs_m = offs_p % NQ
    h = heads[:, None]
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
)";
  loadWeight(4);
  loadContracted(4, "q", tileLoad("Q", "b * stride_qb + heads[:, None] * stride_qh", "offs_m",
                                   "stride_qm", "NQ", "offs_d", "stride_qd", "HEAD_DIM"));
  keyEnd(4);
  line(4, "pos_m = offs_m + q_start");
  line(4, "i = pos_m[:, None]");
  line(4, "row_lo = tl.min(tl.where(row_in, pos_m, 9223372036854775807))");
  line(4, "row_hi = tl.max(tl.where(row_in, pos_m, -1))");
  if (blockSparse) {
    line(4, "head_lo = tl.min(tl.where(row_in, heads, H))");
    line(4, "head_hi = tl.max(tl.where(row_in, heads, -1))");
  }
  line(4, "key_stop = kv_end");
  line(4, "if IS_CAUSAL:  # key rows at positions up to the tile's last query");
  line(8, "key_stop = tl.minimum(kv_end, tl.maximum(row_hi + 1 - key_start, 0)).to(tl.int32)");
  line(4, "key_first = split * KEYS_PER_SPLIT");
  line(4, "key_last = tl.minimum(key_stop, key_first + KEYS_PER_SPLIT)");
  loadParams(4);
  if (scan) {
    line(4, "# A scan's chunk: its key tiles from the last to the first, S from 0.");
    line(4, "S_i = " + rowsAt(4).scanInitial().logSurvival.text);
    line(4, "acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)");
    int tileIndent = openKeyTiles("key_first", "key_last", /*packedHeads=*/true,
                                  /*lastToFirst=*/true);
    scoreTile(tileIndent, "row_in[:, None]");
    scanTile(tileIndent);
    line(4, "# The chunk's partial row: acc and S (attn_fwd_merge's scanCombine).");
    line(4, "part = (split * tl.num_programs(1) * group + b * H + heads) * NQ + offs_m");
    line(4, "tl.store(PartMax + part, S_i, mask=row_in)");
    line(4, "tl.store(PartAcc + part[:, None] * HEAD_DIM_V + offs_dv[None, :], acc, "
            "mask=row_in[:, None] & (offs_dv[None, :] < HEAD_DIM_V))");
    os << "\n\n";
    return;
  }
  line(4, "# The row offset's exponent joins the max in attn_fwd_merge, once.");
  forwardState(4, rowsAt(4).noKeyState());
  int tileIndent = openKeyTiles("key_first", "key_last", /*packedHeads=*/true);
  scoreTile(tileIndent, "row_in[:, None]");
  forwardTile(tileIndent);
  line(4, "# The chunk's partial row state, rows [split, b * H + head, query row]; acc at");
  line(4, "# the chunk's max (unnormalised).");
  line(4, "part = (split * tl.num_programs(1) * group + b * H + heads) * NQ + offs_m");
  line(4, std::string("tl.store(PartMax + part, ") +
              (online ? "m_i" : "tl.zeros([BLOCK_M], tl.float32)") + ", mask=row_in)");
  line(4, "tl.store(PartSum + part, l_i, mask=row_in)");
  line(4, "tl.store(PartCount + part, count, mask=row_in)");
  line(4, "tl.store(PartAcc + part[:, None] * HEAD_DIM_V + offs_dv[None, :], acc, "
          "mask=row_in[:, None] & (offs_dv[None, :] < HEAD_DIM_V))");
  os << "\n\n";
}

void KernelPrinter::rowTileProgram(StringRef name, StringRef pointers, bool gradients,
                                   StringRef scalars) {
  os << "@triton.jit\ndef " << name << "(\n    " << pointers << ",\n    ";
  if (!tables.empty())
    os << tableParameters(gradients) << "\n    ";
  os << "H, NQ, HEAD_DIM_V," << (scalars.empty() ? "" : " ") << scalars << R"(
    BLOCK_M: tl.constexpr, BLOCK_DV: tl.constexpr,
):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_dv = tl.arange(0, BLOCK_DV)
    row_in = offs_m < NQ
)";
}

void KernelPrinter::printForwardMerge() {
  rowTileProgram(ATTN_TRITON_FORWARD_MERGE,
                 "Out, RowMax, RowSum, PartAcc, PartMax, PartSum, PartCount, Params, "
                 "QueryStarts,\n    stride_ob, stride_oh, stride_om, stride_od",
                 /*gradients=*/false, "SPLITS,");
  os << R"(    # The chunks' partial row states combined into the row's, in chunk order (the
    # row algorithm's combine: m = max, each side's sums rescaled to it; plain: sums;
    # a scan: scanCombine, each chunk nearer than those before it).
    pos_m = offs_m + tl.load(QueryStarts + b).to(tl.int64)
    rows = bh * NQ + offs_m
    chunk_rows = tl.num_programs(1) * NQ
    acc_in = row_in[:, None] & (offs_dv[None, :] < HEAD_DIM_V)
)";
  loadParams(4);
  if (scan) {
    line(4, "# A scan's chunks: split s holds keys below split s + 1's, so each one is nearer");
    line(4, "# than those combined before it.");
    line(4, "S_i = " + rowsAt(4).scanInitial().logSurvival.text);
    line(4, "acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)");
    line(4, "for split in range(0, SPLITS):");
    line(8, "part = split * chunk_rows + rows");
    line(8, "part_s = tl.load(PartMax + part, mask=row_in, other=0.0)");
    TritonRows chunks = rowsAt(8);
    TritonRows::ScanCombined combined = chunks.scanCombine({"S_i"}, {"part_s"});
    TritonRows::ScanCombined byColumn = combined;
    byColumn.fartherFactor = outputColumn(combined.fartherFactor);
    line(8, "acc = " + chunks
                           .scanCombineOutput(byColumn, "acc",
                                              "tl.load(PartAcc + part[:, None] * HEAD_DIM_V + "
                                              "offs_dv[None, :], mask=acc_in, other=0.0)")
                           .text);
    line(8, "S_i = " + combined.state.logSurvival.text);
    scanEpilogue(/*leftOver=*/false); // DECODE never splits a scan with a left-over
    return;
  }
  forwardState(4, rowsAt(4).initial("b, h, pos_m"));
  line(4, "for split in range(0, SPLITS):");
  line(8, "part = split * chunk_rows + rows");
  if (online)
    line(8, "part_max = tl.load(PartMax + part, mask=row_in, other=float(\"-inf\"))");
  line(8, "part_sum = tl.load(PartSum + part, mask=row_in, other=0.0)");
  line(8, "part_count = tl.load(PartCount + part, mask=row_in, other=0.0)");
  TritonRows chunks = rowsAt(8);
  TritonRows::Combined combined = chunks.combine(
      runningState(), {online ? "part_max" : "0.0", "part_sum", "part_count"}, "part_sum");
  assignState(8, combined.state);
  combined.alpha = outputColumn(combined.alpha);
  combined.partAlpha = outputColumn(combined.partAlpha);
  line(8, "acc = " + chunks
                         .combineOutput(combined, "acc",
                                        "tl.load(PartAcc + part[:, None] * HEAD_DIM_V + "
                                        "offs_dv[None, :], mask=acc_in, other=0.0)")
                         .text);
  forwardEpilogue();
}

void KernelPrinter::printPreprocess() {
  rowTileProgram(ATTN_TRITON_BACKWARD_PREPROCESS,
                 "Out, DOut, Delta, RowMax, RowSum, Params, DParamsRows, QueryStarts,\n"
                 "    stride_ob, stride_oh, stride_om, stride_od,\n"
                 "    stride_dob, stride_doh, stride_dom, stride_dod",
                 /*gradients=*/true);
  line(4, "o = " + tileLoad("Out", "b * stride_ob + h * stride_oh", "offs_m", "stride_om", "NQ",
                            "offs_dv", "stride_od", "HEAD_DIM_V") + ".to(tl.float32)");
  line(4, "do = " + tileLoad("DOut", "b * stride_dob + h * stride_doh", "offs_m", "stride_dom",
                             "NQ", "offs_dv", "stride_dod", "HEAD_DIM_V") + ".to(tl.float32)");
  line(4, "delta = tl.sum(o * do, 1)");
  line(4, "tl.store(Delta + bh * NQ + offs_m, delta, mask=row_in)");
  ArrayAttr offsetDp = functions.getOffsetDp();
  bool paramGrads = offsetDp && !offsetDp.empty();
  bool tableGradsOfRows = llvm::any_of(
      tableGrads(), [](TableGradAttr read) { return read.getRole() == TableGradRole::Offset; });
  if (paramGrads || tableGradsOfRows) {
    line(4, "# The offset region's share of dθ and of the tables' gradients: −∂β/∂x·D/C per");
    line(4, "# row, into this program's own slots.");
    line(4, "row_max = tl.load(RowMax + bh * NQ + offs_m, mask=row_in, other=0.0)");
    line(4, "row_sum = tl.load(RowSum + bh * NQ + offs_m, mask=row_in, other=0.0)");
    rowsAt(4).prepareBackward("row_max", "row_sum", "delta");
    line(4, "program = bh * tl.num_programs(0) + start_m");
    line(4, "pos_m = offs_m + tl.load(QueryStarts + b).to(tl.int64)");
    loadParams(4);
  }
  if (paramGrads) {
    line(4, "slot = program * " + Twine(slotCount));
    for (unsigned p = 0; p < offsetDp.size(); ++p)
      line(4, "tl.store(DParamsRows + slot + " + Twine(p) +
                  ", tl.sum(tl.where(live, -offset_d_" + paramSuffixes[p] + "(" +
                  withParams("row_max, b, h, pos_m") + ") * delta * inv_c, 0.0), 0))");
  }
  for (auto [site, read] : llvm::enumerate(tableGrads())) {
    if (read.getRole() != TableGradRole::Offset)
      continue;
    std::string args = withParams("row_max, b, h, pos_m");
    addTableGradient(4, site, "program",
                     "-" + tableGradName(site, "d") + "(" + args + ") * delta * inv_c",
                     tableGradName(site, "at") + "(" + args + ")", "live & row_in", "[BLOCK_M]");
  }
  os << "\n\n";
}

void KernelPrinter::printDkDv() {
  signature(ATTN_TRITON_BACKWARD_KEYS,
            "Q, K, V, DOut, DK, DV, RowMax, RowSum, Delta, Params, KeyLengths, QueryStarts, "
            "DParamsKeys" +
                tileStateParams(),
            {"q", "k", "v", "do", "dk", "dv"}, /*gradients=*/true);
  os << R"(    # One program per key block of one (b, kv head): it visits every query head of
    # the GQA group in turn, so dK, dV and dθ are reduced without atomics.
    start_n = tl.program_id(0)
    bhk = tl.program_id(1)
    b = bhk // H_KV
    h_kv = bhk % H_KV
    group = H // H_KV
    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
)";
  keyEnd(4);
  line(4, "j = (offs_n + key_start)[None, :]");
  loadWeight(4);
  loadKeysAndValues(4);
  if (additive) { // per hidden chunk (into_chunk); reshaped to [.., BLOCK_HIDDEN] after
    line(4, "dk = tl.zeros([BLOCK_N, HIDDEN_CHUNKS, HIDDEN_CHUNK], tl.float32)");
    line(4, "d_weight_v = tl.zeros([1, HIDDEN_CHUNKS, HIDDEN_CHUNK], tl.float32)");
  } else {
    line(4, "dk = tl.zeros([BLOCK_N, " + contractedWidth() + "], tl.float32)");
  }
  line(4, "dv = tl.zeros([BLOCK_N, BLOCK_DV], tl.float32)");
  loadParams(4);
  for (const std::string &param : params)
    line(4, "d_" + param + " = tl.zeros([BLOCK_N], tl.float32)");
  line(4, "first_m = 0");
  line(4, "if IS_CAUSAL:  # the query block holding the first row at or after the keys");
  line(8, "first_m = tl.minimum(tl.maximum(start_n * BLOCK_N + key_start - q_start, 0) // "
          "BLOCK_M * BLOCK_M, NQ).to(tl.int32)");
  // One masked loop: a second one for the whole query blocks (splitsWholeTiles), as
  // attn_bwd_dq has, spilled at sm_90, d = 128 (ptxas): 144 B without causality (8 B
  // with one loop), 240-656 B with it (148 B).
  line(4, "for member in range(0, group):");
  line(8, "h = h_kv * group + member");
  line(8, "bh = b * H + h");
  line(8, "for start_m in range(first_m, NQ, BLOCK_M):");
  int body = 12;
  if (blockSparse) {
    skipTiles(12, "start_m + q_start", "start_m + q_start + BLOCK_M - 1",
              "start_n * BLOCK_N + key_start");
    line(12, "if any_kept:");
    body = 16;
  }
  line(body, "offs_m = start_m + tl.arange(0, BLOCK_M)");
  line(body, "i = (offs_m + q_start)[:, None]");
  line(body, "row_in = offs_m < NQ");
  loadContracted(body, "q", tileLoad("Q", "b * stride_qb + h * stride_qh", "offs_m", "stride_qm",
                                      "NQ", "offs_d", "stride_qd", "HEAD_DIM"));
  line(body, "do = " + tileLoad("DOut", "b * stride_dob + h * stride_doh", "offs_m",
                                "stride_dom", "NQ", "offs_dv", "stride_dod", "HEAD_DIM_V"));
  if (scan) {
    line(body, "delta = tl.load(Delta + bh * NQ + offs_m, mask=row_in, other=0.0)");
    line(body, "live = row_in");
    line(body, "# The rows' S and B as they enter this key tile (attn_bwd_dq stored them).");
    line(body, "states = (bh * tl.num_programs(0) + start_n) * NQ + offs_m");
    line(body, "S_i = tl.load(" + kTileLogSurvival + " + states, mask=row_in, other=0.0)");
    line(body, "B_i = tl.load(" + kTileSuffix + " + states, mask=row_in, other=0.0)");
    scoreTile(body, "live[:, None]");
    scanGradTile(body);
  } else {
    loadRowStatistics(body);
    scoreTile(body, "live[:, None]");
    if (implicit)
      thresholdPairs(body);
    scoreGrad(body);
    line(body, "w = tl.where(keep, numerator(" + withParams("s, shift, b, h, i, j") +
                   ") * inv_c, 0.0)");
  }
  line(body, "dv += tl.dot(tl.trans(w).to(do.dtype), do, input_precision=DOT_PRECISION)");
  if (additive) {
    additiveGradients(body, "k", "dk");
  } else {
    line(body, "dk += tl.dot(tl.trans(draw).to(q.dtype), q, input_precision=DOT_PRECISION)");
  }
  ArrayAttr denominatorDp = functions.getDenominatorDp();
  for (unsigned p = 0; p < numNormalizerParams; ++p) {
    std::string term = "numerator_d_" + paramSuffixes[p] + "(" +
                       withParams("s, shift, b, h, i, j") +
                       ") * " + pairDP();
    if (denominatorDp && p < denominatorDp.size())
      term = "(" + term + " - denominator_d_" + paramSuffixes[p] + "(" +
             withParams("s, shift, b, h, i, j") + ") * " + pairDelta() + ")";
    line(body, "d_" + params[p] + " += tl.sum(tl.where(keep, " + term + " * inv_c, 0.0), 0)");
  }
  for (unsigned p = numNormalizerParams; p < params.size(); ++p)
    line(body, "d_" + params[p] + " += tl.sum(tl.where(keep, ds * score_mod_d_" + paramSuffixes[p] +
                   "(" + withParams("raw, b, h, i, j") + "), 0.0), 0)");
  pairTableGradients(body, "bhk * tl.num_programs(0) + start_n");
  if (scanLeftOver) {
    line(8, "# The left-over: r_i·dO_i to the query's own key, of the rows whose key is here.");
    line(8, "own_rows = offs_n + key_start - q_start");
    line(8, "own_in = (own_rows >= 0) & (own_rows < NQ) & (offs_n < kv_end)");
    line(8, "own_s = tl.load(RowMax + bh * NQ + own_rows, mask=own_in, other=0.0)");
    line(8, "do_own = tl.load(DOut + b * stride_dob + h * stride_doh + own_rows[:, None] * "
            "stride_dom + offs_dv[None, :] * stride_dod, mask=own_in[:, None] & (offs_dv[None, "
            ":] < HEAD_DIM_V), other=0.0)");
    line(8, "dv += " + outputColumn(rowsAt(8).scanLeftOver({"own_s"})).text +
                " * do_own.to(tl.float32)");
  }
  line(4, "key_in = offs_n < NK");
  if (additive) {
    line(4, "dk = tl.reshape(dk, [BLOCK_N, BLOCK_HIDDEN])");
    line(4, "d_weight_v = tl.reshape(d_weight_v, [BLOCK_HIDDEN])");
  }
  if (additive || projected)
    chainProjection(4, "k", "dk * scale", "DParamsKeys", "bhk * tl.num_programs(0) + start_n");
  if (additive)
    line(4, "tl.store(DParamsKeys + (bhk * tl.num_programs(0) + start_n) * " + Twine(slotCount) +
                " + " + Twine(weights[2].offset) +
                " + offs_hidden, d_weight_v * scale, mask=offs_hidden < HIDDEN)");
  line(4, "tl.store(DK + b * stride_dkb + h_kv * stride_dkh + offs_n[:, None] * stride_dkn + "
          "offs_d[None, :] * stride_dkd, " + chainRows("k", "dk * scale") +
          ".to(DK.dtype.element_ty), mask=key_in[:, None] & (offs_d[None, :] < HEAD_DIM))");
  line(4, "tl.store(DV + b * stride_dvb + h_kv * stride_dvh + offs_n[:, None] * stride_dvn + "
          "offs_dv[None, :] * stride_dvd, dv.to(DV.dtype.element_ty), "
          "mask=key_in[:, None] & (offs_dv[None, :] < HEAD_DIM_V))");
  if (!params.empty()) {
    line(4, "# This program's share of dθ in its own slot (summed in a fixed order).");
    line(4, "slot = (bhk * tl.num_programs(0) + start_n) * " + Twine(slotCount));
    for (auto [index, param] : llvm::enumerate(params))
      line(4, "tl.store(DParamsKeys + slot + " + Twine(index) + ", tl.sum(d_" + param + ", 0))");
  }
  os << "\n\n";
}

void KernelPrinter::addTableGradient(int indent, unsigned site, StringRef slot, StringRef value,
                                     StringRef position, StringRef where, StringRef shape) {
  const TableArgs &table = tables[tableGrads()[site].getInput()];
  // Each element the tile read once, summed over the tile by tl.sum: one scalar
  // add per element and tile, in the program's order (no race between its pairs).
  line(indent, "position = " + position.str() + " + tl.zeros(" + shape.str() + ", tl.int32)");
  line(indent, "value = tl.where(" + where.str() + ", " + value.str() + ", 0.0)");
  line(indent, "first = tl.min(tl.where(" + where.str() + ", position, 2147483647))");
  line(indent, "last = tl.max(tl.where(" + where.str() + ", position, -1))");
  line(indent, "for element in range(first, last + 1):");
  line(indent + 4, "tl.atomic_add(" + gradientSlots(table) + " + (" + slot + ") * (" +
                       tableSize(table) +
                       ") + element, tl.sum(tl.where(position == element, value, 0.0)))");
}

void KernelPrinter::pairTableGradients(int indent, StringRef slot) {
  for (auto [site, read] : llvm::enumerate(tableGrads())) {
    std::string args = withParams(read.getRole() == TableGradRole::Score ? "raw, b, h, i, j"
                                                                         : "s, shift, b, h, i, j");
    std::string partial = tableGradName(site, "d") + "(" + args + ")";
    std::string value;
    switch (read.getRole()) {
    case TableGradRole::Numerator:
      value = partial + " * " + pairDP() + " * inv_c";
      break;
    case TableGradRole::Denominator:
      value = "-" + partial + " * " + pairDelta() + " * inv_c";
      break;
    case TableGradRole::Score:
      value = "ds * " + partial;
      break;
    case TableGradRole::Offset:
      continue; // a row's, not a pair's: attn_bwd_preprocess adds it
    }
    addTableGradient(indent, site, slot, value, tableGradName(site, "at") + "(" + args + ")",
                     "keep", "[BLOCK_M, BLOCK_N]");
  }
}

void KernelPrinter::thresholdCorrection() {
  TritonRows::ThresholdGradientSums sums = rowsAt(4).thresholdGradientInitial();
  line(4, "# r_i = sum_j g'·dP / sum_j g' over the keys above tau_i, before the gradients.");
  line(4, "slope_dp = " + sums.slopeDP.text);
  line(4, "slopes = " + sums.slopes.text);
  int tileIndent = openKeyTiles();
  scoreTile(tileIndent, "live[:, None]");
  thresholdPairs(tileIndent);
  line(tileIndent, "dp = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)");
  line(tileIndent, "slope = tl.where(keep, numerator_ds(" + withParams("s, 0.0, b, h, i, j") +
                       "), 0.0)");
  line(tileIndent, "slope_dp = slope_dp + tl.sum(slope * dp, 1)");
  line(tileIndent, "slopes = slopes + tl.sum(slope, 1)");
  line(4, "delta = " + rowsAt(4).thresholdCorrection({"slope_dp", "slopes"}).text);
  line(4, "tl.store(Delta + bh * NQ + offs_m, delta, mask=row_in)");
}

void KernelPrinter::accumulateDq(int indent) {
  if (additive)
    additiveGradients(indent, "q", "dq");
  else
    line(indent, "dq += tl.dot(draw.to(k.dtype), k, input_precision=DOT_PRECISION)");
}

void KernelPrinter::printDq() {
  signature(ATTN_TRITON_BACKWARD_QUERIES,
            std::string("Q, K, V, DOut, DQ, RowMax, RowSum, Delta, Params, KeyLengths, "
                        "QueryStarts") +
                (weights.empty() ? "" : ", DParamsRows") +
                tileStateParams(),
            {"q", "k", "v", "do", "dq"});
  rowProgram();
  line(4, "do = " + tileLoad("DOut", "b * stride_dob + h * stride_doh", "offs_m", "stride_dom",
                             "NQ", "offs_dv", "stride_dod", "HEAD_DIM_V"));
  if (scan)
    line(4, "live = row_in");
  else
    loadRowStatistics(4);
  loadParams(4);
  line(4, additive ? "dq = tl.zeros([BLOCK_M, HIDDEN_CHUNKS, HIDDEN_CHUNK], tl.float32)"
                   : "dq = tl.zeros([BLOCK_M, " + contractedWidth() + "], tl.float32)");
  int tileIndent;
  if (scan) {
    line(4, "# A scan: key tiles from the last to the first, carrying S and B per row. First");
    line(4, "# D = dO·O from the row's own sums, Σ w·dP (+ r·dP_ii), exact where the stored O");
    line(4, "# is rounded to its storage type (D − B is a difference); attn_bwd_dkdv reads it.");
    // Both passes walk the row's tiles alike: S and B from their start, then each tile's
    // Σ d and Σ w·dP after `tileBody` (scanPairTile's d and w_dp).
    TritonRows::ScanBackwardState start = rowsAt(4).scanBackwardInitial();
    auto scanRowPass = [&](llvm::function_ref<void(int)> tileBody) {
      line(4, "S_i = " + start.scan.logSurvival.text);
      line(4, "B_i = " + start.suffix.text);
      int indent = openKeyTiles("0", "key_stop", /*packedHeads=*/false, /*lastToFirst=*/true);
      scoreTile(indent, "live[:, None]");
      tileBody(indent);
      line(indent, "S_i = S_i + tl.sum(d, 1)");
      line(indent, "B_i = B_i + tl.sum(w_dp, 1)");
      return indent;
    };
    scanRowPass([&](int indent) { scanPairTile(indent); });
    line(4, "delta = B_i");
    if (scanLeftOver) {
      line(4, "own = pos_m - key_start");
      line(4, "own_in = row_in & (own >= 0) & (own < kv_end)");
      line(4, "v_own = tl.load(V + b * stride_vb + h_kv * stride_vh + own[:, None] * stride_vn + "
              "offs_dv[None, :] * stride_vd, mask=own_in[:, None] & (offs_dv[None, :] < "
              "HEAD_DIM_V), other=0.0)");
      line(4, "delta += " + rowsAt(4).scanLeftOver({"S_i"}).text +
                  " * tl.sum(do.to(tl.float32) * v_own.to(tl.float32), 1)");
    }
    line(4, "tl.store(Delta + bh * NQ + offs_m, delta, mask=row_in)");
    tileIndent = scanRowPass([&](int indent) {
      line(indent, "# The rows' S and B as they enter the tile, for attn_bwd_dkdv.");
      line(indent, "states = (bh * tl.cdiv(NK, BLOCK_N) + start_n // BLOCK_N) * NQ + offs_m");
      line(indent, "tl.store(" + kTileLogSurvival + " + states, S_i, mask=row_in)");
      line(indent, "tl.store(" + kTileSuffix + " + states, B_i, mask=row_in)");
      scanGradTile(indent);
    });
  } else {
    if (implicit)
      thresholdCorrection();
    StringRef maskedFrom = wholeKeyTiles(/*rowsInside=*/true, [&](int indent) {
      scoreGrad(indent, /*masked=*/false);
      accumulateDq(indent);
    });
    tileIndent = openKeyTiles(maskedFrom, "key_stop");
    scoreTile(tileIndent, "live[:, None]");
    if (implicit)
      thresholdPairs(tileIndent);
    scoreGrad(tileIndent);
  }
  accumulateDq(tileIndent);
  if (additive)
    line(4, "dq = tl.reshape(dq, [BLOCK_M, BLOCK_HIDDEN])");
  if (additive || projected)
    chainProjection(4, "q", "dq * scale", "DParamsRows", "bh * tl.num_programs(0) + start_m");
  line(4, "tl.store(DQ + b * stride_dqb + h * stride_dqh + offs_m[:, None] * stride_dqm + "
          "offs_d[None, :] * "
          "stride_dqd, " + chainRows("q", "dq * scale") + ".to(DQ.dtype.element_ty), "
          "mask=row_in[:, None] & (offs_d[None, :] < HEAD_DIM))");
  if (bilinear) {
    line(4, "# dW = Σ q_rowsᵀ·dq' of this program, in its own slot (summed in a fixed order).");
    line(4, "dw = tl.dot(tl.trans(q_rows.to(tl.float32)), dq * scale, "
            "input_precision=DOT_PRECISION)");
    line(4, "slot = (bh * tl.num_programs(0) + start_m) * " + Twine(slotCount));
    line(4, llvm::formatv("tl.store(DParamsRows + slot + {0} + offs_d[:, None] * HEAD_DIM + "
                          "offs_d[None, :], dw, mask=(offs_d[:, None] < HEAD_DIM) & "
                          "(offs_d[None, :] < HEAD_DIM))",
                          weights[0].offset)
                .str());
  }
  os << "\n";
}

LogicalResult KernelPrinter::print() {
  if (failed(checkCovered()))
    return failure();
  printHeader();
  if (failed(printFunctions()))
    return failure();
  os << "# --- the kernels (the compiler's templates) ---\n\n";
  printRowHelpers();
  printForward();
  // Only the kernels the launchers run: the decode split where DECODE has rows, and
  // attn_bwd_preprocess where attn_bwd_dq does not find D itself.
  if (decodes()) {
    printForwardSplit();
    printForwardMerge();
  }
  if (!rowsFirst())
    printPreprocess();
  printDkDv();
  printDq();
  return success();
}

} // namespace

LogicalResult mlir::attn::emitTritonModule(KernelOp kernel, llvm::raw_ostream &os) {
  // Printed into a string first: nothing is written for a kernel that fails.
  std::string text;
  llvm::raw_string_ostream buffer(text);
  if (failed(KernelPrinter(kernel, buffer).print()))
    return failure();
  os << text;
  return success();
}
