//===- EraseDeclarationsPass.cpp - attn-erase-declarations ----------------===//
#include "passes/Passes.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNERASEDECLARATIONS
#include "passes/Passes.h.inc"

namespace {
struct EraseDeclarationsPass : impl::AttnEraseDeclarationsBase<EraseDeclarationsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
      if (isa<KernelOp, NormalizerOp, ScoreOp, MaskOp>(op))
        op.erase();
  }
};
} // namespace
} // namespace mlir::attn
