//===- LowerToLoopsPass.cpp - attn-lower-to-loops -------------------------===//
#include "lib/Analysis/Schedules.h"
#include "lib/Codegen/CPU/CPULowering.h"
#include "passes/Passes.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNLOWERTOLOOPS
#include "passes/Passes.h.inc"

namespace {
struct LowerToLoopsPass : impl::AttnLowerToLoopsBase<LowerToLoopsPass> {
  void runOnOperation() override {
    FailureOr<KernelOp> kernel = scheduledKernel(getOperation(), /*gpu=*/false);
    if (failed(kernel) || failed(lowerKernelToLoops(*kernel)))
      return signalPassFailure();
  }
};
} // namespace
} // namespace mlir::attn
