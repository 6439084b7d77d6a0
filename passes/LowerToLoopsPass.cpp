//===- LowerToLoopsPass.cpp - attn-lower-to-loops -------------------------===//
#include "lib/Analysis/Schedules.h"
#include "lib/Codegen/CPU/CPULowering.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNLOWERTOLOOPS
#include "passes/Passes.h.inc"

namespace {
struct LowerToLoopsPass : impl::AttnLowerToLoopsBase<LowerToLoopsPass> {
  void runOnOperation() override {
    FailureOr<KernelOp> kernel = scheduledKernel(getOperation(), /*gpu=*/false);
    if (failed(kernel) || failed(lowerKernelToLoops(*kernel)))
      return signalPassFailure();
  }
};
} // namespace
} // namespace mlir::attn
