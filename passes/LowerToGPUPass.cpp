//===- LowerToGPU.cpp - attn-lower-to-gpu ---------------------------------===//
#include "lib/Codegen/GPU/GPULowering.h"
#include "passes/PassOptions.h"
#include "passes/Passes.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNLOWERTOGPU
#include "passes/Passes.h.inc"

namespace {
struct LowerToGPUPass : impl::AttnLowerToGPUBase<LowerToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<KernelOp> kernel = selectKernel(module, kernelName);
    if (failed(kernel))
      return signalPassFailure();

    FailureOr<SmallVector<FloatType>> types =
        parseElementTypes(module, elementTypes, {"f16", "bf16", "f32"}, {"f32", "f16", "bf16"},
                          "GPU element type");
    if (failed(types))
      return signalPassFailure();
    SmallVector<int64_t> dims(headDims.begin(), headDims.end());
    if (dims.empty())
      dims.assign(std::begin(kGpuHeadDims), std::end(kGpuHeadDims));
    SmallVector<std::string> chips(targets.begin(), targets.end());
    if (failed(lowerKernelToGPU(*kernel, *types, dims, chips)))
      return signalPassFailure();
  }
};
} // namespace
} // namespace mlir::attn
