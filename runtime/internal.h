//===- internal.h - runtime internals shared between translation units ----===//
#ifndef ATTN_RUNTIME_INTERNAL_H
#define ATTN_RUNTIME_INTERNAL_H

#include "attn/runtime.h"

namespace attn {
namespace detail {
/// The cached Library for a canonical path that load() already returned (no file
/// re-validation: used by autograd backward for the library its forward used).
std::shared_ptr<const Library> loaded_library(const std::string &canonical_path);
} // namespace detail
} // namespace attn

#endif
