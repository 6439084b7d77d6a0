//===- work_sharing.h - items taken by threads as they finish -------------===//
#ifndef ATTN_RUNTIME_WORK_SHARING_H
#define ATTN_RUNTIME_WORK_SHARING_H

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace attn {
namespace detail {

/// Runs item(i) for every i in [0, n) on the calling thread and up to
/// at::get_num_threads() - 1 helper threads, each taking the next item as it finishes
/// one, so uneven items (causal masks, padding) and a thread slowed by a busy core
/// balance. Returns once every item is done, without waiting for a helper that has not
/// started: an OpenMP region (at::parallel_for) ends in a barrier that waits for every
/// thread of the team, so one thread whose core another process held had held up the
/// whole call (2 threads slower than 1). Items run under the caller's ATen thread-local
/// state (grad mode, dispatch keys), as at::launch would run them. Items are the same
/// whichever thread runs them: what a caller sums per item stays deterministic. The
/// first exception an item throws is rethrown once every item is done.
void parallel_items(int64_t n, const std::function<void(int64_t)> &item);

/// How many threads parallel_items and parallel_items_backed_up run n items on: 1 (the
/// caller, no backups) inside a parallel region or with one thread.
int64_t item_threads(int64_t n);

/// item(i, copy) writes item i's result into its copy `copy` (0 or 1) of the output.
using BackedUpItem = std::function<void(int64_t item, int copy)>;

/// Runs every item in [0, n) as parallel_items does, into copy 0, except that the
/// caller, once no item is left to take, does not wait for an item a helper took and
/// has not finished in twice the time an item takes: it runs that item itself into
/// copy 1, and the first copy finished is the result. A helper whose core another
/// process holds (a host contending one vCPU) is descheduled for milliseconds with an
/// item in hand; waiting for it made 2 threads slower than 1 on short calls.
///
/// So a helper may still run an item after the call returned. Items therefore get no
/// thread-local state (they must not call ATen ops: they call kernels on raw
/// descriptors), read only memory their closure keeps alive (its tensors), and write
/// only their own copy's memory, which their closure keeps alive too. Items must not
/// throw. Returns, for each item, the copy that holds its result.
std::vector<int> parallel_items_backed_up(int64_t n, std::shared_ptr<const BackedUpItem> item);

} // namespace detail
} // namespace attn

#endif // ATTN_RUNTIME_WORK_SHARING_H
