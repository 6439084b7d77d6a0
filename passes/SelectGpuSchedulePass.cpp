//===- SelectGpuSchedulePass.cpp - attn-select-gpu-schedule ---------------===//
#include "lib/Analysis/NormalizerAnalysis.h"
#include "lib/Analysis/Schedules.h"
#include "lib/Codegen/GPU/GPULowering.h"
#include "passes/PassOptions.h"
#include "passes/Passes.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNSELECTGPUSCHEDULE
#include "passes/Passes.h.inc"

namespace {
struct SelectGpuSchedulePass : impl::AttnSelectGpuScheduleBase<SelectGpuSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<KernelOp> kernel = selectKernel(module, kernelName);
    if (failed(kernel))
      return signalPassFailure();
    FailureOr<SmallVector<FloatType>> types = parseElementTypes(
        module, elementTypes, {"f16", "bf16", "f32"}, {"f32", "f16", "bf16"}, "GPU element type");
    if (failed(types))
      return signalPassFailure();
    SmallVector<int64_t> dims(headDims.begin(), headDims.end());
    if (dims.empty())
      dims.assign(std::begin(kGpuHeadDims), std::end(kGpuHeadDims));
    FailureOr<Algorithm> algorithm = requireAlgorithm(*kernel);
    if (failed(algorithm))
      return signalPassFailure();
    if (kernel->getGpuSchedule())
      return; // pinned
    SmallVector<Attribute> schedules = defaultGpuSchedules(*algorithm, *types, dims);
    for (Attribute schedule : schedules)
      if (failed(checkGpuSchedule(*kernel, cast<GpuScheduleAttr>(schedule))))
        return signalPassFailure();
    kernel->setGpuScheduleAttr(ArrayAttr::get(&getContext(), schedules));
  }
};
} // namespace
} // namespace mlir::attn
