//===- ClassifyNormalizerPass.cpp - attn-classify-normalizer --------------===//
#include "lib/Analysis/KernelisedAnalysis.h"
#include "lib/Analysis/NormalizerAnalysis.h"
#include "lib/Transforms/StableForms.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "passes/Passes.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNCLASSIFYNORMALIZER
#include "passes/Passes.h.inc"

namespace {
struct ClassifyNormalizerPass
    : impl::AttnClassifyNormalizerBase<ClassifyNormalizerPass> {
  void runOnOperation() override {
    bool failed = false;
    for (NormalizerOp normalizer : getOperation().getOps<NormalizerOp>()) {
      if (mlir::failed(rewriteToStableForms(normalizer))) {
        failed = true;
        continue;
      }
      FailureOr<NormalizerClass> form = classifyNormalizer(normalizer);
      if (mlir::failed(form)) {
        failed = true;
        continue;
      }
      normalizer.setAlgorithm(form->algorithm);
    }
    if (failed)
      return signalPassFailure();
    // A kernel runs in the linear-time form when its score, normalizer and mask
    // allow it; the others keep their normalizer's algorithm.
    for (KernelOp kernel : getOperation().getOps<KernelOp>()) {
      NormalizerOp normalizer = kernel.getNormalizerOp();
      if (!normalizer)
        continue;
      if (mlir::failed(verifyRowNumerics(kernel))) {
        failed = true;
        continue;
      }
      // A scan's or an implicit normalizer's weights depend on the other keys of the
      // row: never linear-time.
      Algorithm algorithm = *normalizer.getAlgorithm();
      if (algorithm != Algorithm::Scan && algorithm != Algorithm::Implicit &&
          matchKernelised(kernel, /*explain=*/true))
        algorithm = Algorithm::Kernelised;
      kernel.setAlgorithm(algorithm);
    }
    if (failed)
      signalPassFailure();
  }
};
} // namespace
} // namespace mlir::attn
