//===- InstantiateFunctionsPass.cpp - attn-instantiate-functions ----------===//
#include "lib/Transforms/ScalarFunctions.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNINSTANTIATEFUNCTIONS
#include "passes/Passes.h.inc"

namespace {
struct InstantiateFunctionsPass : impl::AttnInstantiateFunctionsBase<InstantiateFunctionsPass> {
  void runOnOperation() override {
    for (KernelOp kernel : llvm::to_vector(getOperation().getOps<KernelOp>())) {
      // (type, lanes) of every instance the kernel's schedules call.
      SmallVector<std::pair<FloatType, int64_t>> needed;
      if (ArrayAttr schedules = kernel.getCpuScheduleAttr())
        for (auto schedule : schedules.getAsRange<CpuScheduleAttr>()) {
          auto type = cast<FloatType>(schedule.getType());
          needed.emplace_back(type, 0);
          if (schedule.getLanes() > 0) // tiled and decode
            needed.emplace_back(type, schedule.getLanes());
        }
      for (auto [type, lanes] : needed)
        if (failed(instantiateKernelFunctions(kernel, type, lanes)))
          return signalPassFailure();
    }
  }
};
} // namespace
} // namespace mlir::attn
