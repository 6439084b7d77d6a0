//===- TestDifferentiatePass.cpp - attn-test-differentiate ----------------===//
#include "lib/Transforms/Differentiate.h"
#include "passes/Passes.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNTESTDIFFERENTIATE
#include "passes/Passes.h.inc"

namespace {
struct TestDifferentiatePass : impl::AttnTestDifferentiateBase<TestDifferentiatePass> {
  void runOnOperation() override {
    for (auto function : llvm::to_vector(getOperation().getOps<func::FuncOp>())) {
      if (function.getNumResults() != 1 || !isa<FloatType>(function.getResultTypes()[0]))
        continue;
      for (auto [index, type] : llvm::enumerate(function.getArgumentTypes()))
        if (isa<FloatType>(type) &&
            failed(buildDerivative(function, index,
                                   (function.getName() + ".d." + Twine(index)).str())))
          return signalPassFailure();
    }
  }
};
} // namespace
} // namespace mlir::attn
