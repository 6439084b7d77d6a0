//===- Manifest.cpp - the artifact manifest's one writer ------------------===//
#include "lib/Codegen/Manifest.h"

#include "lib/Analysis/KernelSignature.h"
#include "lib/Analysis/NormalizerAnalysis.h"
#include "lib/Analysis/Schedules.h"

#include "attn/abi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <charconv>

using namespace mlir;
using namespace mlir::attn;

/// The LLVM global holding the text (NUL-terminated) that attn_manifest() returns.
static constexpr const char *kManifestTextSymbol = "attn_manifest_text";

/// "cuda-targets ...", "gpu-backend triton" and one "triton-kernel <dtype> <head dim>"
/// line per pair of the kernel's gpu_schedule, or "" without one.
static std::string tritonManifestLines(KernelOp kernel) {
  ArrayAttr schedules = kernel.getGpuScheduleAttr();
  if (!schedules)
    return "";
  SmallVector<std::string> chips, pairs;
  for (auto schedule : schedules.getAsRange<GpuScheduleAttr>()) {
    std::string chip = schedule.getChip().str();
    std::string pair = elementTypeName(schedule.getType()) + " " +
                       std::to_string(schedule.getHeadDim());
    if (!llvm::is_contained(chips, chip))
      chips.push_back(chip);
    if (!llvm::is_contained(pairs, pair))
      pairs.push_back(pair);
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "cuda-targets";
  for (const std::string &chip : chips)
    os << " " << chip;
  os << "\ngpu-backend triton\n";
  for (const std::string &pair : pairs)
    os << "triton-kernel " << pair << "\n";
  return text;
}

FailureOr<std::string> mlir::attn::buildManifest(KernelOp kernel) {
  NormalizerOp normalizer = kernel.getNormalizerOp();
  FailureOr<Algorithm> algorithm = requireAlgorithm(kernel);
  if (failed(algorithm))
    return failure();
  ModuleOp module = kernel->getParentOfType<ModuleOp>();
  SmallVector<FloatType> elementTypes = cpuEntryTypes(kernel);
  for (FloatType type : elementTypes)
    for (StringRef direction : {"forward", "backward"}) {
      std::string entry = ("attn_" + direction + "_" + elementTypeName(type)).str();
      if (!module.lookupSymbol<func::FuncOp>(entry))
        return kernel.emitOpError()
               << "has no CPU entry point " << entry << "; run attn-lower-to-loops first";
    }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "attn-abi " << ATTN_ABI_VERSION << "\n";
  os << "kernel " << kernel.getSymName() << "\n";
  os << "normalizer " << normalizer.getSymName() << "\n";
  os << "algorithm " << stringifyAlgorithm(*algorithm) << "\n";
  os << "denominator " << stringifyDenominatorKind(normalizer.getDenominatorKind()) << "\n";
  os << "mask " << (kernel.getMask() ? *kernel.getMask() : StringRef("none")) << "\n";
  os << "params";
  for (auto [name, init] : llvm::zip(kernelParamNames(kernel), kernelParamInits(kernel)))
    os << " " << name << "=" << llvm::format("%.17g", init);
  for (const KernelWeight &weight : kernelWeights(kernel)) {
    os << " " << weight.name << "[";
    llvm::interleave(weight.shape, os, "x");
    os << "]=";
    if (auto fill = dyn_cast<FloatAttr>(weight.init))
      os << llvm::format("%.17g", fill.getValueAsDouble());
    else
      os << cast<StringAttr>(weight.init).getValue();
  }
  os << "\n";
  ScoreOp score = kernel.getScoreOp();
  if (score && score.getRequiredHeadDim())
    os << "head-dim " << score.getRequiredHeadDim() << "\n";
  for (InputOp input : kernelInputs(kernel)) {
    Type element = input.getElementType();
    os << "input " << input.getSymName() << " "
       << (isa<FloatType>(element) ? std::string("float") : elementTypeName(element)) << " ";
    llvm::interleave(
        llvm::enumerate(input.getTensorType().getShape()), os,
        [&](auto dim) {
          auto [d, extent] = dim;
          if (std::optional<CallDim> named = input.getCallDim(d))
            os << stringifyCallDim(*named);
          else if (ShapedType::isDynamic(extent))
            os << "?";
          else
            os << extent;
        },
        "x");
    if (input.getLearnable())
      os << " learnable";
    if (FloatAttr init = input.getInitAttr()) {
      // The shortest text that reads back as the same double: init=0.43.
      char buffer[32];
      auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), init.getValueAsDouble());
      os << " init=" << StringRef(buffer, end - buffer);
    }
    os << "\n";
  }
  // The contraction: kind, its constant c (or 1/sqrt(d)) and "feature" with a feature
  // map; where the score is c·q·k, a runtime can rescale q for another scale.
  os << "contract " << (score ? stringifyContractKind(score.getContract()) : "scaled_dot") << " ";
  if (std::optional<double> fixed = fixedScoreScale(kernel))
    os << llvm::format("%.17g", *fixed);
  else
    os << "1/sqrt(d)";
  os << (score && score.hasFeatureMap() ? " feature\n" : "\n");
  os << "dtypes";
  for (FloatType type : elementTypes)
    os << " " << elementTypeName(type);
  os << "\n";
  std::string cuda = tritonManifestLines(kernel);
  os << (cuda.empty() ? "devices cpu\n" : "devices cpu cuda\n") << cuda;
  return text;
}

void mlir::attn::emitManifest(ModuleOp module, StringRef text) {
  MLIRContext *ctx = module.getContext();
  ImplicitLocOpBuilder b(module.getLoc(), ctx);
  b.setInsertionPointToEnd(module.getBody());
  std::string data = text.str();
  data.push_back('\0');
  auto arrayType = LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), data.size());
  auto global = LLVM::GlobalOp::create(b, arrayType, /*isConstant=*/true, LLVM::Linkage::Internal,
                                       kManifestTextSymbol, b.getStringAttr(data));
  auto ptrType = LLVM::LLVMPointerType::get(ctx);
  auto function =
      LLVM::LLVMFuncOp::create(b, ATTN_MANIFEST_SYMBOL, LLVM::LLVMFunctionType::get(ptrType, {}));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(function.addEntryBlock(b));
  Value address = LLVM::AddressOfOp::create(b, global);
  LLVM::ReturnOp::create(b, address);
}

StringRef mlir::attn::manifestText(ModuleOp module) {
  auto global = module.lookupSymbol<LLVM::GlobalOp>(kManifestTextSymbol);
  if (!global)
    return "";
  return cast<StringAttr>(*global.getValue()).getValue().drop_back(); // the NUL
}
