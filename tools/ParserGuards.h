//===- ParserGuards.h - refuse input MLIR's parser would crash on -*- C++ -*-===//
//
// Two kinds of text crash MLIR 22's parser instead of getting a diagnostic, so
// attn-compile, attn-opt and the parser fuzzer (fuzz/ParserFuzzer.cpp) look for them
// first and refuse them with an error at the offending text:
//  - nesting: the parser recurses once per nested bracket (attributes, types,
//    regions, locations), so text nested a few thousand levels deep overflows the
//    stack. Input deeper than kMaxNestingDepth, far deeper than any IR they are meant
//    for (attn IR nests a handful of levels), is refused;
//  - a dense array of `index` elements (`array<index: 1>`): the parser accepts the
//    element type and then reads it as a float type's width (a null dereference; the
//    parser fuzzer found it). Other element types it rejects itself.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TOOLS_PARSERGUARDS_H
#define ATTN_TOOLS_PARSERGUARDS_H

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <string>

namespace mlir::attn {

/// The deepest bracket nesting accepted (MLIR 22 overflows an 8 MiB stack at
/// about 5000 nested arrays).
constexpr unsigned kMaxNestingDepth = 512;

/// Calls `visit(i)` for each position i of `text` outside string literals and //
/// comments; stops at the first visit that returns true and returns its position,
/// else nullptr.
template <typename Visit>
const char *scanCode(llvm::StringRef text, Visit visit) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
    } else if (text.substr(i).starts_with("//")) {
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        break;
    } else if (visit(i)) {
      return text.data() + i;
    }
  }
  return nullptr;
}

/// The first bracket of `text` nested deeper than `limit` levels, or nullptr.
/// Counts (, [, { and < as openers and their partners as closers, outside string
/// literals and // comments; the '>' of "->" and ">=" closes nothing.
inline const char *findExcessiveNesting(llvm::StringRef text,
                                        unsigned limit = kMaxNestingDepth) {
  unsigned depth = 0;
  return scanCode(text, [&](size_t i) {
    char c = text[i];
    if (c == '(' || c == '[' || c == '{' || c == '<')
      return ++depth > limit;
    if ((c == ')' || c == ']' || c == '}' ||
         (c == '>' && (i == 0 || text[i - 1] != '-') &&
          (i + 1 == text.size() || text[i + 1] != '='))) &&
        depth)
      --depth;
    return false;
  });
}

/// The first `array<index` (a dense array of index elements; white space and //
/// comments allowed around '<', as the parser allows them) outside string literals
/// and // comments, or nullptr.
inline const char *findIndexDenseArray(llvm::StringRef text) {
  auto identifierChar = [](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '.' || c == '$';
  };
  // MLIR's lexer skips NUL bytes inside the buffer as it skips white space.
  static constexpr char kSkipped[] = " \t\n\v\f\r";
  const llvm::StringRef skipped(kSkipped, sizeof kSkipped); // and the terminating NUL
  auto skipTrivia = [skipped](llvm::StringRef rest) {
    for (rest = rest.ltrim(skipped); rest.starts_with("//"); rest = rest.ltrim(skipped))
      rest = rest.drop_until([](char c) { return c == '\n'; });
    return rest;
  };
  return scanCode(text, [&](size_t i) {
    if (!text.substr(i).starts_with("array") || (i > 0 && identifierChar(text[i - 1])))
      return false;
    llvm::StringRef rest = skipTrivia(text.substr(i + 5));
    if (!rest.consume_front("<"))
      return false;
    rest = skipTrivia(rest);
    return rest.starts_with("index") && (rest.size() == 5 || !identifierChar(rest[5]));
  });
}

/// Reports what of `buffer` MLIR's parser would crash on (findExcessiveNesting,
/// findIndexDenseArray) as an error at that text (file:line:col, as the parser's own
/// diagnostics).
inline LogicalResult checkParserInput(const llvm::MemoryBuffer &buffer) {
  llvm::StringRef text = buffer.getBuffer();
  const char *at = findExcessiveNesting(text);
  std::string message;
  if (at) {
    message = "input nests brackets more than " + std::to_string(kMaxNestingDepth) +
              " levels deep here; expected at most " + std::to_string(kMaxNestingDepth) +
              " (MLIR's parser recurses once per level)";
  } else if ((at = findIndexDenseArray(text))) {
    message = "a dense array of index elements (array<index ...>), on which MLIR's parser "
              "crashes; expected an integer (e.g. array<i64: ...>) or float element type";
  } else {
    return success();
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(buffer.getMemBufferRef(),
                                                                /*RequiresNullTerminator=*/false),
                               llvm::SMLoc());
  sourceMgr.PrintMessage(llvm::SMLoc::getFromPointer(at), llvm::SourceMgr::DK_Error, message);
  return failure();
}

} // namespace mlir::attn

#endif // ATTN_TOOLS_PARSERGUARDS_H
