//===- work_split.h - how a call's work is divided into kernel calls -----===//
//
// The public half (forward_rows_per_call, backward_query_splits, key_splits,
// query_split_begin, min_thread_work_nanos and its setter) is declared in
// attn/runtime.h.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_WORK_SPLIT_H
#define ATTN_RUNTIME_WORK_SPLIT_H

#include "attn/runtime.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attn {
namespace detail {

/// The sizes of a call that its cost estimate reads: `heads` = B·H slices of `queries`
/// rows against `keys` keys, head dims d and dv, elements of `element_bytes`, and what
/// a multiply-add costs in the schedule that runs it (pair_cost).
struct CallSize {
  int64_t heads = 0, queries = 0, keys = 0, d = 0, dv = 0, element_bytes = 4;
  bool causal = false;
  double multiply_add_cost = 1;
};

/// What a multiply-add of a call on `dtype` ("f32", "f64") with head dims d and dv costs
/// relative to kNanosPerMultiplyAdd, by the manifest's cpu_cost (`costs`): the entry of
/// the tiled schedule the call takes (dv = its head_dim, d = its d), else the dtype's
/// entry without a head dim; without entries for the dtype, element_bytes / 4 (the
/// tiled loops on 16 lanes).
double pair_cost(const std::vector<CpuPairCost> &costs, const std::string &dtype, int64_t d,
                 int64_t dv, int64_t element_bytes, bool backward);

/// Estimated time of a call's work on one thread, in nanoseconds: its multiply-adds at
/// kNanosPerMultiplyAdd × multiply_add_cost plus the bytes of K and V it reads at
/// kNanosPerByte (once per kQueryBlock query rows). Coarse by design: it only tells a
/// call worth threads from one that is not (threads_worth).
double forward_nanos(const CallSize &size);
double backward_nanos(const CallSize &size);
/// The merge of `splits` partial states per row (split-K, context parallelism).
double merge_nanos(const CallSize &size, int64_t splits);

/// One thread's rates behind the estimates, measured on a 2-vCPU Xeon (KVM): the
/// tiled f32 forward ran 8 heads × 64 rows × 256 keys × (64 + 64) dims (16.8M
/// multiply-adds) in 330 µs; a decoder step read 4 MiB of K and V from the last-level
/// cache in 170 µs.
constexpr double kNanosPerMultiplyAdd = 0.02;
constexpr double kNanosPerByte = 0.04;

/// The default of min_thread_work_nanos(): on that machine, posting to a sleeping
/// helper took the caller 26 µs (a futex wake is an interrupt to an idle vCPU) and the
/// helper's first item began 49 µs after the post, so a decoder step over 8 heads × 512
/// keys (50 µs on one thread) took 80 µs on two. About twice the helper's late start.
constexpr double kMinNanosPerThread = 100'000;

/// Threads to run a call estimated at `one_thread_nanos` on, of `threads`: each gets
/// `min_nanos_per_thread` at least, and never fewer than one.
int64_t threads_worth(double one_thread_nanos, int64_t threads, double min_nanos_per_thread);

/// A forward's calls per (batch, head) slice: query rows per call, and key chunks per
/// call (1: no split-K).
struct ForwardSplit {
  int64_t rows_per_call = 1;
  int64_t key_chunks = 1;
};

/// The forward's split for `heads` = B·H slices of `queries` rows over `keys` keys on
/// `threads` threads, as the manifest's splits.forward (`split`) allows: one call per
/// slice (Whole), forward_rows_per_call rows per call (Rows), and key_splits chunks per
/// call (KeyChunks).
ForwardSplit forward_split(SliceSplit split, int64_t heads, int64_t queries, int64_t keys,
                           int64_t threads);

/// A backward's calls per (batch, head) slice: query splits (each its own dk, dv
/// buffer) and key chunks per split (each its own dq buffer); one of them is 1.
struct BackwardSplit {
  int64_t query_splits = 1;
  int64_t key_chunks = 1;
};

/// The backward's split, as splits.backward (`split`) allows: one call per slice
/// (Whole), else backward_query_splits where the queries allow it, else key_splits
/// chunks (a decoder step) where they are KeyChunks.
BackwardSplit backward_split(SliceSplit split, int64_t heads, int64_t queries, int64_t keys,
                             int64_t threads);

/// How many fixed sets the backward's `calls` run in on `threads` threads: kItemsPerThread
/// per thread, at most one per call. Threads take the sets as they finish, so a thread
/// on a busy core takes fewer.
int64_t backward_call_sets(int64_t calls, int64_t threads);

/// The call that set `set` of `sets` runs in round `round` (each set runs its calls in
/// round order; a result >= the number of calls is none): in rounds of `sets` calls,
/// set s takes the s-th call of even rounds and the s-th from the end of odd ones, so
/// a ramp of work over the calls (a causal mask) evens out across sets.
int64_t call_in_set(int64_t set, int64_t sets, int64_t round);

/// Keys [begin, end) of chunk `split` of `splits` over kv_len keys: boundaries on
/// kKeyBlock multiples, the last chunk ending at kv_len.
std::pair<int64_t, int64_t> key_chunk(int64_t split, int64_t splits, int64_t kv_len);

} // namespace detail
} // namespace attn

#endif // ATTN_RUNTIME_WORK_SPLIT_H
