//===- ClassifyNormalizer.cpp - attn-classify-normalizer ------------------===//
#include "lib/NormalizerAnalysis.h"
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
      FailureOr<NormalizerClass> form = classifyNormalizer(normalizer);
      if (mlir::failed(form)) {
        failed = true;
        continue;
      }
      normalizer.setAlgorithm(form->algorithm);
    }
    if (failed)
      signalPassFailure();
  }
};
} // namespace
} // namespace mlir::attn
