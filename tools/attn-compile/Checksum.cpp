//===- Checksum.cpp - the artifact checksum trailer, for attn-compile -----===//
//
// A translation unit of its own: attn/checksum.h declares namespace ::attn, which
// would make attn-compile.cpp's `attn::` (mlir::attn, through `using namespace
// mlir`) ambiguous.
//
//===----------------------------------------------------------------------===//
#include "runtime/include/attn/checksum.h"

std::string artifactChecksumTrailer(const char *content, size_t size) {
  return attn::checksum::trailer(content, size);
}
