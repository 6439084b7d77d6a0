//===- Manifest.h - the artifact manifest's one writer -------------*- C++ -*-===//
//
// The manifest is the JSON text the artifact returns from attn_manifest(); its one
// schema is runtime/python/attn/manifest.schema.json (docs/artifacts.md). This is
// the compiler's only writer of it (llvm::json); the runtime's C++ reader
// (runtime/manifest.cpp) and the Python reader (runtime/python/attn/manifest.py)
// check it against that schema and read the same golden files (test/manifest/).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_CODEGEN_MANIFEST_H
#define ATTN_LIB_CODEGEN_MANIFEST_H

#include "dialect/AttnOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::attn {

/// The manifest (JSON) of the artifact built from `kernel`: its classification
/// (algorithm), params and weights, the element types of its CPU entry points
/// (its cpu_schedule) and the Triton kernels of its gpu_schedule.
/// The kernel has a cpu_schedule (attn-select-schedule); fails with a diagnostic
/// naming the pass that has not run when the kernel is not classified, or an
/// entry point is missing.
FailureOr<std::string> buildManifest(KernelOp kernel);

/// Adds `text` to `module` as the artifact's attn_manifest() function.
void emitManifest(ModuleOp module, StringRef text);

/// The text emitManifest added to `module` ("" without one).
StringRef manifestText(ModuleOp module);

} // namespace mlir::attn

#endif
