//===- ReadableMath.h - scalar functions as formulas ---------------*- C++ -*-===//
//
// Prints a kernel's outlined scalar functions (attn-derive-backward's func.func) as
// infix formulas a researcher reads: exp(s - m)·(1 - tanh(s)^2), max(s, 0), |s|,
// bias[h, j]. Values used more than once are bound to t0, t1, ... first.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_ANALYSIS_READABLEMATH_H
#define ATTN_LIB_ANALYSIS_READABLEMATH_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace mlir::attn {

/// A function as one formula over its arguments and the shared subterms t0, t1, ...
struct Formula {
  std::string result;
  SmallVector<std::pair<std::string, std::string>> bindings; // (t<k>, its formula)
};

/// `function` as a Formula. Its arguments are named in order: the floats first by
/// `leadingFloats` (e.g. {"s", "m"}), the `index` arguments b, h, i, j (or the
/// first of those there are), the remaining floats by `params`, and memref
/// arguments (tensor inputs) by `tables`.
Formula readableFormula(func::FuncOp function, ArrayRef<StringRef> leadingFloats,
                        ArrayRef<StringRef> params, ArrayRef<StringRef> tables);

} // namespace mlir::attn

#endif
