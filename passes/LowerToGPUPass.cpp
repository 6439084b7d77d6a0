//===- LowerToGPUPass.cpp - attn-lower-to-gpu -----------------------------===//
#include "lib/Analysis/Schedules.h"
#include "lib/Codegen/GPU/GPULowering.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNLOWERTOGPU
#include "passes/Passes.h.inc"

namespace {
struct LowerToGPUPass : impl::AttnLowerToGPUBase<LowerToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<KernelOp> kernel = scheduledKernel(getOperation(), /*gpu=*/true);
    SmallVector<std::string> chips(targets.begin(), targets.end());
    if (failed(kernel) || failed(lowerKernelToGPU(*kernel, chips)))
      return signalPassFailure();
  }
};
} // namespace
} // namespace mlir::attn
