//===- PassOptions.h - option helpers shared by the attn passes --*- C++ -*-===//
#ifndef ATTN_PASSES_PASSOPTIONS_H
#define ATTN_PASSES_PASSOPTIONS_H

#include "dialect/AttnOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::attn {

/// The attn.kernel of `module` named `name`, or its only kernel when `name` is
/// empty; otherwise an error: no such kernel, or several kernels (listing them).
FailureOr<KernelOp> selectKernel(ModuleOp module, StringRef name);

/// What a schedule-selection pass works on: the classified kernel its `kernel`
/// option names and the element types its `element-types` option names.
struct ScheduleRequest {
  KernelOp kernel;
  Algorithm algorithm;
  SmallVector<FloatType> types;
};

/// The kernel of `module` named `kernelName` (its only kernel when empty) and the
/// float types `elementTypes` names (`defaults` when empty), each one of `allowed`
/// ("f16", "bf16", "f32", "f64"). Otherwise a diagnostic: no such kernel, several
/// kernels (listing them), "unsupported <what> 'x'; expected a, b or c", or a
/// kernel attn-classify-normalizer has not classified.
FailureOr<ScheduleRequest> scheduleRequest(ModuleOp module, StringRef kernelName,
                                           ArrayRef<std::string> elementTypes,
                                           ArrayRef<StringRef> defaults,
                                           ArrayRef<StringRef> allowed, StringRef what);

} // namespace mlir::attn

#endif
