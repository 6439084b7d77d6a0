//===- Manifest.cpp - the artifact manifest's one writer ------------------===//
#include "lib/Codegen/Manifest.h"

#include "lib/Analysis/KernelSignature.h"
#include "lib/Analysis/KernelSplits.h"
#include "lib/Analysis/NormalizerAnalysis.h"
#include "lib/Analysis/Schedules.h"

#include "attn/abi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::attn;
namespace json = llvm::json;

/// The LLVM global holding the text (NUL-terminated) that attn_manifest() returns.
static constexpr const char *kManifestTextSymbol = "attn_manifest_text";

/// {"targets", "backend", "kernels": [{"dtype", "head_dim"}]} of the kernel's
/// gpu_schedule (each chip and each (dtype, head dim) pair once), or null without one.
static json::Value cudaSection(KernelOp kernel) {
  ArrayAttr schedules = kernel.getGpuScheduleAttr();
  if (!schedules)
    return nullptr;
  SmallVector<std::string> chips;
  SmallVector<std::pair<std::string, int64_t>> pairs;
  for (auto schedule : schedules.getAsRange<GpuScheduleAttr>()) {
    std::string chip = schedule.getChip().str();
    std::pair<std::string, int64_t> pair{elementTypeName(schedule.getType()),
                                         schedule.getHeadDim()};
    if (!llvm::is_contained(chips, chip))
      chips.push_back(chip);
    if (!llvm::is_contained(pairs, pair))
      pairs.push_back(pair);
  }
  json::Array targets, kernels;
  for (const std::string &chip : chips)
    targets.push_back(chip);
  for (const auto &[dtype, headDim] : pairs)
    kernels.push_back(json::Object{{"dtype", dtype}, {"head_dim", headDim}});
  return json::Object{
      {"targets", std::move(targets)}, {"backend", "triton"}, {"kernels", std::move(kernels)}};
}

/// Per CPU schedule a call can reach but the decode ones (whose rows cost what their
/// tiled schedule's do), what a (query, key) pair's multiply-adds cost ({"dtype",
/// "head_dim" and "d" (absent: the generic or linear loops, which serve every other
/// call), "forward", "backward"}). A score with weights projects q and k to the
/// weights' output width before the entry point dispatches on it (RowTransforms.cpp):
/// only the tiled schedule of that width is reached, by calls whose dv is that width
/// and whose q has the weights' input width ("d").
static json::Array cpuCostSection(KernelOp kernel, Algorithm algorithm) {
  json::Array costs;
  ArrayAttr schedules = kernel.getCpuScheduleAttr();
  if (!schedules)
    return costs;
  ScoreOp score = kernel.getScoreOp();
  const bool projects = score && score.getNumWeights() > 0;
  for (auto schedule : schedules.getAsRange<CpuScheduleAttr>()) {
    if (schedule.getVariant() == CpuVariant::Decode)
      continue;
    const bool tiled = schedule.getVariant() == CpuVariant::Tiled;
    if (tiled && projects && schedule.getHeadDim() != score.getWeightShape(0).front())
      continue;
    CpuPairCost cost = cpuPairCost(schedule, algorithm);
    json::Object entry{{"dtype", elementTypeName(schedule.getType())},
                       {"forward", cost.forward},
                       {"backward", cost.backward}};
    if (tiled) {
      entry["head_dim"] = schedule.getHeadDim();
      entry["d"] = projects ? score.getRequiredHeadDim() : schedule.getHeadDim();
    }
    costs.push_back(std::move(entry));
  }
  return costs;
}

/// One extent of an input's shape as the schema writes it: the call dimension's
/// name, "?" (any) or the fixed extent.
static json::Value inputExtent(InputOp input, unsigned dim, int64_t extent) {
  if (std::optional<CallDim> named = input.getCallDim(dim))
    return stringifyCallDim(*named).str();
  if (ShapedType::isDynamic(extent))
    return "?";
  return extent;
}

FailureOr<std::string> mlir::attn::buildManifest(KernelOp kernel) {
  NormalizerOp normalizer = kernel.getNormalizerOp();
  FailureOr<Algorithm> algorithm = requireAlgorithm(kernel);
  if (failed(algorithm))
    return failure();
  ModuleOp module = kernel->getParentOfType<ModuleOp>();
  // The entry points attn-lower-to-loops generated for this kernel, by their
  // #attn.entry (role, element type).
  SmallVector<std::pair<EntryRole, Type>> entries;
  for (auto function : module.getOps<func::FuncOp>())
    if (auto entry = function->getAttrOfType<EntryAttr>(AttnDialect::kEntryAttrName))
      if (entry.getKernel().getValue() == kernel.getSymName())
        entries.emplace_back(entry.getRole(), entry.getType());
  SmallVector<FloatType> elementTypes = cpuEntryTypes(kernel);
  for (FloatType type : elementTypes)
    for (EntryRole role : {EntryRole::Forward, EntryRole::Backward})
      if (!llvm::is_contained(entries, std::make_pair(role, Type(type))))
        return kernel.emitOpError() << "has no CPU " << stringifyEntryRole(role)
                                    << " entry point on " << type
                                    << " (a func.func with #attn.entry<role = "
                                    << stringifyEntryRole(role) << ", type = " << type
                                    << ">); run attn-lower-to-loops first";
  json::Array params;
  for (auto [name, init] : llvm::zip(kernelParamNames(kernel), kernelParamInits(kernel)))
    params.push_back(json::Object{{"name", name}, {"shape", json::Array{}}, {"init", init}});
  for (const KernelWeight &weight : kernelWeights(kernel)) {
    json::Value init = nullptr;
    if (auto fill = dyn_cast<FloatAttr>(weight.init))
      init = fill.getValueAsDouble();
    else
      init = cast<StringAttr>(weight.init).getValue().str();
    params.push_back(json::Object{{"name", weight.name},
                                  {"shape", json::Array(weight.shape)},
                                  {"init", std::move(init)}});
  }
  json::Array inputs;
  for (InputOp input : kernelInputs(kernel)) {
    Type element = input.getElementType();
    json::Array shape;
    for (auto [d, extent] : llvm::enumerate(input.getTensorType().getShape()))
      shape.push_back(inputExtent(input, d, extent));
    json::Object entry{
        {"name", input.getSymName()},
        {"element", isa<FloatType>(element) ? std::string("float") : elementTypeName(element)},
        {"shape", std::move(shape)},
        {"learnable", input.getLearnable()}};
    if (FloatAttr init = input.getInitAttr())
      entry["init"] = init.getValueAsDouble();
    inputs.push_back(std::move(entry));
  }
  // The contraction: kind, its constant c (null: 1/sqrt(d)) and whether a feature map
  // applies; where the score is c·q·k, a runtime can rescale q for another scale.
  ScoreOp score = kernel.getScoreOp();
  json::Value scale = nullptr;
  if (std::optional<double> fixed = fixedScoreScale(kernel))
    scale = *fixed;
  json::Object contract{
      {"kind", score ? stringifyContractKind(score.getContract()) : "scaled_dot"},
      {"scale", std::move(scale)},
      {"feature", score && score.hasFeatureMap()}};
  json::Array dtypes;
  for (FloatType type : elementTypes)
    dtypes.push_back(elementTypeName(type));
  // How the runtime may divide a slice into calls: the contract its work split and its
  // partial calls read (rather than the algorithm's name).
  KernelSplits splits = kernelSplits(kernel, *algorithm);
  json::Object splitsSection{{"forward", stringifySliceSplit(splits.forward)},
                             {"backward", stringifySliceSplit(splits.backward)},
                             {"partial_calls", splits.partialCalls}};
  json::Value cuda = cudaSection(kernel);
  json::Object manifest{
      {"abi", ATTN_ABI_VERSION},
      {"kernel", kernel.getSymName()},
      {"normalizer", normalizer.getSymName()},
      {"algorithm", stringifyAlgorithm(*algorithm)},
      {"splits", std::move(splitsSection)},
      {"denominator", stringifyDenominatorKind(normalizer.getDenominatorKind())},
      {"mask", kernel.getMask() ? *kernel.getMask() : StringRef("none")},
      {"params", std::move(params)},
      {"inputs", std::move(inputs)},
      {"contract", std::move(contract)},
      {"cpu_cost", cpuCostSection(kernel, *algorithm)},
      {"dtypes", std::move(dtypes)},
      {"devices", cuda.kind() == json::Value::Null ? json::Array{"cpu"}
                                                    : json::Array{"cpu", "cuda"}}};
  if (score && score.getRequiredHeadDim())
    manifest["head_dim"] = score.getRequiredHeadDim();
  if (cuda.kind() != json::Value::Null)
    manifest["cuda"] = std::move(cuda);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", json::Value(std::move(manifest))) << "\n";
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
