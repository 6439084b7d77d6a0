//===- LowerToGPU.cpp - attn-lower-to-gpu ---------------------------------===//
#include "lib/KernelFunctions.h"
#include "lib/LowerToGPU.h"
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

    MLIRContext *ctx = &getContext();
    SmallVector<FloatType> types;
    for (const std::string &name : elementTypes.empty()
                                       ? std::vector<std::string>{"f16", "bf16", "f32"}
                                       : std::vector<std::string>(elementTypes.begin(),
                                                                  elementTypes.end())) {
      if (name == "f32")
        types.push_back(Float32Type::get(ctx));
      else if (name == "f16")
        types.push_back(Float16Type::get(ctx));
      else if (name == "bf16")
        types.push_back(BFloat16Type::get(ctx));
      else {
        module.emitError() << "unsupported GPU element type '" << name
                           << "'; expected f32, f16 or bf16";
        return signalPassFailure();
      }
    }
    SmallVector<int64_t> dims(headDims.begin(), headDims.end());
    if (dims.empty())
      dims.assign(std::begin(kGpuHeadDims), std::end(kGpuHeadDims));
    SmallVector<std::string> chips(targets.begin(), targets.end());
    if (failed(lowerKernelToGPU(*kernel, types, dims, chips)))
      return signalPassFailure();
  }
};
} // namespace
} // namespace mlir::attn
