//===- PipelineFuzzer.cpp - fuzz target: the analyses of attn-compile -----===//
//
// LLVMFuzzerTestOneInput takes the input as attn IR, as ParserFuzzer.cpp does, and
// runs what reads a kernel's regions before code generation: attn-expand-shared-regions,
// attn-verify (with its size limits), attn-classify-normalizer and
// attn-derive-backward (symbolic derivatives). Diagnostics are discarded: no input may
// crash, and none may take long, which is what this target is for: an analysis that
// is superlinear in the region (a recursion that revisits shared values of a DAG)
// shows as a timeout on a deep chain. scripts/fuzz.sh runs it under libFuzzer with a
// per-input time limit (-timeout); the replay build (attn-pipeline-fuzz-replay
// --timeout=SECONDS) runs it on fuzz/pipeline-corpus in the test suite.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttnDialect.h"
#include "passes/Passes.h"
#include "tools/ParserGuards.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <string>

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string input(reinterpret_cast<const char *>(data), size);
  if (attn::findExcessiveNesting(input) || attn::findIndexDenseArray(input))
    return 0;

  DialectRegistry registry;
  registry.insert<attn::AttnDialect, arith::ArithDialect, math::MathDialect,
                  func::FuncDialect>();
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &) { return success(); });

  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(input, &context);
  if (!module)
    return 0;
  PassManager pm(&context);
  pm.addPass(attn::createAttnExpandSharedRegions());
  pm.addPass(attn::createAttnVerify());
  pm.addPass(attn::createAttnClassifyNormalizer());
  pm.addPass(attn::createAttnDeriveBackward());
  (void)pm.run(*module); // refused with a diagnostic: fine
  return 0;
}
