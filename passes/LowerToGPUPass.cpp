//===- LowerToGPUPass.cpp - attn-lower-to-gpu -----------------------------===//
#include "lib/Analysis/Schedules.h"
#include "lib/Codegen/GPU/GPULowering.h"
#include "passes/Passes.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNLOWERTOGPU
#include "passes/Passes.h.inc"

namespace {
struct LowerToGPUPass : impl::AttnLowerToGPUBase<LowerToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<KernelOp> kernel = scheduledKernel(getOperation(), /*gpu=*/true);
    SmallVector<std::string> chips(targets.begin(), targets.end());
    if (failed(kernel) || failed(lowerKernelToGPU(*kernel, chips)))
      return signalPassFailure();
  }
};
} // namespace
} // namespace mlir::attn
