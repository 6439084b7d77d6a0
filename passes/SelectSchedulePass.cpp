//===- SelectSchedulePass.cpp - attn-select-schedule ----------------------===//
#include "lib/Analysis/Schedules.h"
#include "passes/PassOptions.h"
#include "passes/Passes.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNSELECTSCHEDULE
#include "passes/Passes.h.inc"

namespace {
struct SelectSchedulePass : impl::AttnSelectScheduleBase<SelectSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (vectorBits != 256 && vectorBits != 512) {
      module.emitError() << "vector-bits must be 256 or 512, got " << vectorBits.getValue();
      return signalPassFailure();
    }
    FailureOr<ScheduleRequest> request = scheduleRequest(
        module, kernelName, elementTypes, {"f32", "f64"}, {"f32", "f64"}, "element type");
    if (failed(request))
      return signalPassFailure();
    KernelOp kernel = request->kernel;
    if (kernel.getCpuSchedule())
      return; // pinned
    kernel.setCpuScheduleAttr(
        ArrayAttr::get(&getContext(), defaultCpuSchedules(kernel, request->algorithm,
                                                          request->types, vectorBits)));
  }
};
} // namespace
} // namespace mlir::attn
