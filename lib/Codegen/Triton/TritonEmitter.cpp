//===- TritonEmitter.cpp - a kernel as a Python module of Triton kernels ---===//
#include "lib/Codegen/Triton/TritonEmitter.h"

#include "lib/Analysis/KernelSignature.h"
#include "lib/Analysis/MaskIntervals.h"
#include "lib/Analysis/NormalizerAnalysis.h"
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

using namespace mlir;
using namespace mlir::attn;

namespace {

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

/// The Triton dtype a region value computes in. Indices (and the integers they
/// are cast to) are int32 in the kernels: the program ids and aranges they come from.
std::string tritonType(Type type) {
  if (type.isF32())
    return "tl.float32";
  if (type.isF64())
    return "tl.float64";
  if (type.isF16())
    return "tl.float16";
  if (type.isBF16())
    return "tl.bfloat16";
  if (type.isInteger(1))
    return "tl.int1";
  return "tl.int32";
}

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
      // Constants inline, and integer casts are no-ops (every integer is int32).
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

  /// An integer operand reinterpreted as unsigned (arith's u* predicates).
  std::string unsignedOperand(Operation &op, unsigned index) {
    Value value = op.getOperand(index);
    if (auto constant = value.getDefiningOp<arith::ConstantOp>())
      if (auto integer = dyn_cast<IntegerAttr>(constant.getValue()))
        return std::to_string(integer.getValue().getZExtValue() & 0xffffffffu);
    return "tl.cast(" + operand(op, index) + ", tl.uint32, bitcast=True)";
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
      std::string clamped = "tl.minimum(tl.maximum(" + operand(op, d + 1) + ", 0), " +
                            table.extent(d) + " - 1)";
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
    if (isa<TableLoadOp>(op)) {
      Type type = op.getResult(0).getType();
      // Integers of i64 tables stay 64-bit; i8 and i32 ones compute as int32.
      std::string as = type.isInteger(64) ? "tl.int64" : tritonType(type);
      return "tl.load(" + tables[tableOf.lookup(op.getOperand(0))].name + " + " +
             tableOffset(op, false) + ").to(" + as + ")";
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
            .Default("");
    if (!function.empty()) {
      if (function.ends_with("_"))
        helpers.insert(function);
      return call(function, op);
    }
    if (name == "arith.maximumf" || name == "arith.minimumf")
      return (name == "arith.maximumf" ? "tl.maximum(" : "tl.minimum(") + operand(op, 0) + ", " +
             operand(op, 1) + ", propagate_nan=tl.PropagateNan.ALL)";
    if (name == "arith.negf")
      return "(-" + operand(op, 0) + ")";
    if (name == "arith.index_cast" || name == "arith.index_castui" || name == "arith.extsi" ||
        name == "arith.trunci" || (name == "arith.extui" && !op.getOperand(0).getType().isInteger(1)))
      return operand(op, 0); // every integer is int32 here
    if (name == "arith.extui")
      return cast(op);
    if (name == "arith.sitofp" || name == "arith.extf" || name == "arith.truncf" ||
        name == "arith.fptosi")
      return cast(op);
    if (name == "arith.uitofp")
      return "tl.cast(" + unsignedOperand(op, 0) + ", " + tritonType(op.getResult(0).getType()) +
             ")";
    return unsupported(op);
  }

  /// The integer ops Triton has no operator or function for: bit counts,
  /// rounding divisions and the unsigned ops (on the operands' bits, as int32).
  FailureOr<std::string> translateInteger(Operation &op) {
    StringRef name = op.getName().getStringRef();
    if (name == "math.ctlz" || name == "math.cttz" || name == "math.ctpop") {
      // The count depends on the operand's width (an i64 value computes as int32
      // here, but its leading zeros are those of 64 bits).
      StringRef helper = name == "math.ctlz" ? "ctlz_" : name == "math.cttz" ? "cttz_" : "ctpop_";
      helpers.insert(helper);
      if (helper == "cttz_")
        helpers.insert("ctlz_");
      unsigned width = op.getOperand(0).getType().getIntOrFloatBitWidth();
      return (helper + "(" + operand(op, 0) + ", " + Twine(width) + ")").str();
    }
    if (name == "arith.floordivsi" || name == "arith.ceildivsi") {
      StringRef helper = name == "arith.floordivsi" ? "floordiv_" : "ceildiv_";
      helpers.insert(helper);
      return call(helper, op);
    }
    StringRef infix = llvm::StringSwitch<StringRef>(name)
                          .Case("arith.divui", "//")
                          .Case("arith.remui", "%")
                          .Case("arith.shrui", ">>")
                          .Default("");
    auto asInt32 = [](const std::string &value) {
      return "tl.cast(" + value + ", tl.int32, bitcast=True)";
    };
    if (!infix.empty())
      return asInt32("(" + unsignedOperand(op, 0) + " " + infix.str() + " " +
                     unsignedOperand(op, 1) + ")");
    if (name == "arith.maxui" || name == "arith.minui")
      return asInt32((name == "arith.maxui" ? "tl.maximum(" : "tl.minimum(") +
                     unsignedOperand(op, 0) + ", " + unsignedOperand(op, 1) + ")");
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

/// The helpers FunctionPrinter calls for math ops without a tl.math function.
void printHelpers(const llvm::StringSet<> &helpers, llvm::raw_ostream &os) {
  if (helpers.contains("tanh_"))
    os << R"(@triton.jit
def tanh_(x):
    # (1 - e^-2|x|) / (1 + e^-2|x|) with the sign of x: finite for every x.
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


)";
  if (helpers.contains("log1p_"))
    os << R"(@triton.jit
def log1p_(x):
    # log(1 + x) with the rounding of 1 + x compensated (Goldberg).
    u = 1.0 + x
    return tl.where(u == 1.0, x, tl.log(u) * x / (u - 1.0))


)";
  if (helpers.contains("ctlz_"))
    os << R"(@triton.jit
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


)";
  if (helpers.contains("cttz_"))
    os << R"(@triton.jit
def cttz_(x, WIDTH: tl.constexpr):
    # The trailing zeros of x (math.cttz): the ones below its lowest set bit.
    below = (~x.to(tl.int64)) & (x.to(tl.int64) - 1)
    return WIDTH - ctlz_(below, WIDTH)


)";
  if (helpers.contains("ctpop_"))
    os << R"(@triton.jit
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


)";
  if (helpers.contains("floordiv_"))
    os << R"(@triton.jit
def floordiv_(x, y):
    # Rounded toward -inf (arith.floordivsi); Triton's // truncates.
    q = x // y
    return tl.where((q * y != x) & ((x < 0) != (y < 0)), q - 1, q)


)";
  if (helpers.contains("ceildiv_"))
    os << R"(@triton.jit
def ceildiv_(x, y):
    # Rounded toward +inf (arith.ceildivsi); Triton's // truncates.
    q = x // y
    return tl.where((q * y != x) & ((x < 0) == (y < 0)), q + 1, q)


)";
  if (helpers.contains("expm1_"))
    os << R"(@triton.jit
def expm1_(x):
    # e^x - 1 with the rounding of e^x compensated (Kahan).
    u = tl.exp(x)
    return tl.where(u == 1.0, x, tl.where(u - 1.0 == -1.0, -1.0, (u - 1.0) * x / tl.log(u)))


)";
}

// --- the kernel templates ------------------------------------------------------------

/// The Python name of param `index` (`name` in the IR): p_<name>, which no name
/// of the templates starts with.
std::string pythonName(StringRef name, unsigned index) {
  bool identifier = !name.empty() &&
                    llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; });
  return identifier ? "p_" + name.str() : "p" + std::to_string(index);
}

class KernelPrinter {
public:
  KernelPrinter(KernelOp kernel, llvm::raw_ostream &os) : kernel(kernel), os(os) {}

  LogicalResult print();

private:
  LogicalResult checkCovered();
  LogicalResult printFunctions();
  /// tile_class(b, h, row_lo, row_hi, key_lo, key_hi) -> (any_kept, all_kept).
  LogicalResult printTileClass(llvm::raw_ostream &body, llvm::StringSet<> &helpers);
  /// any_kept and all_kept of the tile from `rowStart`, `keyStart`.
  void skipTiles(int indent, StringRef rowStart, StringRef keyStart);
  void printHeader();
  std::string inputsText();
  std::string schedulesText();
  void printForward();
  void printPreprocess();
  void printDkDv();
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
                 bool gradients = false);
  /// A program of one query block of one (b, h): indices, q, and the keys it visits.
  void rowProgram();
  void loadKeysAndValues(int indent);
  /// `name` = the tile `load` (cosine: its unit rows, the rows as loaded in
  /// `name`_rows, which chainRows needs).
  void loadContracted(int indent, StringRef name, const std::string &load);
  /// The gradient of the rows as loaded from `gradient`, that of the contracted rows.
  std::string chainRows(StringRef name, StringRef gradient) const;
  void printRowHelpers();
  /// weight: the bilinear contraction's W as a [BLOCK_D, BLOCK_D] tile (float32).
  void loadWeight(int indent);
  std::string weightsText();
  /// A row program's loop over key tiles (skipping those the mask keeps nothing of),
  /// with the tile's keys and values loaded; returns the tile body's indent.
  int openKeyTiles();
  void loadRowStatistics(int indent);
  /// kv_end: the keys a row of batch b sees before causal and the mask.
  void keyEnd(int indent);
  /// raw, s and keep of the tile (q: [BLOCK_M, D], k: [BLOCK_N, D]); `live`
  /// and-s a row predicate into keep.
  void scoreTile(int indent, StringRef live);
  /// inv_c, shift and ds of the tile from row_max, row_sum, delta, dp; draw.
  void scoreGrad(int indent);
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
  if (*algorithm == Algorithm::Implicit)
    return refuse("an implicit normalizer (a threshold τ_i solved per row)");
  if (ScoreOp score = kernel.getScoreOp()) {
    ContractKind contract = score.getContract();
    if (contract == ContractKind::Additive)
      return refuse("the " + stringifyContractKind(contract) + " contraction");
    bilinear = contract == ContractKind::Bilinear;
    if (score.getNumWeights() && !bilinear)
      return refuse("learnable weights (" +
                    cast<StringAttr>((*score.getWeightNames())[0]).getValue() + ")");
    cosine = contract == ContractKind::Cosine;
    featureMap = score.hasFeatureMap();
  }
  online = *algorithm == Algorithm::Online;
  normalizer = kernel.getNormalizerOp();
  functions = cast<KernelFunctionsAttr>((*kernel.getFunctions())[0]);
  numNormalizerParams = normalizer.getNumParams();
  for (auto [index, name] : llvm::enumerate(kernelParamNames(kernel))) {
    params.push_back(pythonName(name, index));
    paramSuffixes.push_back(StringRef(params.back()).starts_with("p_") ? name.str()
                                                                        : params.back());
  }
  weights = kernelWeights(kernel);
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

void KernelPrinter::skipTiles(int indent, StringRef rowStart, StringRef keyStart) {
  line(indent, "# Block sparsity (attn-analyze-block-sparsity): the mask over the whole tile.");
  line(indent, llvm::formatv("any_kept, all_kept = tile_class(b, h, {0}, {0} + BLOCK_M - 1, {1}, "
                             "{1} + BLOCK_N - 1)",
                             rowStart, keyStart)
                   .str());
}

std::string KernelPrinter::tileLoad(StringRef pointer, StringRef base, StringRef rows,
                                    StringRef rowStride, StringRef rowLimit, StringRef cols,
                                    StringRef colStride, StringRef colLimit) const {
  return llvm::formatv("tl.load({0} + {1} + {2}[:, None] * {3} + {5}[None, :] * {6}, "
                       "mask=({2}[:, None] < {4}) & ({5}[None, :] < {7}), other=0.0)",
                       pointer, base, rows, rowStride, rowLimit, cols, colStride, colLimit)
      .str();
}

void KernelPrinter::loadParams(int indent) {
  for (auto [index, param] : llvm::enumerate(params))
    line(indent, param + " = tl.load(Params + " + Twine(index) + ")");
}

void KernelPrinter::keyEnd(int indent) {
  line(indent, "# Absolute positions (abi.h): query row r of batch b is at q_start + r.");
  line(indent, "q_start = tl.load(QueryStarts + b).to(tl.int32)");
  line(indent, "kv_end = NK");
  line(indent, "if HAS_KEY_LENGTHS:");
  line(indent + 4, "kv_end = tl.minimum(NK, tl.load(KeyLengths + b).to(tl.int32))");
}

void KernelPrinter::scoreTile(int indent, StringRef live) {
  line(indent, "raw = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale");
  if (functions.getScore())
    line(indent, "s = score_mod(" + withParams("raw, b, h, i, j") + ")");
  else
    line(indent, "s = raw");
  line(indent, "keep = " + live + " & (offs_n[None, :] < kv_end)");
  line(indent, "if IS_CAUSAL:");
  line(indent + 4, "keep = keep & (j <= i)");
  if (!functions.getMask())
    return;
  if (blockSparse) {
    line(indent, "if not all_kept:");
    indent += 4;
  }
  line(indent, "keep = keep & mask(" + withParams("b, h, i, j") + ")");
}

void KernelPrinter::scoreGrad(int indent) {
  line(indent, "inv_c = tl.where(row_sum != 0.0, 1.0 / tl.where(row_sum != 0.0, row_sum, 1.0), 0.0)[:, None]");
  line(indent, online ? "shift = row_max[:, None]" : "shift = 0.0");
  line(indent, "dp = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)");
  std::string gradient = "numerator_ds(" + withParams("s, shift, b, h, i, j") + ") * dp";
  if (functions.getDenominatorDs())
    gradient = "(" + gradient + " - denominator_ds(" + withParams("s, shift, b, h, i, j") +
               ") * delta[:, None])";
  line(indent, "ds = tl.where(keep, " + gradient + " * inv_c, 0.0)");
  if (functions.getScoreDs())
    line(indent, "draw = tl.where(keep, ds * score_mod_draw(" + withParams("raw, b, h, i, j") +
                     "), 0.0)");
  else
    line(indent, "draw = ds");
}

void KernelPrinter::signature(StringRef name, StringRef pointers, ArrayRef<StringRef> strided,
                              bool gradients) {
  os << "@triton.jit\ndef " << name << "(\n    " << pointers << ",\n";
  for (StringRef tensor : strided) {
    // Rows of q, o, do and dq are queries (m), of k, v, dk and dv keys (n).
    StringRef rows = tensor.back() == 'q' || tensor.back() == 'o' ? "m" : "n";
    os << llvm::formatv("    stride_{0}b, stride_{0}h, stride_{0}{1}, stride_{0}d,\n", tensor, rows);
  }
  if (!tables.empty())
    os << "    " << tableParameters(gradients) << "\n";
  os << R"(    H, H_KV, NQ, NK, HEAD_DIM, HEAD_DIM_V, scale, KEY_START,
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
          "KEY_START, 0))");
}

void KernelPrinter::loadContracted(int indent, StringRef name, const std::string &load) {
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
  if (featureMap)
    return ("(feature_dx(" + name + "_rows.to(tl.float32)) * " + gradient + ")").str();
  if (cosine)
    return ("through_unit_rows(" + name + "_rows, " + gradient + ")").str();
  if (bilinear && name == "q")
    return ("tl.dot(" + gradient + ", tl.trans(weight), input_precision=DOT_PRECISION)").str();
  return ("(" + gradient + ")").str();
}

void KernelPrinter::loadWeight(int indent) {
  if (!bilinear)
    return;
  line(indent, llvm::formatv("weight = tl.load(Params + {0} + offs_d[:, None] * HEAD_DIM + "
                             "offs_d[None, :], mask=(offs_d[:, None] < HEAD_DIM) & "
                             "(offs_d[None, :] < HEAD_DIM), other=0.0)",
                             weights[0].offset)
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

void KernelPrinter::loadKeysAndValues(int indent) {
  loadContracted(indent, "k", tileLoad("K", "b * stride_kb + h_kv * stride_kh", "offs_n",
                                       "stride_kn", "kv_end", "offs_d", "stride_kd", "HEAD_DIM"));
  line(indent, "v = " + tileLoad("V", "b * stride_vb + h_kv * stride_vh", "offs_n", "stride_vn",
                                 "kv_end", "offs_dv", "stride_vd", "HEAD_DIM_V"));
}

int KernelPrinter::openKeyTiles() {
  line(4, "for start_n in range(0, key_stop, BLOCK_N):");
  line(8, "offs_n = start_n + tl.arange(0, BLOCK_N)");
  line(8, "j = (offs_n + KEY_START)[None, :]");
  int tileIndent = 8;
  if (blockSparse) {
    skipTiles(8, "start_m * BLOCK_M + q_start", "start_n + KEY_START");
    line(8, "if any_kept:");
    tileIndent = 12;
  }
  loadKeysAndValues(tileIndent);
  return tileIndent;
}

void KernelPrinter::loadRowStatistics(int indent) {
  line(indent, "row_max = tl.load(RowMax + bh * NQ + offs_m, mask=row_in, other=0.0)");
  line(indent, "row_sum = tl.load(RowSum + bh * NQ + offs_m, mask=row_in, other=0.0)");
  line(indent, "delta = tl.load(Delta + bh * NQ + offs_m, mask=row_in, other=0.0)");
}

std::string KernelPrinter::schedulesText() {
  std::string text;
  ArrayAttr schedules = kernel.getGpuScheduleAttr();
  if (!schedules)
    return text;
  for (auto schedule : schedules.getAsRange<GpuScheduleAttr>())
    text += llvm::formatv("    (\"{0}\", \"{1}\", {2}): dict(forward=({3}, {4}, {5}, {6}), "
                          "backward=({7}, {8}, {9}, {10})),\n",
                          schedule.getChip(), elementTypeName(schedule.getType()),
                          schedule.getHeadDim(), schedule.getBlockM(), schedule.getBlockN(),
                          schedule.getNumWarps(), schedule.getNumStages(),
                          schedule.getBackwardBlockM(), schedule.getBackwardBlockN(),
                          schedule.getBackwardNumWarps(), schedule.getBackwardNumStages())
                .str();
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
     << "attn_fwd computes O and the row statistics (row_max m, row_sum C"
     << (online ? "·e^-m" : "") << ");\n"
     << "attn_bwd_preprocess, attn_bwd_dkdv and attn_bwd_dq the gradients (DESIGN.md §2).\n"
     << "attn.triton_backend launches them.\n\"\"\"\n"
     << "import math\n\nimport triton\nimport triton.language as tl\n\n"
     << "KERNEL = \"" << kernel.getSymName() << "\"\n"
     << "ALGORITHM = \"" << (online ? "online" : "plain") << "\"\n"
     << "PARAM_NAMES = (" << names << ")\n"
     << "PARAM_INITS = (" << inits << ")\n"
     << "# Learnable weights after the params in Params: (name, shape, offset, init).\n"
     << "WEIGHTS = (" << weightsText() << ")\n"
     << "# Tensor inputs: (name, kernel argument, element type, extents (-1: the caller's),\n"
     << "# learnable). Float inputs are read as float32.\n"
     << "INPUTS = (" << inputsText() << ")\n"
     << "# Per (chip, storage type, head dim), attn-select-gpu-schedule's choice "
        "(#attn.gpu_schedule):\n"
     << "# (BLOCK_M, BLOCK_N, num_warps, num_stages) of attn_fwd and of the backward kernels.\n"
     << "SCHEDULES = {\n" << schedulesText() << "}\n"
     << "# Under the interpreter, and on a GPU without an entry above of its chip or an older one.\n"
     << "DEFAULT_SCHEDULE = dict(forward=(64, 64, 4, 2), backward=(64, 64, 4, 2))\n"
     << "LOG2E = tl.constexpr(1.4426950408889634)\n\n\n"
     << "def score_scale(head_dim):\n"
     << "    \"\"\"The factor of the contraction q·k.\"\"\"\n";
  if (scale)
    os << "    return " << floatLiteral(*scale) << "\n\n\n";
  else
    os << "    return 1.0 / math.sqrt(head_dim)\n\n\n";
}

void KernelPrinter::printForward() {
  signature(ATTN_TRITON_FORWARD, "Q, K, V, Out, RowMax, RowSum, Params, KeyLengths, QueryStarts",
            {"q", "k", "v", "o"});
  rowProgram();
  loadParams(4);
  if (online) {
    // The running max starts at the row offset's exponent (β = e^x; ε = e^(log ε)).
    if (functions.getOffsetStab())
      line(4, "m_i = tl.zeros([BLOCK_M], tl.float32) + offset_stabilizer(" +
                  withParams("b, h, pos_m") + ")");
    else if (auto eps = normalizer.getEpsilon(); eps && eps->convertToDouble() > 0.0)
      line(4, "m_i = tl.full([BLOCK_M], " + floatLiteral(std::log(eps->convertToDouble())) +
                  ", tl.float32)");
    else
      line(4, "m_i = tl.full([BLOCK_M], float(\"-inf\"), tl.float32)");
  }
  line(4, "l_i = tl.zeros([BLOCK_M], tl.float32)");
  line(4, "count = tl.zeros([BLOCK_M], tl.float32)");
  line(4, "acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)");
  int tileIndent = openKeyTiles();
  scoreTile(tileIndent, "row_in[:, None]");
  std::string alpha;
  if (online) {
    line(tileIndent, "m_new = tl.maximum(m_i, tl.max(tl.where(keep, stabilizer(" +
                withParams("s, b, h, i, j") + "), float(\"-inf\")), 1))");
    line(tileIndent, "# A row without a key so far is shifted by 0: its sums are 0 (alpha = 0).");
    line(tileIndent, "m_safe = tl.where(m_new == float(\"-inf\"), 0.0, m_new)");
    line(tileIndent, "alpha = tl.exp2((m_i - m_safe) * LOG2E)");
    line(tileIndent, "shift = m_safe[:, None]");
    line(tileIndent, "m_i = m_new");
    alpha = " * alpha";
  } else {
    line(tileIndent, "shift = 0.0");
  }
  line(tileIndent, "g = tl.where(keep, numerator(" + withParams("s, shift, b, h, i, j") + "), 0.0)");
  if (functions.getDenominator())
    line(tileIndent, "l_i = l_i" + alpha + " + tl.sum(tl.where(keep, denominator(" +
                withParams("s, shift, b, h, i, j") + "), 0.0), 1)");
  line(tileIndent, "acc = acc" + (online ? alpha + "[:, None]" : std::string()) +
              " + tl.dot(g.to(v.dtype), v, input_precision=DOT_PRECISION)");
  line(tileIndent, "count += tl.sum(keep.to(tl.float32), 1)");
  line(4, "any_key = count > 0");
  switch (normalizer.getDenominatorKind()) {
  case DenominatorKind::Sum:
    if (functions.getOffset())
      line(4, "c = l_i + offset(" + withParams(online ? "m_i, b, h, pos_m" : "0.0, b, h, pos_m") +
                  ")");
    else if (auto eps = normalizer.getEpsilon())
      line(4, "c = l_i + " + floatLiteral(eps->convertToDouble()) +
                  (online ? " * tl.exp(-m_i)" : ""));
    else
      line(4, "c = l_i");
    break;
  case DenominatorKind::Constant:
    line(4, "c = tl.full([BLOCK_M], " +
                floatLiteral(normalizer.getDenominatorConstant()->convertToDouble()) +
                ", tl.float32)");
    break;
  case DenominatorKind::Count:
    line(4, "c = count");
    break;
  case DenominatorKind::Threshold:
    llvm_unreachable("checkCovered refuses implicit normalizers");
  }
  line(4, "out_scale = tl.where(any_key, 1.0 / tl.where(any_key, c, 1.0), 0.0)");
  line(4, "tl.store(Out + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + "
          "offs_dv[None, :] * "
          "stride_od, (acc * out_scale[:, None]).to(Out.dtype.element_ty), "
          "mask=row_in[:, None] & (offs_dv[None, :] < HEAD_DIM_V))");
  line(4, std::string("tl.store(RowMax + bh * NQ + offs_m, ") +
              (online ? "tl.where(any_key, m_i, 0.0)" : "tl.zeros([BLOCK_M], tl.float32)") +
              ", mask=row_in)");
  line(4, "tl.store(RowSum + bh * NQ + offs_m, tl.where(any_key, c, 0.0), mask=row_in)");
  os << "\n\n";
}

void KernelPrinter::printPreprocess() {
  os << R"(@triton.jit
def attn_bwd_preprocess(
    Out, DOut, Delta, RowMax, RowSum, Params, DParamsRows, QueryStarts,
    stride_ob, stride_oh, stride_om, stride_od,
    stride_dob, stride_doh, stride_dom, stride_dod,
    )";
  if (!tables.empty())
    os << tableParameters(/*gradients=*/true) << "\n    ";
  os << R"(H, NQ, HEAD_DIM_V,
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
    line(4, "live = row_sum != 0.0");
    line(4, "inv_c = tl.where(live, 1.0 / tl.where(live, row_sum, 1.0), 0.0)");
    line(4, "program = bh * tl.num_programs(0) + start_m");
    line(4, "pos_m = offs_m + tl.load(QueryStarts + b).to(tl.int32)");
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
            "DParamsKeys",
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
    j = (offs_n + KEY_START)[None, :]
)";
  keyEnd(4);
  loadKeysAndValues(4);
  line(4, "dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)");
  line(4, "dv = tl.zeros([BLOCK_N, BLOCK_DV], tl.float32)");
  loadParams(4);
  for (const std::string &param : params)
    line(4, "d_" + param + " = tl.zeros([BLOCK_N], tl.float32)");
  loadWeight(4);
  line(4, "first_m = 0");
  line(4, "if IS_CAUSAL:  # the query block holding the first row at or after the keys");
  line(8, "first_m = (tl.maximum(start_n * BLOCK_N + KEY_START - q_start, 0) // BLOCK_M) * "
          "BLOCK_M");
  line(4, "for member in range(0, group):");
  line(8, "h = h_kv * group + member");
  line(8, "bh = b * H + h");
  line(8, "for start_m in range(first_m, NQ, BLOCK_M):");
  int body = 12;
  if (blockSparse) {
    skipTiles(12, "start_m + q_start", "start_n * BLOCK_N + KEY_START");
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
  loadRowStatistics(body);
  scoreTile(body, "(row_sum != 0.0)[:, None]");
  scoreGrad(body);
  line(body, "w = tl.where(keep, numerator(" + withParams("s, shift, b, h, i, j") +
                 ") * inv_c, 0.0)");
  line(body, "dv += tl.dot(tl.trans(w).to(do.dtype), do, input_precision=DOT_PRECISION)");
  line(body, "dk += tl.dot(tl.trans(draw).to(q.dtype), q, input_precision=DOT_PRECISION)");
  ArrayAttr denominatorDp = functions.getDenominatorDp();
  for (unsigned p = 0; p < numNormalizerParams; ++p) {
    std::string term = "numerator_d_" + paramSuffixes[p] + "(" +
                       withParams("s, shift, b, h, i, j") +
                       ") * dp";
    if (denominatorDp && p < denominatorDp.size())
      term = "(" + term + " - denominator_d_" + paramSuffixes[p] + "(" +
             withParams("s, shift, b, h, i, j") + ") * delta[:, None])";
    line(body, "d_" + params[p] + " += tl.sum(tl.where(keep, " + term + " * inv_c, 0.0), 0)");
  }
  for (unsigned p = numNormalizerParams; p < params.size(); ++p)
    line(body, "d_" + params[p] + " += tl.sum(tl.where(keep, ds * score_mod_d_" + paramSuffixes[p] +
                   "(" + withParams("raw, b, h, i, j") + "), 0.0), 0)");
  pairTableGradients(body, "bhk * tl.num_programs(0) + start_n");
  line(4, "key_in = offs_n < NK");
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
      value = partial + " * dp * inv_c";
      break;
    case TableGradRole::Denominator:
      value = "-" + partial + " * delta[:, None] * inv_c";
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

void KernelPrinter::printDq() {
  signature(ATTN_TRITON_BACKWARD_QUERIES,
            bilinear ? "Q, K, V, DOut, DQ, RowMax, RowSum, Delta, Params, KeyLengths, QueryStarts, "
                       "DParamsRows"
                     : "Q, K, V, DOut, DQ, RowMax, RowSum, Delta, Params, KeyLengths, QueryStarts",
            {"q", "k", "v", "do", "dq"});
  rowProgram();
  line(4, "do = " + tileLoad("DOut", "b * stride_dob + h * stride_doh", "offs_m", "stride_dom",
                             "NQ", "offs_dv", "stride_dod", "HEAD_DIM_V"));
  loadRowStatistics(4);
  loadParams(4);
  line(4, "dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)");
  int tileIndent = openKeyTiles();
  scoreTile(tileIndent, "(row_sum != 0.0)[:, None]");
  scoreGrad(tileIndent);
  line(tileIndent, "dq += tl.dot(draw.to(k.dtype), k, input_precision=DOT_PRECISION)");
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
