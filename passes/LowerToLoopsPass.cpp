//===- LowerToLoops.cpp - attn-lower-to-loops -----------------------------===//
#include "lib/Codegen/CPU/CPULowering.h"
#include "passes/PassOptions.h"
#include "passes/Passes.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNLOWERTOLOOPS
#include "passes/Passes.h.inc"

namespace {
struct LowerToLoopsPass : impl::AttnLowerToLoopsBase<LowerToLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<KernelOp> kernel = selectKernel(module, kernelName);
    if (failed(kernel))
      return signalPassFailure();

    FailureOr<SmallVector<FloatType>> types = parseElementTypes(
        module, elementTypes, {"f32", "f64"}, {"f32", "f64"}, "element type");
    if (failed(types))
      return signalPassFailure();
    if (vectorBits != 256 && vectorBits != 512) {
      module.emitError() << "vector-bits must be 256 or 512, got " << vectorBits;
      return signalPassFailure();
    }
    if (failed(lowerKernelToLoops(*kernel, *types, vectorBits)))
      return signalPassFailure();

    // The attn ops have served their purpose; what remains is func/scf/memref.
    for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
      if (isa<KernelOp, NormalizerOp, ScoreOp, MaskOp>(op))
        op.erase();
  }
};
} // namespace
} // namespace mlir::attn
