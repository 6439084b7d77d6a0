//===- PassOptions.h - option helpers shared by the attn passes --*- C++ -*-===//
#ifndef ATTN_PASSES_PASSOPTIONS_H
#define ATTN_PASSES_PASSOPTIONS_H

#include "dialect/AttnOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::attn {

/// The attn.kernel of `module` named `name`, or its only kernel when `name` is
/// empty; emits an error (listing the candidates) otherwise.
FailureOr<KernelOp> selectKernel(ModuleOp module, StringRef name);

/// The float types a pass's `element-types` option names (`defaults` when it is
/// empty), each one of `allowed` ("f16", "bf16", "f32", "f64"). Otherwise an
/// error on `module`: "unsupported <what> 'x'; expected a, b or c".
FailureOr<SmallVector<FloatType>> parseElementTypes(ModuleOp module, ArrayRef<std::string> names,
                                                    ArrayRef<StringRef> defaults,
                                                    ArrayRef<StringRef> allowed, StringRef what);

} // namespace mlir::attn

#endif
