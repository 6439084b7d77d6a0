//===- ExplainPass.cpp - attn-print-explanation ---------------------------===//
#include "lib/Analysis/KernelSignature.h"
#include "lib/Analysis/NormalizerAnalysis.h"
#include "lib/Analysis/ReadableMath.h"
#include "passes/Passes.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNPRINTEXPLANATION
#include "passes/Passes.h.inc"

namespace {
StringRef describe(Algorithm algorithm) {
  switch (algorithm) {
  case Algorithm::Online:
    return "online (flash-style): every exp factor e^x is evaluated as e^(x - m), m the "
           "running max over the row's keys of the stabiliser, and the accumulators are "
           "rescaled when m grows";
  case Algorithm::Plain:
    return "plain: g and C are accumulated as written (no exp factor to rescale)";
  case Algorithm::Kernelised:
    return "kernelised (linear time): O_i = a·u_i S / C_i with S = Σ_j w_j v_j, the sums "
           "over keys computed once";
  case Algorithm::Scan:
    return "scan (stick-breaking): each row's keys are visited from the last to the first, "
           "w_ij = g(s_ij)·exp(S), S the sum of the log-survivals d of the kept keys after j; "
           "the backward scans them in the same order";
  case Algorithm::Implicit:
    return "implicit: w_ij = g(s_ij - τ_i), τ_i found per row on Σ_j g(s_ij - τ_i) = c by "
           "Newton steps kept inside a bisection bracket; backward by implicit "
           "differentiation (g and ∂g below take s_ij - τ_i as s)";
  }
  return "";
}

/// `label` indented and padded to one column, counting characters, not UTF-8 bytes.
std::string column(StringRef label) {
  size_t characters = llvm::count_if(label, [](char c) { return (c & 0xC0) != 0x80; });
  return "  " + label.str() + std::string(characters < 15 ? 15 - characters : 1, ' ');
}

std::string number(const APFloat &value) {
  return llvm::formatv("{0}", llvm::format("%g", value.convertToDouble())).str();
}

SmallVector<StringRef> names(std::optional<ArrayAttr> list) {
  SmallVector<StringRef> out;
  if (list)
    for (Attribute name : *list)
      out.push_back(cast<StringAttr>(name).getValue());
  return out;
}

struct PrintExplanationPass : impl::AttnPrintExplanationBase<PrintExplanationPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::raw_ostream &os = llvm::outs();
    for (KernelOp kernel : module.getOps<KernelOp>()) {
      FailureOr<Algorithm> algorithm = requireAlgorithm(kernel);
      if (failed(algorithm))
        return signalPassFailure();
      if (!kernel.getFunctions() || kernel.getFunctions()->empty()) {
        kernel.emitOpError("has no derived functions to explain; run attn-derive-backward "
                           "first (attn-opt --attn-explain does)");
        return signalPassFailure();
      }
      auto functions = cast<KernelFunctionsAttr>((*kernel.getFunctions())[0]);
      NormalizerOp normalizer = kernel.getNormalizerOp();
      ScoreOp score = kernel.getScoreOp();
      SmallVector<StringRef> params = kernelParamNames(kernel);
      SmallVector<StringRef> tables;
      for (InputOp input : kernelInputs(kernel))
        tables.push_back(input.getSymName());
      SmallVector<StringRef> normalizerParams = names(normalizer.getParamNames());
      SmallVector<StringRef> scoreParams = score ? names(score.getParamNames()) : SmallVector<StringRef>();

      // One labelled formula, its shared subterms indented below it.
      auto show = [&](StringRef label, FlatSymbolRefAttr symbol, ArrayRef<StringRef> leading) {
        auto function = symbol ? module.lookupSymbol<func::FuncOp>(symbol) : func::FuncOp();
        if (!function)
          return;
        Formula formula = readableFormula(function, leading, params, tables);
        os << column(label) << formula.result << "\n";
        for (auto [name, text] : formula.bindings)
          os << column("") << "  where " << name << " = " << text << "\n";
      };
      auto showEach = [&](StringRef of, ArrayAttr symbols, ArrayRef<StringRef> by,
                          ArrayRef<StringRef> leading) {
        if (!symbols)
          return;
        for (auto [symbol, param] : llvm::zip(symbols, by))
          show(("∂" + of + "/∂" + param).str(), cast<FlatSymbolRefAttr>(symbol), leading);
      };

      os << "kernel @" << kernel.getSymName() << "\n";
      os << column("algorithm") << describe(*algorithm) << "\n";
      if (NormalizerOp normalizer = kernel.getNormalizerOp())
        if (ArrayAttr rewrites = normalizer.getRewritesAttr())
          for (auto [k, rule] : llvm::enumerate(rewrites.getAsValueRange<StringAttr>()))
            os << column(k == 0 ? "rewritten" : "") << rule << "\n";
      if (!params.empty())
        os << column("params θ") << llvm::join(params, ", ") << "\n";
      if (!tables.empty())
        os << column("tensor inputs") << llvm::join(tables, ", ") << "\n";
      show("score mod", functions.getScore(), {"s"});
      show("mask (keep)", functions.getMask(), {});
      show("stabiliser", functions.getStabilizer(), {"s"});
      show("g", functions.getNumerator(), {"s", "m"});
      std::string denominator;
      switch (normalizer.getDenominatorKind()) {
      case DenominatorKind::Sum:
        denominator = normalizer.hasOffsetRegion() ? "β + Σ_j h"
                      : normalizer.getEpsilon()
                          ? llvm::formatv("{0} + Σ_j h", number(*normalizer.getEpsilon())).str()
                          : "Σ_j h";
        break;
      case DenominatorKind::Constant:
        denominator = number(*normalizer.getDenominatorConstant());
        break;
      case DenominatorKind::Count:
        denominator = "the number of unmasked keys";
        break;
      case DenominatorKind::LogSurvival:
        denominator = normalizer.getLeftOverToCurrent()
                          ? "1 (a scan; h is the log-survival d, the left-over r_i·v_i added)"
                          : "1 (a scan; h is the log-survival d)";
        break;
      case DenominatorKind::Threshold:
        denominator = llvm::formatv("1, with τ_i such that Σ_j g(s_ij - τ_i) = {0}",
                                    number(*normalizer.getDenominatorConstant()))
                          .str();
        break;
      }
      os << column("C_i") << denominator << "\n";
      show("h", functions.getDenominator(), {"s", "m"});
      show("β", functions.getOffset(), {"m"});
      show("∂g/∂s", functions.getNumeratorDs(), {"s", "m"});
      show("∂h/∂s", functions.getDenominatorDs(), {"s", "m"});
      show("∂mod/∂s", functions.getScoreDs(), {"s"});
      showEach("g", functions.getNumeratorDp(), normalizerParams, {"s", "m"});
      showEach("h", functions.getDenominatorDp(), normalizerParams, {"s", "m"});
      showEach("β", functions.getOffsetDp(), normalizerParams, {"m"});
      showEach("mod", functions.getScoreDp(), scoreParams, {"s"});
      os << "\n";
    }
  }
};
} // namespace
} // namespace mlir::attn
