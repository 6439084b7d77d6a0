//===- LowerToLoops.cpp - attn-lower-to-loops -----------------------------===//
#include "lib/KernelFunctions.h"
#include "lib/LowerToLoops.h"
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

    SmallVector<FloatType> types;
    for (const std::string &name : elementTypes.empty()
                                       ? std::vector<std::string>{"f32", "f64"}
                                       : std::vector<std::string>(elementTypes.begin(),
                                                                  elementTypes.end())) {
      if (name == "f32")
        types.push_back(Float32Type::get(&getContext()));
      else if (name == "f64")
        types.push_back(Float64Type::get(&getContext()));
      else {
        module.emitError() << "unsupported element type '" << name << "'; expected f32 or f64";
        return signalPassFailure();
      }
    }
    if (vectorBits != 256 && vectorBits != 512) {
      module.emitError() << "vector-bits must be 256 or 512, got " << vectorBits;
      return signalPassFailure();
    }
    if (failed(lowerKernelToLoops(*kernel, types, vectorBits)))
      return signalPassFailure();

    // The attn ops have served their purpose; what remains is func/scf/memref.
    for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
      if (isa<KernelOp, NormalizerOp, ScoreOp, MaskOp>(op))
        op.erase();
  }
};
} // namespace
} // namespace mlir::attn
