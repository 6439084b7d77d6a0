//===- SelectSchedulePass.cpp - attn-select-schedule ----------------------===//
#include "lib/Analysis/NormalizerAnalysis.h"
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
    FailureOr<KernelOp> kernel = selectKernel(module, kernelName);
    if (failed(kernel))
      return signalPassFailure();
    FailureOr<SmallVector<FloatType>> types =
        parseElementTypes(module, elementTypes, {"f32", "f64"}, {"f32", "f64"}, "element type");
    if (failed(types))
      return signalPassFailure();
    if (vectorBits != 256 && vectorBits != 512) {
      module.emitError() << "vector-bits must be 256 or 512, got " << vectorBits.getValue();
      return signalPassFailure();
    }
    FailureOr<Algorithm> algorithm = requireAlgorithm(*kernel);
    if (failed(algorithm))
      return signalPassFailure();
    if (kernel->getCpuSchedule())
      return; // pinned
    kernel->setCpuScheduleAttr(ArrayAttr::get(
        &getContext(), defaultCpuSchedules(*kernel, *algorithm, *types, vectorBits)));
  }
};
} // namespace
} // namespace mlir::attn
