//===- ParserFuzzer.cpp - fuzz target: parse, verify and print attn IR ----===//
//
// LLVMFuzzerTestOneInput takes the input as attn IR (the attn, arith, math and func
// dialects, as attn-opt reads them) and
//   1. refuses it, like attn-opt, when tools/ParserGuards.h finds what MLIR's parser
//      would crash on (nesting too deep, a dense array of index elements);
//   2. parses and verifies it, diagnostics discarded: no input may crash either;
//   3. for a module that verifies, checks that printing it round-trips: the printed
//      text, and the generic form, parse and verify again and print the same text.
//      Every name and number the verifier accepts must survive printing (the manifest
//      takes names and numbers from the same ops). A difference aborts with both texts.
//
// Built two ways (fuzz/CMakeLists.txt): with libFuzzer (clang, ATTN_LIBFUZZER=ON:
// attn-parser-fuzzer, run by scripts/fuzz.sh) and, in every build, with ReplayMain.cpp
// (attn-parser-fuzz-replay), which runs the target on files: the corpus replay in
// test/Dialect/parser-fuzz-corpus.mlir.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttnDialect.h"
#include "tools/ParserGuards.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace mlir;

namespace {

std::string print(ModuleOp module, bool generic) {
  std::string text;
  llvm::raw_string_ostream os(text);
  OpPrintingFlags flags;
  if (generic)
    flags.printGenericOpForm();
  module.print(os, flags);
  return text;
}

[[noreturn]] void fail(const char *what, const std::string &input, const std::string &first,
                       const std::string &second) {
  llvm::errs() << "attn-parser-fuzzer: " << what << "\n--- input:\n"
               << input << "\n--- printed:\n"
               << first << "\n--- then:\n"
               << second << "\n";
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string input(reinterpret_cast<const char *>(data), size);
  if (attn::findExcessiveNesting(input) || attn::findIndexDenseArray(input))
    return 0;

  DialectRegistry registry;
  registry.insert<attn::AttnDialect, arith::ArithDialect, math::MathDialect,
                  func::FuncDialect>();
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    diagnostics = diagnostic.str();
    return success();
  });

  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(input, &context);
  if (!module)
    return 0; // refused with a diagnostic: fine
  const std::string printed = print(*module, /*generic=*/false);
  for (bool generic : {false, true}) {
    const std::string text = generic ? print(*module, /*generic=*/true) : printed;
    OwningOpRef<ModuleOp> again = parseSourceString<ModuleOp>(text, &context);
    if (!again)
      fail(generic ? "the generic form of a verified module does not parse and verify"
                   : "the printed form of a verified module does not parse and verify",
           input, text, diagnostics);
    const std::string reprinted = print(*again, /*generic=*/false);
    if (reprinted != printed)
      fail(generic ? "the generic form prints differently once parsed"
                   : "printing is not stable: the printed module prints differently",
           input, printed, reprinted);
  }
  return 0;
}
