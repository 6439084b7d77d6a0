//===- KernelSignature.cpp - what a kernel exposes at the ABI -------------===//
#include "lib/Analysis/KernelSignature.h"

using namespace mlir;
using namespace mlir::attn;

SmallVector<StringRef> mlir::attn::kernelParamNames(KernelOp kernel) {
  SmallVector<StringRef> names;
  for (Attribute name : kernel.getNormalizerOp().getParamNames())
    names.push_back(cast<StringAttr>(name).getValue());
  if (ScoreOp score = kernel.getScoreOp())
    for (Attribute name : score.getParamNames())
      names.push_back(cast<StringAttr>(name).getValue());
  return names;
}

SmallVector<double> mlir::attn::kernelParamInits(KernelOp kernel) {
  SmallVector<double> inits(kernel.getNormalizerOp().getParamInits());
  if (ScoreOp score = kernel.getScoreOp())
    llvm::append_range(inits, score.getParamInits());
  return inits;
}

SmallVector<KernelWeight> mlir::attn::kernelWeights(KernelOp kernel) {
  SmallVector<KernelWeight> weights;
  ScoreOp score = kernel.getScoreOp();
  if (!score)
    return weights;
  int64_t offset = kernelParamNames(kernel).size();
  for (unsigned w = 0; w < score.getNumWeights(); ++w) {
    weights.push_back({cast<StringAttr>((*score.getWeightNames())[w]).getValue(),
                       score.getWeightShape(w), offset, score.getWeightSize(w),
                       (*score.getWeightInits())[w]});
    offset += weights.back().size;
  }
  return weights;
}

std::optional<double> mlir::attn::fixedScoreScale(KernelOp kernel) {
  ScoreOp score = kernel.getScoreOp();
  if (score && score.getScale())
    return score.getScale()->convertToDouble();
  if (score && score.getContract() != ContractKind::ScaledDot)
    return 1.0;
  return std::nullopt;
}

std::string mlir::attn::elementTypeName(Type type) {
  std::string name;
  llvm::raw_string_ostream os(name);
  type.print(os);
  return name;
}
