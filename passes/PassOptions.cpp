//===- PassOptions.cpp - option helpers shared by the attn passes ---------===//
#include "passes/PassOptions.h"

#include "lib/Analysis/NormalizerAnalysis.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::attn;

FailureOr<KernelOp> mlir::attn::selectKernel(ModuleOp module, StringRef name) {
  if (!name.empty()) {
    if (auto kernel = module.lookupSymbol<KernelOp>(name))
      return kernel;
    return module.emitError() << "no attn.kernel named '" << name << "'";
  }
  SmallVector<KernelOp> kernels = llvm::to_vector(module.getOps<KernelOp>());
  if (kernels.size() == 1)
    return kernels.front();
  auto diag = module.emitError() << "an artifact holds one kernel; this module has "
                                 << kernels.size() << ": choose one with kernel=<name>";
  for (KernelOp candidate : kernels)
    diag.attachNote(candidate.getLoc()) << "candidate @" << candidate.getSymName();
  return failure();
}

/// The float types `names` lists (`defaults` when empty), each one of `allowed`;
/// otherwise an error on `module`: "unsupported <what> 'x'; expected a, b or c".
static FailureOr<SmallVector<FloatType>>
parseElementTypes(ModuleOp module, ArrayRef<std::string> names, ArrayRef<StringRef> defaults,
                  ArrayRef<StringRef> allowed, StringRef what) {
  MLIRContext *ctx = module.getContext();
  SmallVector<StringRef> chosen(defaults);
  if (!names.empty())
    chosen.assign(names.begin(), names.end());
  SmallVector<FloatType> types;
  for (StringRef name : chosen) {
    FloatType type = llvm::StringSwitch<FloatType>(name)
                         .Case("f16", Float16Type::get(ctx))
                         .Case("bf16", BFloat16Type::get(ctx))
                         .Case("f32", Float32Type::get(ctx))
                         .Case("f64", Float64Type::get(ctx))
                         .Default(nullptr);
    if (!type || !llvm::is_contained(allowed, name)) {
      InFlightDiagnostic diag = module.emitError()
                                << "unsupported " << what << " '" << name << "'; expected ";
      for (size_t i = 0; i < allowed.size(); ++i)
        diag << (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") << allowed[i];
      return failure();
    }
    types.push_back(type);
  }
  return types;
}

FailureOr<ScheduleRequest> mlir::attn::scheduleRequest(ModuleOp module, StringRef kernelName,
                                                       ArrayRef<std::string> elementTypes,
                                                       ArrayRef<StringRef> defaults,
                                                       ArrayRef<StringRef> allowed,
                                                       StringRef what) {
  FailureOr<KernelOp> kernel = selectKernel(module, kernelName);
  if (failed(kernel))
    return failure();
  FailureOr<SmallVector<FloatType>> types =
      parseElementTypes(module, elementTypes, defaults, allowed, what);
  if (failed(types))
    return failure();
  FailureOr<Algorithm> algorithm = requireAlgorithm(*kernel);
  if (failed(algorithm))
    return failure();
  return ScheduleRequest{*kernel, *algorithm, std::move(*types)};
}
