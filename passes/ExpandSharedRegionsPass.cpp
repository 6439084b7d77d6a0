//===- ExpandSharedRegionsPass.cpp - attn-expand-shared-regions -----------===//
#include "passes/Passes.h"

#include "mlir/IR/IRMapping.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNEXPANDSHAREDREGIONS
#include "passes/Passes.h.inc"

namespace {
/// Copies the shared region's ops to the start of `region` and gives the uses of
/// its shared-value arguments the copied values, then drops those arguments.
void inlineShared(Block &shared, Region &region) {
  Block &body = region.front();
  unsigned numCommon = shared.getNumArguments();
  IRMapping mapping;
  mapping.map(shared.getArguments(), body.getArguments().take_front(numCommon));
  OpBuilder b = OpBuilder::atBlockBegin(&body);
  for (Operation &op : shared.without_terminator())
    b.clone(op, mapping);
  auto yield = cast<YieldOp>(shared.getTerminator());
  for (auto [arg, value] : llvm::zip(body.getArguments().drop_front(numCommon),
                                     yield.getValues()))
    arg.replaceAllUsesWith(mapping.lookup(value));
  body.eraseArguments(numCommon, body.getNumArguments() - numCommon);
}

struct ExpandSharedRegionsPass
    : impl::AttnExpandSharedRegionsBase<ExpandSharedRegionsPass> {
  void runOnOperation() override {
    for (NormalizerOp normalizer : getOperation().getOps<NormalizerOp>()) {
      Region &shared = normalizer.getShared();
      if (!shared.empty()) {
        inlineShared(shared.front(), normalizer.getNumerator());
        if (!normalizer.getDenominator().empty())
          inlineShared(shared.front(), normalizer.getDenominator());
        shared.getBlocks().clear();
      }
      if (normalizer.getSumOfNumerator()) {
        IRMapping mapping;
        normalizer.getNumerator().cloneInto(&normalizer.getDenominator(), mapping);
        normalizer.setSumOfNumerator(false);
      }
    }
  }
};
} // namespace
} // namespace mlir::attn
