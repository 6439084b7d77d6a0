//===- AnalyzeBlockSparsityPass.cpp - attn-analyze-block-sparsity ---------===//
#include "lib/Analysis/MaskIntervals.h"
#include "passes/Passes.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNANALYZEBLOCKSPARSITY
#include "passes/Passes.h.inc"

namespace {
struct AnalyzeBlockSparsityPass : impl::AttnAnalyzeBlockSparsityBase<AnalyzeBlockSparsityPass> {
  void runOnOperation() override {
    for (KernelOp kernel : getOperation().getOps<KernelOp>())
      if (MaskOp mask = kernel.getMaskOp())
        kernel.setBlockSparsity(analyzeBlockSparsity(mask));
  }
};
} // namespace
} // namespace mlir::attn
