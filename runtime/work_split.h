//===- work_split.h - how a call's work is divided into kernel calls -----===//
//
// The public half (forward_rows_per_call, backward_query_splits, key_splits,
// query_split_begin) is declared in attn/runtime.h.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_WORK_SPLIT_H
#define ATTN_RUNTIME_WORK_SPLIT_H

#include "attn/runtime.h"

#include <cstdint>
#include <utility>

namespace attn {
namespace detail {

/// Keys [begin, end) of chunk `split` of `splits` over kv_len keys: boundaries on
/// kKeyBlock multiples, the last chunk ending at kv_len.
std::pair<int64_t, int64_t> key_chunk(int64_t split, int64_t splits, int64_t kv_len);

} // namespace detail
} // namespace attn

#endif // ATTN_RUNTIME_WORK_SPLIT_H
