//===- DeriveBackwardPass.cpp - attn-derive-backward ----------------------===//
#include "lib/Transforms/ScalarFunctions.h"
#include "passes/Passes.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNDERIVEBACKWARD
#include "passes/Passes.h.inc"

namespace {
struct DeriveBackwardPass : impl::AttnDeriveBackwardBase<DeriveBackwardPass> {
  using Base::Base;

  void runOnOperation() override {
    FunctionSizeLimits limits{inlineOpLimit, maxFunctionOps, maxRegionOps};
    for (KernelOp kernel : llvm::to_vector(getOperation().getOps<KernelOp>()))
      if (!kernel.getFunctions() &&
          (failed(checkKernelSize(kernel, limits)) ||
           failed(outlineKernelFunctions(kernel, limits))))
        return signalPassFailure();
  }
};
} // namespace
} // namespace mlir::attn
