//===- PassOptions.cpp - option helpers shared by the attn passes ---------===//
#include "passes/PassOptions.h"

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

FailureOr<SmallVector<FloatType>> mlir::attn::parseElementTypes(ModuleOp module,
                                                                ArrayRef<std::string> names,
                                                                ArrayRef<StringRef> defaults,
                                                                ArrayRef<StringRef> allowed,
                                                                StringRef what) {
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
