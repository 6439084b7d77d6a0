//===- KernelisedAnalysis.cpp - does a kernel have a linear-time form? ----===//
#include "lib/Analysis/KernelisedAnalysis.h"

#include "lib/Analysis/NormalizerAnalysis.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::attn;

namespace {
/// How a value depends on the score s and the positions i, j.
enum class Form {
  Free,      // neither s nor i, j (constants, normalizer params)
  Linear,    // c·s with c Free
  Affine,    // affine in i and j, no s (a phase)
  Cos,       // c·cos(phase)
  LinearCos, // c·s·cos(phase)
  Param,     // depends on a score param (mod regions only)
  Broken,    // none of the above
};

/// Classifies the values of one region; `broken` is the first op (in program
/// order) whose result is Broken.
class FormAnalysis {
public:
  FormAnalysis(Region &region, ArrayRef<Form> argumentForms) {
    for (auto [arg, form] : llvm::zip(region.front().getArguments(), argumentForms))
      forms[arg] = form;
    for (Operation &op : region.front().without_terminator()) {
      Form f = formOf(op);
      for (Value result : op.getResults())
        forms[result] = f;
      if (f == Form::Broken && !broken)
        broken = &op;
    }
    result = region.front().getTerminator()->getOperand(0);
  }

  Form of(Value v) const { return forms.lookup(v); }
  Form resultForm() const { return of(result); }
  /// The op where the result stops having the wanted form: the first Broken op on
  /// the way to the result, else the op defining the result.
  Operation *culprit() const {
    Operation *op = result.getDefiningOp();
    while (op) {
      auto brokenOperand = llvm::find_if(op->getOperands(), [&](Value v) {
        return of(v) == Form::Broken && v.getDefiningOp();
      });
      if (brokenOperand == op->operand_end())
        return op;
      op = (*brokenOperand).getDefiningOp();
    }
    return nullptr;
  }
  Value result;

private:
  Form formOf(Operation &op) const {
    auto operand = [&](unsigned k) { return of(op.getOperand(k)); };
    auto anyOperand = [&](Form f) {
      return llvm::any_of(op.getOperands(), [&](Value v) { return of(v) == f; });
    };
    if (anyOperand(Form::Broken))
      return Form::Broken;
    if (anyOperand(Form::Param))
      return Form::Param;
    if (llvm::all_of(op.getOperands(), [&](Value v) { return of(v) == Form::Free; }))
      return Form::Free;
    return TypeSwitch<Operation *, Form>(&op)
        .Case<arith::AddFOp, arith::SubFOp, arith::AddIOp, arith::SubIOp>([&](auto) {
          Form a = operand(0), b = operand(1);
          auto affineOrFree = [](Form f) { return f == Form::Affine || f == Form::Free; };
          if (affineOrFree(a) && affineOrFree(b))
            return Form::Affine;
          // c·s + c'·s; an additive term without s is not homogeneous.
          return a == Form::Linear && b == Form::Linear ? Form::Linear : Form::Broken;
        })
        .Case<arith::MulFOp, arith::MulIOp>([&](auto) {
          Form a = operand(0), b = operand(1);
          if (b == Form::Free)
            std::swap(a, b);
          if (a == Form::Free) // scaling keeps every form
            return b;
          if ((a == Form::Linear && b == Form::Cos) || (a == Form::Cos && b == Form::Linear))
            return Form::LinearCos;
          return Form::Broken; // s·s, cos·cos, s·i, ...
        })
        .Case<arith::DivFOp>([&](auto) {
          return operand(1) == Form::Free ? operand(0) : Form::Broken;
        })
        .Case<arith::NegFOp, arith::IndexCastOp, arith::IndexCastUIOp, arith::SIToFPOp,
              arith::UIToFPOp, arith::ExtFOp, arith::TruncFOp>([&](Operation *cast) {
          Form f = operand(0);
          // Casts of positions stay affine; a float cast of s·c is still linear.
          return isa<arith::NegFOp>(cast) || f == Form::Affine ? f : Form::Broken;
        })
        .Case<arith::SelectOp>([&](auto) {
          return operand(0) == Form::Free && operand(1) == operand(2) ? operand(1)
                                                                      : Form::Broken;
        })
        .Case<math::CosOp>([&](auto) {
          return operand(0) == Form::Affine ? Form::Cos : Form::Broken;
        })
        .Default([](Operation *) { return Form::Broken; });
  }

  DenseMap<Value, Form> forms;
  Operation *broken = nullptr;
};

/// j <= i written as `cmpi ule/sle %j, %i` or `cmpi uge/sge %i, %j`.
bool isCausalMask(MaskOp mask) {
  Block &body = mask.getBody().front();
  auto cmp = body.getTerminator()->getOperand(0).getDefiningOp<arith::CmpIOp>();
  if (!cmp)
    return false;
  Value i = body.getArgument(0), j = body.getArgument(1);
  using P = arith::CmpIPredicate;
  P p = cmp.getPredicate();
  return (cmp.getLhs() == j && cmp.getRhs() == i && (p == P::ule || p == P::sle)) ||
         (cmp.getLhs() == i && cmp.getRhs() == j && (p == P::uge || p == P::sge));
}

/// Says why `kernel` keeps the quadratic form, at `at`, when `explain` is set.
class Explainer {
public:
  Explainer(KernelOp kernel, bool explain) : kernel(kernel), explain(explain) {}
  std::nullopt_t operator()(Operation *at, const Twine &reason) {
    if (explain)
      at->emitRemark() << "kernel @" << kernel.getSymName()
                       << " keeps the quadratic form (not kernelised): " << reason;
    return std::nullopt;
  }

private:
  KernelOp kernel;
  bool explain;
};
} // namespace

std::optional<KernelisedForm> mlir::attn::matchKernelised(KernelOp kernel, bool explain) {
  ScoreOp score = kernel.getScoreOp();
  NormalizerOp normalizer = kernel.getNormalizerOp();
  // Only a kernel with a feature map is expected to be linear attention; others
  // that happen to qualify (g = s over q·k) take the linear form silently.
  Explainer notKernelised(kernel, explain && score && score.hasFeatureMap());
  if (score && score.getContract() != ContractKind::Dot &&
      score.getContract() != ContractKind::ScaledDot)
    return notKernelised(score, "contract " + stringifyContractKind(score.getContract()) +
                                    " is not a dot product of features");
  if (score && score.getNumWeights() != 0)
    return notKernelised(score, "the score has learnable weights; the linear form has no "
                                "projection step yet");
  if (score && score.getNumRowInputs() != 0)
    return notKernelised(score, "the score has row inputs; the linear form has no per-query "
                                "position inputs");

  auto normalizerRegion = [&](Region &region, StringRef what) -> bool {
    SmallVector<Form> argForms{Form::Linear};
    argForms.append(normalizer.getNumParams(), Form::Free);
    FormAnalysis analysis(region, argForms);
    if (analysis.resultForm() == Form::Linear)
      return true;
    Operation *culprit = analysis.culprit();
    if (!culprit || analysis.resultForm() == Form::Free) {
      notKernelised(region.front().getTerminator(),
                    "the " + what + " is not linear in s: it does not depend on s");
      return false;
    }
    notKernelised(culprit, "the " + what + " is not linear in s: " +
                               culprit->getName().getStringRef());
    return false;
  };
  if (!normalizerRegion(normalizer.getNumerator(), "numerator"))
    return std::nullopt;
  if (normalizer.hasDenominatorRegion() &&
      !normalizerRegion(normalizer.getDenominator(), "denominator"))
    return std::nullopt;

  if (MaskOp mask = kernel.getMaskOp(); mask && !isCausalMask(mask))
    return notKernelised(mask, "mask @" + mask.getSymName() +
                                   " is not causal (j <= i); only causal masks and key "
                                   "padding have prefix-sum forms");

  KernelisedForm form;
  if (!score || !score.hasMod())
    return form;
  Region &mod = score.getMod();
  SmallVector<Form> argForms{Form::Linear, Form::Affine, Form::Affine};
  argForms.append(score.getNumParams(), Form::Param);
  FormAnalysis analysis(mod, argForms);
  Form result = analysis.resultForm();
  if (result == Form::Param)
    return notKernelised(analysis.culprit(),
                         "the score mod uses a param; the linear form has no gradient "
                         "path for score params");
  if (result == Form::Linear)
    return form;
  if (result == Form::LinearCos) {
    // The product must be s·cos(x) itself: no other factor is split off.
    auto mul = analysis.result.getDefiningOp<arith::MulFOp>();
    Value s = mod.front().getArgument(0);
    if (mul && (mul.getLhs() == s || mul.getRhs() == s)) {
      form.positionFactor = (mul.getLhs() == s ? mul.getRhs() : mul.getLhs()).getDefiningOp<math::CosOp>();
      if (form.positionFactor)
        return form;
    }
    return notKernelised(analysis.result.getDefiningOp(),
                         "a position factor must multiply s directly: mod = s·cos(x(i, j))");
  }
  Operation *culprit = analysis.culprit();
  return notKernelised(culprit ? culprit : mod.front().getTerminator(),
                       Twine("the score mod does not factor into query and key terms "
                             "(c·s, or s·cos(x) with x affine in i and j): ") +
                           (culprit ? culprit->getName().getStringRef() : "its result"));
}
