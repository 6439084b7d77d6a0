//===- EmitTritonPass.cpp - attn-emit-triton -------------------------------===//
#include "lib/Codegen/Triton/TritonEmitter.h"
#include "passes/PassOptions.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "passes/Passes.h"

#include "llvm/Support/raw_ostream.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNEMITTRITON
#include "passes/Passes.h.inc"

namespace {
struct EmitTritonPass : impl::AttnEmitTritonBase<EmitTritonPass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<KernelOp> kernel = selectKernel(getOperation(), kernelName);
    if (failed(kernel) || failed(emitTritonModule(*kernel, llvm::outs())))
      return signalPassFailure();
  }
};
} // namespace
} // namespace mlir::attn
