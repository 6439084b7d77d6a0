//===- ReadableMath.cpp - scalar functions as formulas --------------------===//
#include "lib/Analysis/ReadableMath.h"

#include "dialect/AttnOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::attn;

namespace {
/// How tightly an expression binds: an operand binding looser than its operator
/// gets parentheses.
enum Precedence { Logic = 0, Compare = 1, Sum = 2, Product = 3, Unary = 4, Power = 5, Atom = 6 };

struct Expression {
  std::string text;
  Precedence precedence = Atom;
};

class FormulaPrinter {
public:
  FormulaPrinter(func::FuncOp function, ArrayRef<StringRef> leadingFloats,
                 ArrayRef<StringRef> params, ArrayRef<StringRef> tables) {
    static constexpr StringRef indexNames[] = {"b", "h", "i", "j"};
    size_t floats = 0, indices = 0, paramsSeen = 0, tablesSeen = 0;
    for (BlockArgument arg : function.getArguments()) {
      std::string name;
      if (isa<IndexType>(arg.getType()))
        name = indices < 4 ? indexNames[indices++].str() : "idx" + std::to_string(indices++);
      else if (isa<BaseMemRefType>(arg.getType()))
        name = tablesSeen < tables.size() ? tables[tablesSeen++].str()
                                          : "table" + std::to_string(tablesSeen++);
      else if (floats < leadingFloats.size())
        name = leadingFloats[floats++].str();
      else
        name = paramsSeen < params.size() ? params[paramsSeen++].str()
                                          : "p" + std::to_string(paramsSeen++);
      values[arg] = {name, Atom};
    }
  }

  Formula print(func::FuncOp function) {
    Block &body = function.getBody().front();
    Formula formula;
    for (Operation &op : body.without_terminator()) {
      if (op.getNumResults() != 1)
        continue;
      Value result = op.getResult(0);
      Expression e = expressionOf(op);
      // A shared compound value is named once rather than repeated.
      bool shared = !result.hasOneUse() && e.precedence != Atom && !isa<arith::ConstantOp>(op);
      if (shared) {
        std::string name = "t" + std::to_string(formula.bindings.size());
        formula.bindings.emplace_back(name, e.text);
        e = {name, Atom};
      }
      values[result] = e;
      // An operand used once is inside e now: dropping its text keeps the memory of a
      // chain linear (each link's text holds all before it).
      for (Value operand : op.getOperands())
        if (operand.hasOneUse())
          values.erase(operand);
    }
    Operation *terminator = body.getTerminator();
    formula.result = terminator->getNumOperands() ? at(terminator->getOperand(0)).text : "()";
    return formula;
  }

private:
  const Expression &at(Value v) { return values[v]; }

  /// `v`'s text, in parentheses when it binds looser than `context` (or as loosely,
  /// on the right of a non-associative operator), or is a negation as the second
  /// operand of a binary operator (a·(-b), not a·-b).
  std::string operand(Value v, Precedence context, bool right = false, bool second = false) {
    const Expression &e = at(v);
    bool wrap = e.precedence < context || (right && e.precedence == context) ||
                (second && e.precedence == Unary);
    return wrap ? "(" + e.text + ")" : e.text;
  }

  Expression binary(Operation &op, StringRef symbol, Precedence p, bool associative) {
    return {operand(op.getOperand(0), p) + symbol.str() +
                operand(op.getOperand(1), p, /*right=*/!associative, /*second=*/true),
            p};
  }

  Expression call(StringRef name, Operation &op) {
    std::string text = name.str() + "(";
    for (auto [n, v] : llvm::enumerate(op.getOperands()))
      text += (n ? ", " : "") + at(v).text;
    return {text + ")", Atom};
  }

  static std::string number(Attribute attr) {
    std::string text;
    llvm::raw_string_ostream os(text);
    if (auto f = dyn_cast<FloatAttr>(attr))
      os << llvm::format("%.7g", f.getValueAsDouble());
    else if (auto i = dyn_cast<IntegerAttr>(attr))
      os << (i.getType().isInteger(1) ? (i.getValue().isZero() ? "false" : "true")
                                      : std::to_string(i.getValue().getSExtValue()));
    else
      os << attr;
    return text;
  }

  static StringRef comparison(arith::CmpFPredicate p) {
    switch (p) {
    case arith::CmpFPredicate::OEQ:
    case arith::CmpFPredicate::UEQ:
      return " == ";
    case arith::CmpFPredicate::ONE:
    case arith::CmpFPredicate::UNE:
      return " != ";
    case arith::CmpFPredicate::OLT:
    case arith::CmpFPredicate::ULT:
      return " < ";
    case arith::CmpFPredicate::OLE:
    case arith::CmpFPredicate::ULE:
      return " <= ";
    case arith::CmpFPredicate::OGT:
    case arith::CmpFPredicate::UGT:
      return " > ";
    case arith::CmpFPredicate::OGE:
    case arith::CmpFPredicate::UGE:
      return " >= ";
    default:
      return " ? ";
    }
  }

  static StringRef comparison(arith::CmpIPredicate p) {
    switch (p) {
    case arith::CmpIPredicate::eq:
      return " == ";
    case arith::CmpIPredicate::ne:
      return " != ";
    case arith::CmpIPredicate::slt:
    case arith::CmpIPredicate::ult:
      return " < ";
    case arith::CmpIPredicate::sle:
    case arith::CmpIPredicate::ule:
      return " <= ";
    case arith::CmpIPredicate::sgt:
    case arith::CmpIPredicate::ugt:
      return " > ";
    case arith::CmpIPredicate::sge:
    case arith::CmpIPredicate::uge:
      return " >= ";
    }
    return " ? ";
  }

  Expression expressionOf(Operation &op) {
    return llvm::TypeSwitch<Operation *, Expression>(&op)
        .Case<arith::ConstantOp>([](arith::ConstantOp c) {
          std::string text = number(c.getValue());
          return Expression{text, text.front() == '-' ? Unary : Atom};
        })
        .Case<arith::AddFOp, arith::AddIOp>([&](auto) { return binary(op, " + ", Sum, true); })
        .Case<arith::SubFOp, arith::SubIOp>([&](auto) { return binary(op, " - ", Sum, false); })
        .Case<arith::MulFOp, arith::MulIOp>([&](auto) { return binary(op, "·", Product, true); })
        .Case<arith::DivFOp, arith::DivSIOp, arith::DivUIOp>(
            [&](auto) { return binary(op, " / ", Product, false); })
        .Case<arith::NegFOp>(
            [&](auto) { return Expression{"-" + operand(op.getOperand(0), Unary), Unary}; })
        .Case<arith::MaximumFOp, arith::MaxNumFOp, arith::MaxSIOp, arith::MaxUIOp>(
            [&](auto) { return call("max", op); })
        .Case<arith::MinimumFOp, arith::MinNumFOp, arith::MinSIOp, arith::MinUIOp>(
            [&](auto) { return call("min", op); })
        .Case<arith::AndIOp>([&](auto) { return binary(op, " and ", Logic, true); })
        .Case<arith::OrIOp>([&](auto) { return binary(op, " or ", Logic, true); })
        .Case<arith::XOrIOp>([&](auto) { return binary(op, " xor ", Logic, true); })
        .Case<arith::CmpFOp>([&](arith::CmpFOp cmp) {
          return binary(op, comparison(cmp.getPredicate()), Compare, false);
        })
        .Case<arith::CmpIOp>([&](arith::CmpIOp cmp) {
          return binary(op, comparison(cmp.getPredicate()), Compare, false);
        })
        .Case<arith::SelectOp>([&](auto) {
          return Expression{"(" + at(op.getOperand(0)).text + " ? " + at(op.getOperand(1)).text +
                                " : " + at(op.getOperand(2)).text + ")",
                            Atom};
        })
        // Conversions change the type, not the number a reader sees.
        .Case<arith::ExtFOp, arith::TruncFOp, arith::SIToFPOp, arith::UIToFPOp,
              arith::IndexCastOp, arith::IndexCastUIOp>([&](auto) { return at(op.getOperand(0)); })
        .Case<math::AbsFOp>([&](auto) { return Expression{"|" + at(op.getOperand(0)).text + "|", Atom}; })
        .Case<math::PowFOp, math::FPowIOp>([&](auto) {
          return Expression{operand(op.getOperand(0), Power, true) + "^" +
                                operand(op.getOperand(1), Power, true),
                            Power};
        })
        .Case<TableLoadOp>([&](TableLoadOp load) {
          std::string text = at(load.getTable()).text + "[";
          for (auto [n, v] : llvm::enumerate(load.getIndices()))
            text += (n ? ", " : "") + at(v).text;
          return Expression{text + "]", Atom};
        })
        .Default([&](Operation *other) {
          // math.exp -> exp(...), math.log1p -> log1p(...), ...
          StringRef name = other->getName().stripDialect();
          return call(name, op);
        });
  }

  DenseMap<Value, Expression> values;
};
} // namespace

Formula mlir::attn::readableFormula(func::FuncOp function, ArrayRef<StringRef> leadingFloats,
                                    ArrayRef<StringRef> params, ArrayRef<StringRef> tables) {
  FormulaPrinter printer(function, leadingFloats, params, tables);
  return printer.print(function);
}
