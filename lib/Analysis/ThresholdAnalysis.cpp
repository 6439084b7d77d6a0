//===- ThresholdAnalysis.cpp - checks of an implicit normalizer's g -------===//
#include "lib/Analysis/ThresholdAnalysis.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::attn;

/// g(x) at params' initial values and indices 0, by folding the numerator's ops
/// one by one; none where an op does not fold to a constant.
static std::optional<double> foldNumerator(NormalizerOp normalizer, double x) {
  Block &block = normalizer.getNumerator().front();
  Builder builder(normalizer.getContext());
  llvm::DenseMap<Value, Attribute> values;
  auto floatType = cast<FloatType>(block.getArgument(0).getType());
  values[block.getArgument(0)] = builder.getFloatAttr(floatType, x);
  const unsigned indices = 4;
  for (unsigned k = 1; k <= indices; ++k)
    values[block.getArgument(k)] = builder.getIndexAttr(0);
  for (auto [k, init] : llvm::enumerate(normalizer.getParamInits()))
    values[block.getArgument(1 + indices + k)] = builder.getFloatAttr(floatType, init);
  for (Operation &op : block.without_terminator()) {
    SmallVector<Attribute> operands;
    for (Value operand : op.getOperands()) {
      Attribute value = values.lookup(operand);
      if (!value)
        return std::nullopt;
      operands.push_back(value);
    }
    SmallVector<OpFoldResult> results;
    if (failed(op.fold(operands, results)) || results.size() != op.getNumResults())
      return std::nullopt;
    for (auto [result, folded] : llvm::zip(op.getResults(), results)) {
      Attribute value = isa<Attribute>(folded) ? cast<Attribute>(folded)
                                               : values.lookup(cast<Value>(folded));
      if (!value)
        return std::nullopt;
      values[result] = value;
    }
  }
  auto result = dyn_cast_or_null<FloatAttr>(values.lookup(block.getTerminator()->getOperand(0)));
  if (!result)
    return std::nullopt;
  return result.getValueAsDouble();
}

LogicalResult mlir::attn::verifyThresholdNumerator(NormalizerOp normalizer) {
  Operation *yield = normalizer.getNumerator().front().getTerminator();
  const double c = normalizer.getDenominatorConstant()->convertToDouble();
  auto describe = [](double x) { return llvm::formatv("{0}", llvm::format("%g", x)).str(); };
  for (double x : {0.0, -1e-6, -1e-3, -1.0, -1e3}) {
    std::optional<double> g = foldNumerator(normalizer, x);
    if (!g)
      return success(); // not foldable: taken as written
    if (*g != 0.0)
      return yield->emitOpError()
             << "yields g(" << describe(x) << ") = " << describe(*g) << " in the numerator of @"
             << normalizer.getSymName()
             << ", an implicit normalizer: g must be 0 for x <= 0 (w_ij = g(s_ij - τ_i) "
                "gives the keys below the threshold no weight)";
  }
  // Samples 2^-20 .. 2^60 (and 0): g non-decreasing, reaching c.
  double previousX = 0.0, previous = 0.0;
  bool reached = false;
  for (int exponent = -20; exponent <= 60; ++exponent) {
    double x = std::ldexp(1.0, exponent);
    std::optional<double> g = foldNumerator(normalizer, x);
    if (!g)
      return success();
    if (!(*g >= previous))
      return yield->emitOpError()
             << "yields g(" << describe(x) << ") = " << describe(*g) << " < g("
             << describe(previousX) << ") = " << describe(previous)
             << " in the numerator of @" << normalizer.getSymName()
             << ", an implicit normalizer: g must be non-decreasing, so that Σ_j g(s_ij - τ) "
                "has one root τ";
    reached |= *g >= c;
    previousX = x;
    previous = *g;
  }
  if (!reached)
    return yield->emitOpError()
           << "yields at most " << describe(previous) << " for x up to 2^60 in the numerator of @"
           << normalizer.getSymName() << ", an implicit normalizer whose weights sum to c = "
           << describe(c) << ": g must reach c, else Σ_j g(s_ij - τ_i) = c has no root";
  return success();
}
