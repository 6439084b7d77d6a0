//===- work_sharing.h - items taken by threads as they finish -------------===//
#ifndef ATTN_RUNTIME_WORK_SHARING_H
#define ATTN_RUNTIME_WORK_SHARING_H

#include <cstdint>
#include <functional>

namespace attn {
namespace detail {

/// Runs item(i) for every i in [0, n) on the calling thread and up to `threads` - 1
/// helper threads (threads_worth: a call too small for more runs on the caller),
/// each taking the next item as it finishes
/// one, so uneven items (causal masks, padding) and a thread slowed by a busy core
/// balance. Returns once every item is done, without waiting for a helper that has not
/// started: an OpenMP region (at::parallel_for) ends in a barrier that waits for every
/// thread of the team, so one thread whose core another process held had held up the
/// whole call (2 threads slower than 1). The exception: while every thread of ATen's
/// OpenMP team is spinning after a region (a call right after a matrix product), each on
/// a CPU of its own, not the caller's, the team takes the items, in one region: none of
/// its threads has to be woken, and a woken helper would share a CPU with a spinner.
/// Items run under the caller's ATen thread-local state (grad mode, dispatch keys), as
/// at::launch would run them. Items are the same whichever thread runs them: what a
/// caller sums per item stays deterministic. The first exception an item throws is
/// rethrown once every item is done.
void parallel_items(int64_t n, int64_t threads, const std::function<void(int64_t)> &item);

} // namespace detail
} // namespace attn

#endif // ATTN_RUNTIME_WORK_SHARING_H
