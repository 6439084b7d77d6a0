//===- VerifyPass.cpp - attn-verify ---------------------------------------===//
#include "passes/Passes.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNVERIFY
#include "passes/Passes.h.inc"

namespace {
struct AttnVerifyPass : impl::AttnVerifyBase<AttnVerifyPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (module.getOps<KernelOp>().empty()) {
      module.emitError("no attn.kernel to compile: add one, e.g. "
                       "'attn.kernel @k normalizer(@softmax)'");
      return signalPassFailure();
    }
  }
};
} // namespace
} // namespace mlir::attn
