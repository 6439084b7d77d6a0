//===- NestingLimit.h - refuse input nested deeper than the parser can go -*- C++ -*-===//
//
// MLIR's parser recurses once per nested bracket of its input (attributes, types,
// regions, locations), so text nested a few thousand levels deep overflows the
// stack: a crash instead of a diagnostic. attn-compile, attn-opt and the parser
// fuzzer (fuzz/ParserFuzzer.cpp) check the nesting first and refuse input deeper than
// kMaxNestingDepth, far deeper than any IR they are meant for (attn IR nests a
// handful of levels).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TOOLS_NESTINGLIMIT_H
#define ATTN_TOOLS_NESTINGLIMIT_H

#include "mlir/Support/LogicalResult.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

namespace mlir::attn {

/// The deepest bracket nesting accepted (MLIR 22 overflows an 8 MiB stack at
/// about 5000 nested arrays).
constexpr unsigned kMaxNestingDepth = 512;

/// The first bracket of `text` nested deeper than `limit` levels, or nullptr.
/// Counts (, [, { and < as openers and their partners as closers, outside string
/// literals and // comments; the '>' of "->" and ">=" closes nothing.
inline const char *findExcessiveNesting(llvm::StringRef text,
                                        unsigned limit = kMaxNestingDepth) {
  unsigned depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
    } else if (text.substr(i).starts_with("//")) {
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        break;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > limit)
        return text.data() + i;
    } else if (c == ')' || c == ']' || c == '}' ||
               (c == '>' && (i == 0 || text[i - 1] != '-') &&
                (i + 1 == text.size() || text[i + 1] != '='))) {
      if (depth)
        --depth;
    }
  }
  return nullptr;
}

/// Reports input of `buffer` nested deeper than kMaxNestingDepth as an error at the
/// offending bracket (file:line:col, as the parser's own diagnostics).
inline LogicalResult checkNestingDepth(const llvm::MemoryBuffer &buffer) {
  const char *at = findExcessiveNesting(buffer.getBuffer());
  if (!at)
    return success();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(buffer.getMemBufferRef(),
                                                                /*RequiresNullTerminator=*/false),
                               llvm::SMLoc());
  sourceMgr.PrintMessage(llvm::SMLoc::getFromPointer(at), llvm::SourceMgr::DK_Error,
                         "input nests brackets more than " + llvm::Twine(kMaxNestingDepth) +
                             " levels deep here; expected at most " +
                             llvm::Twine(kMaxNestingDepth) +
                             " (MLIR's parser recurses once per level)");
  return failure();
}

} // namespace mlir::attn

#endif // ATTN_TOOLS_NESTINGLIMIT_H
