//===- VerifyPass.cpp - attn-verify ---------------------------------------===//
#include "lib/Transforms/ScalarFunctions.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNVERIFY
#include "passes/Passes.h.inc"

namespace {
/// Refuses a constant expression of `region` (an op whose operands are all constants,
/// such as 1.0 / 0.0 or exp(100.0) in f32) that evaluates to NaN, or to an infinity
/// used other than in a comparison, as the verifier refuses such a literal: the
/// canonicalizer would fold it into the kernel. Folds each op once, on its constant
/// operands, memoising the values on the way: linear in the region.
LogicalResult verifyConstantExpressions(Region &region, StringRef regionName) {
  if (region.empty())
    return success();
  DenseMap<Value, Attribute> constants;
  for (Operation &op : region.front().without_terminator()) {
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      constants[constant] = constant.getValue();
      continue;
    }
    SmallVector<Attribute> operands = llvm::map_to_vector(
        op.getOperands(), [&](Value v) { return constants.lookup(v); });
    if (operands.empty() || llvm::is_contained(operands, Attribute()))
      continue;
    // A copy: folding may reorder a commutative op's operands in place.
    Operation *copy = op.clone();
    SmallVector<OpFoldResult> folded;
    if (succeeded(copy->fold(operands, folded)) && folded.size() == op.getNumResults())
      for (auto [result, value] : llvm::zip(op.getResults(), folded))
        if (auto attr = dyn_cast<Attribute>(value))
          constants[result] = attr;
    copy->destroy();
    for (Value result : op.getResults()) {
      auto value = dyn_cast_or_null<FloatAttr>(constants.lookup(result));
      if (!value || value.getValue().isFinite())
        continue;
      bool compared = llvm::all_of(result.getUsers(),
                                   [](Operation *user) { return isa<arith::CmpFOp>(user); });
      if (value.getValue().isNaN() || !compared)
        return op.emitOpError()
               << "evaluates to "
               << (value.getValue().isNaN()            ? "NaN"
                   : value.getValue().isNegative()     ? "-infinity"
                                                       : "+infinity")
               << " in the " << regionName
               << " region (its operands are constants); expected a finite number";
    }
  }
  return success();
}

/// verifyConstantExpressions on every region of the module's attn ops.
LogicalResult verifyConstantExpressions(ModuleOp module) {
  bool refused = false;
  auto check = [&](Region &region, StringRef name) {
    refused |= failed(verifyConstantExpressions(region, name));
  };
  for (NormalizerOp normalizer : module.getOps<NormalizerOp>()) {
    check(normalizer.getShared(), "shared");
    check(normalizer.getNumerator(), "numerator");
    check(normalizer.getDenominator(), "denominator");
    check(normalizer.getOffset(), "offset");
  }
  for (ScoreOp score : module.getOps<ScoreOp>()) {
    check(score.getMod(), "mod");
    check(score.getFeature(), "feature");
  }
  for (MaskOp mask : module.getOps<MaskOp>())
    check(mask.getBody(), "mask");
  return failure(refused);
}

struct AttnVerifyPass : impl::AttnVerifyBase<AttnVerifyPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (module.getOps<KernelOp>().empty()) {
      module.emitError("no attn.kernel to compile: add one, e.g. "
                       "'attn.kernel @k normalizer(@softmax)'");
      return signalPassFailure();
    }
    // inline-op-limit marks functions, it refuses nothing: no value of it matters here.
    FunctionSizeLimits limits{/*inlineOps=*/0, maxFunctionOps, maxRegionOps};
    bool refused = false;
    for (KernelOp kernel : module.getOps<KernelOp>())
      refused |= failed(checkKernelSize(kernel, limits));
    if (refused || failed(verifyConstantExpressions(module)))
      signalPassFailure();
  }
};
} // namespace
} // namespace mlir::attn
