//===- SelectGpuSchedulePass.cpp - attn-select-gpu-schedule ---------------===//
#include "lib/Analysis/KernelSignature.h"
#include "lib/Analysis/Schedules.h"
#include "passes/PassOptions.h"
#include "passes/Passes.h"

#include "llvm/ADT/StringExtras.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNSELECTGPUSCHEDULE
#include "passes/Passes.h.inc"

namespace {
struct SelectGpuSchedulePass : impl::AttnSelectGpuScheduleBase<SelectGpuSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<ScheduleRequest> request =
        scheduleRequest(getOperation(), kernelName, elementTypes, {"bf16"},
                        {"f32", "f16", "bf16"}, "GPU element type");
    if (failed(request))
      return signalPassFailure();
    KernelOp kernel = request->kernel;
    if (kernel.getGpuSchedule())
      return; // pinned
    SmallVector<std::string> chips(targets.begin(), targets.end());
    if (chips.empty())
      chips.assign(std::begin(kDefaultCudaTargets), std::end(kDefaultCudaTargets));
    for (const std::string &chip : chips)
      if (cudaChipVersion(chip).value_or(0) < 80) {
        kernel.emitOpError() << "CUDA target '" << chip
                             << "' is not supported; expected sm_XY with XY >= 80 (sm_80, "
                                "sm_90, ...)";
        return signalPassFailure();
      }
    SmallVector<int64_t> dims(headDims.begin(), headDims.end());
    if (dims.empty())
      dims.push_back(64);
    for (int64_t dim : dims)
      if (!llvm::is_contained(kGpuHeadDims, dim)) {
        kernel.emitOpError() << "head dim " << dim << " is not supported on GPU; supported: "
                             << llvm::join(llvm::map_range(kGpuHeadDims,
                                                           [](int64_t d) { return std::to_string(d); }),
                                           ", ");
        return signalPassFailure();
      }
    const bool scan = kernel.getAlgorithm() == Algorithm::Scan;
    const unsigned learnableParams = kernelParamNames(kernel).size();
    SmallVector<Attribute> schedules;
    for (const std::string &chip : chips)
      for (FloatType type : request->types)
        for (int64_t dim : dims)
          schedules.push_back(defaultGpuSchedule(chip, type, dim, scan, learnableParams));
    kernel.setGpuScheduleAttr(ArrayAttr::get(&getContext(), schedules));
  }
};
} // namespace
} // namespace mlir::attn
