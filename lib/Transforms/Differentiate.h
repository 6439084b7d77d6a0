//===- Differentiate.h - symbolic derivatives of scalar functions -*- C++ -*-===//
//
// Forward-mode symbolic differentiation of the scalar arith/math functions that
// attn regions become. The result is ordinary IR, so canonicalisation, CSE and
// inlining clean it up like any other code.
//
// Kinks take a fixed subgradient: max(x, y) follows x only where x > y and
// min(x, y) only where x < y, so max(s, 0) has derivative 0 at s = 0 (as ReLU in
// PyTorch); |x| has derivative 0 at 0; select follows the chosen operand;
// a / (k + e^u) is differentiated as da/y - (a/y)·(1 - k/y)·du, finite even
// where e^u overflows;
// floor/ceil/round and comparisons have derivative 0.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_TRANSFORMS_DIFFERENTIATE_H
#define ATTN_LIB_TRANSFORMS_DIFFERENTIATE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::attn {

/// Creates, next to `function`, a function `name` with the same signature that
/// returns d(result)/d(argument #`wrt`). `function` must be a single block of
/// arith/math ops returning one float. Fails with a diagnostic naming the op it
/// cannot differentiate.
FailureOr<func::FuncOp> buildDerivative(func::FuncOp function, unsigned wrt,
                                        StringRef name);

} // namespace mlir::attn

#endif
