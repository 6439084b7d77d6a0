//===- Manifest.cpp - the artifact manifest's one writer ------------------===//
#include "lib/Codegen/Manifest.h"

#include "lib/Analysis/KernelSignature.h"
#include "lib/Analysis/NormalizerAnalysis.h"
#include "lib/Analysis/Schedules.h"
#include "lib/Codegen/GPU/GPULowering.h"

#include "attn/abi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <charconv>

using namespace mlir;
using namespace mlir::attn;

/// The LLVM global holding the text (NUL-terminated) that attn_manifest() returns.
static constexpr const char *kManifestTextSymbol = "attn_manifest_text";

/// "cuda-targets ..." then one "cuda-kernel ..." line per kernel of the module's
/// gpu.module @attn_cuda, or "" without one.
static std::string cudaManifestLines(ModuleOp module) {
  auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(kCudaModuleName);
  if (!gpuModule)
    return "";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "cuda-targets";
  if (ArrayAttr targets = gpuModule.getTargetsAttr())
    for (Attribute target : targets)
      if (auto nvvm = dyn_cast<NVVM::NVVMTargetAttr>(target))
        os << " " << nvvm.getChip();
  os << "\n";
  for (auto function : gpuModule.getOps<gpu::GPUFuncOp>()) {
    auto role = function->getAttrOfType<StringAttr>("attn.role");
    if (!role)
      continue;
    os << "cuda-kernel " << role.getValue() << " "
       << function->getAttrOfType<StringAttr>("attn.dtype").getValue() << " "
       << function->getAttrOfType<IntegerAttr>("attn.head_dim").getInt() << " "
       << function.getName() << " tile "
       << function->getAttrOfType<IntegerAttr>("attn.tile").getInt() << " threads "
       << (*function.getKnownBlockSize())[0] << " smem 0\n";
  }
  return text;
}

/// recordTritonKernels' module attributes.
static constexpr const char *kTritonTargetsAttr = "attn.triton_targets";
static constexpr const char *kTritonKernelsAttr = "attn.triton_kernels";

void mlir::attn::recordTritonKernels(ModuleOp module, ArrayRef<std::string> targets,
                                     ArrayRef<std::string> dtypes, ArrayRef<int64_t> headDims) {
  Builder b(module.getContext());
  SmallVector<Attribute> chips, pairs;
  for (const std::string &target : targets)
    chips.push_back(b.getStringAttr(target));
  for (const std::string &dtype : dtypes)
    for (int64_t headDim : headDims)
      pairs.push_back(b.getStringAttr(dtype + " " + std::to_string(headDim)));
  module->setAttr(kTritonTargetsAttr, b.getArrayAttr(chips));
  module->setAttr(kTritonKernelsAttr, b.getArrayAttr(pairs));
}

/// "cuda-targets ...", "gpu-backend triton" and the "triton-kernel" lines that
/// recordTritonKernels asked for, or "" without them.
static std::string tritonManifestLines(ModuleOp module) {
  auto targets = module->getAttrOfType<ArrayAttr>(kTritonTargetsAttr);
  auto pairs = module->getAttrOfType<ArrayAttr>(kTritonKernelsAttr);
  if (!targets || !pairs)
    return "";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "cuda-targets";
  for (auto target : targets.getAsValueRange<StringAttr>())
    os << " " << target;
  os << "\ngpu-backend triton\n";
  for (auto pair : pairs.getAsValueRange<StringAttr>())
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
  if (kernel.getGpuSchedule() && !module.lookupSymbol(kCudaModuleName))
    return kernel.emitOpError() << "has a gpu_schedule but the module has no gpu.module @"
                                << kCudaModuleName << "; run attn-lower-to-gpu first";
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
  std::string cuda = cudaManifestLines(module) + tritonManifestLines(module);
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
