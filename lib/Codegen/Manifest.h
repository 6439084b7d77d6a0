//===- Manifest.h - the artifact manifest's one writer -------------*- C++ -*-===//
//
// The manifest (format: runtime/include/attn/abi.h) is text the artifact returns
// from attn_manifest(). This is the compiler's only writer of it; the runtime's
// C++ reader (runtime/library.cpp) and the Python reader
// (runtime/python/attn/__init__.py) are checked against the same golden files
// (test/manifest/).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_CODEGEN_MANIFEST_H
#define ATTN_LIB_CODEGEN_MANIFEST_H

#include "dialect/AttnOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::attn {

/// The manifest text of the artifact built from `kernel`: its classification
/// (algorithm), params and weights, the element types of its CPU entry points
/// (its cpu_schedule) and the module's CUDA kernels (gpu.module @attn_cuda).
/// The kernel has a cpu_schedule (attn-select-schedule); fails with a diagnostic
/// naming the pass that has not run when the kernel is not classified, or an
/// entry point or the gpu.module is missing.
FailureOr<std::string> buildManifest(KernelOp kernel);

/// Records on `module` that its GPU kernels are the Triton backend's (attn-compile
/// --gpu-backend=triton): buildManifest then lists device cuda, the targets, the line
/// `gpu-backend triton` and one `triton-kernel <dtype> <head dim>` line per pair (the
/// artifact's attn_triton_launch describes the cubins themselves).
void recordTritonKernels(ModuleOp module, ArrayRef<std::string> targets,
                         ArrayRef<std::string> dtypes, ArrayRef<int64_t> headDims);

/// Adds `text` to `module` as the artifact's attn_manifest() function.
void emitManifest(ModuleOp module, StringRef text);

/// The text emitManifest added to `module` ("" without one).
StringRef manifestText(ModuleOp module);

} // namespace mlir::attn

#endif
