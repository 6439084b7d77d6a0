//===- VerifyPass.cpp - attn-verify ---------------------------------------===//
#include "lib/Transforms/ScalarFunctions.h"
#include "passes/Passes.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNVERIFY
#include "passes/Passes.h.inc"

namespace {
struct AttnVerifyPass : impl::AttnVerifyBase<AttnVerifyPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (module.getOps<KernelOp>().empty()) {
      module.emitError("no attn.kernel to compile: add one, e.g. "
                       "'attn.kernel @k normalizer(@softmax)'");
      return signalPassFailure();
    }
    // inline-op-limit marks functions, it refuses nothing: no value of it matters here.
    FunctionSizeLimits limits{/*inlineOps=*/0, maxFunctionOps, maxRegionOps};
    bool refused = false;
    for (KernelOp kernel : module.getOps<KernelOp>())
      refused |= failed(checkKernelSize(kernel, limits));
    if (refused)
      signalPassFailure();
  }
};
} // namespace
} // namespace mlir::attn
