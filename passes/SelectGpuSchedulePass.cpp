//===- SelectGpuSchedulePass.cpp - attn-select-gpu-schedule ---------------===//
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
    FailureOr<ScheduleRequest> request =
        scheduleRequest(getOperation(), kernelName, elementTypes, {"f16", "bf16", "f32"},
                        {"f32", "f16", "bf16"}, "GPU element type");
    if (failed(request))
      return signalPassFailure();
    KernelOp kernel = request->kernel;
    if (kernel.getGpuSchedule())
      return; // pinned
    SmallVector<int64_t> dims(headDims.begin(), headDims.end());
    if (dims.empty())
      dims.assign(std::begin(kGpuHeadDims), std::end(kGpuHeadDims));
    SmallVector<Attribute> schedules =
        defaultGpuSchedules(request->algorithm, request->types, dims);
    for (Attribute schedule : schedules)
      if (failed(checkGpuSchedule(kernel, cast<GpuScheduleAttr>(schedule))))
        return signalPassFailure();
    kernel.setGpuScheduleAttr(ArrayAttr::get(&getContext(), schedules));
  }
};
} // namespace
} // namespace mlir::attn
