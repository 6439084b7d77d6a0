//===- EmitManifestPass.cpp - attn-emit-manifest --------------------------===//
#include "lib/Analysis/Schedules.h"
#include "lib/Codegen/Manifest.h"
#include "passes/Passes.h"

#include "attn/abi.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNEMITMANIFEST
#include "passes/Passes.h.inc"

namespace {
struct EmitManifestPass : impl::AttnEmitManifestBase<EmitManifestPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<KernelOp> kernel = scheduledKernel(module, /*gpu=*/false);
    if (failed(kernel))
      return signalPassFailure();
    if (module.lookupSymbol(ATTN_MANIFEST_SYMBOL)) {
      module.emitError() << "the module already has a manifest (@" << ATTN_MANIFEST_SYMBOL
                         << "); an artifact holds one";
      return signalPassFailure();
    }
    FailureOr<std::string> text = buildManifest(*kernel);
    if (failed(text))
      return signalPassFailure();
    emitManifest(module, *text);
  }
};
} // namespace
} // namespace mlir::attn
