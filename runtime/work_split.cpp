//===- work_split.cpp - how a call's work is divided into kernel calls ---===//
//
// The split policy: how many query rows a forward call takes, and into how many
// query splits or key chunks a (batch, head) slice is divided so that every thread
// gets several calls, pure functions of the sizes and the thread count; and how many
// threads a call is worth (its estimated one-thread time against the process-wide
// min_thread_work_nanos, the one setting kept here).
//
//===----------------------------------------------------------------------===//
#include "work_split.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <initializer_list>

namespace attn {

namespace {
std::atomic<double> min_thread_work{detail::kMinNanosPerThread};
} // namespace

double min_thread_work_nanos() { return min_thread_work.load(std::memory_order_relaxed); }

double set_min_thread_work_nanos(double nanos) {
  TORCH_CHECK(std::isfinite(nanos) && nanos >= 0,
              "attn::set_min_thread_work_nanos: expected a finite number of nanoseconds >= 0, "
              "got ",
              nanos);
  return min_thread_work.exchange(nanos, std::memory_order_relaxed);
}

int64_t forward_rows_per_call(int64_t heads, int64_t queries, int64_t threads) {
  const int64_t items_per_head = std::max<int64_t>(
      1, (kItemsPerThread * threads + heads - 1) / std::max<int64_t>(heads, 1));
  const int64_t blocks = (queries + items_per_head * kQueryBlock - 1) / (items_per_head * kQueryBlock);
  return std::max<int64_t>(1, blocks) * kQueryBlock;
}

namespace {
/// Splits per item for `items` items on `threads` threads, at most `most`: 1 when
/// there are kItemsPerThread items per thread already, else enough for that many.
/// Threads take the calls as they finish, so a thread on a busy core (or with the
/// costlier rows of a mask) takes fewer: halves, one per thread, had waited for it.
int64_t balanced_splits(int64_t items, int64_t most, int64_t threads) {
  if (items <= 0 || threads <= 1 || items >= kItemsPerThread * threads)
    return 1;
  return std::max<int64_t>(1, std::min((kItemsPerThread * threads + items - 1) / items, most));
}
} // namespace

int64_t backward_query_splits(int64_t heads, int64_t queries, int64_t threads) {
  return balanced_splits(heads, queries / kQueryBlock, threads);
}

int64_t key_splits(int64_t items, int64_t keys, int64_t threads) {
  return balanced_splits(items, keys / kKeyBlock, threads);
}

int64_t query_split_begin(int64_t split, int64_t splits, int64_t queries, int64_t kv_len,
                          bool causal) {
  if (split <= 0)
    return 0;
  if (split >= splits)
    return queries;
  // Keys row i visits: kv_len, or min(i + 1, kv_len) when causal. Rows [0, r) cost
  // work(r); the split starts at the first r with work(r) >= split/splits of the whole.
  auto work = [&](int64_t r) -> double {
    if (!causal)
      return static_cast<double>(r) * static_cast<double>(kv_len);
    const double ramp = static_cast<double>(std::min(r, kv_len));
    return ramp * (ramp + 1) / 2 + static_cast<double>(r - std::min(r, kv_len)) * kv_len;
  };
  if (kv_len <= 0)
    return split * queries / splits;
  const double target = work(queries) * static_cast<double>(split) / static_cast<double>(splits);
  int64_t lo = 0, hi = queries;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (work(mid) >= target)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

namespace detail {

namespace {
/// (query, key) pairs a call visits: all of them, or under a causal mask those of
/// queries aligned to the last keys (a decoder step; with Nq > Nk this also counts the
/// pairs of a top-left alignment), an upper bound of both alignments.
double visited_pairs(const CallSize &size) {
  const double queries = static_cast<double>(size.queries), keys = static_cast<double>(size.keys);
  if (!size.causal)
    return queries * keys;
  const double diagonal = std::min(queries, keys);
  return queries * keys - diagonal * (diagonal - 1) / 2;
}

double multiply_add_nanos(const CallSize &size, double per_pair) {
  return static_cast<double>(size.heads) * visited_pairs(size) * per_pair * kNanosPerMultiplyAdd *
         size.multiply_add_cost;
}

/// The product of sizes, in double: a huge call must not overflow into a small one.
double product(std::initializer_list<int64_t> sizes) {
  double total = 1;
  for (int64_t size : sizes)
    total *= static_cast<double>(size);
  return total;
}

double key_value_nanos(const CallSize &size) {
  const int64_t blocks = (size.queries + kQueryBlock - 1) / kQueryBlock;
  return product({size.heads, blocks, size.keys, size.d + size.dv, size.element_bytes}) *
         kNanosPerByte;
}
} // namespace

double pair_cost(const std::vector<CpuPairCost> &costs, const std::string &dtype, int64_t d,
                 int64_t dv, int64_t element_bytes, bool backward) {
  const CpuPairCost *generic = nullptr;
  for (const CpuPairCost &cost : costs) {
    if (cost.dtype != dtype)
      continue;
    if (cost.head_dim != 0 && cost.head_dim == dv && cost.d == d)
      return backward ? cost.backward : cost.forward;
    if (cost.head_dim == 0)
      generic = &cost;
  }
  if (generic)
    return backward ? generic->backward : generic->forward;
  return static_cast<double>(element_bytes) / 4;
}

double forward_nanos(const CallSize &size) {
  return multiply_add_nanos(size, static_cast<double>(size.d + size.dv)) + key_value_nanos(size);
}

double backward_nanos(const CallSize &size) {
  // s = q·k and dP = dO·v again, then dv += P·dO, dq += dS·k, dk += dS·q.
  return multiply_add_nanos(size, static_cast<double>(3 * size.d + 2 * size.dv)) +
         key_value_nanos(size);
}

double merge_nanos(const CallSize &size, int64_t splits) {
  return product({size.heads, size.queries, splits, size.dv + 3, size.element_bytes}) *
         kNanosPerByte;
}

int64_t threads_worth(double one_thread_nanos, int64_t threads, double min_nanos_per_thread) {
  const double worth = min_nanos_per_thread > 0
                           ? std::floor(one_thread_nanos / min_nanos_per_thread)
                           : static_cast<double>(threads);
  return std::max<int64_t>(1, worth < static_cast<double>(threads) ? static_cast<int64_t>(worth)
                                                                   : threads);
}

ForwardSplit forward_split(SliceSplit split, int64_t heads, int64_t queries, int64_t keys,
                           int64_t threads) {
  // A Whole call builds the key state Σ φ(k) vᵀ (O(Nk·d·dv)) before its rows: one call
  // per slice keeps the whole forward linear in N.
  if (split == SliceSplit::Whole)
    return {std::max<int64_t>(queries, 1), 1};
  ForwardSplit plan;
  plan.rows_per_call = forward_rows_per_call(heads, queries, threads);
  const int64_t query_blocks = (queries + plan.rows_per_call - 1) / plan.rows_per_call;
  // Few calls for the threads (one long decoder step, Nq = 1): each call's keys in
  // chunks, whose states the artifact's merge entry folds (abi.h).
  if (split == SliceSplit::KeyChunks)
    plan.key_chunks = key_splits(heads * query_blocks, keys, threads);
  return plan;
}

BackwardSplit backward_split(SliceSplit split, int64_t heads, int64_t queries, int64_t keys,
                             int64_t threads) {
  if (split == SliceSplit::Whole)
    return {1, 1};
  BackwardSplit plan;
  plan.query_splits = backward_query_splits(heads, queries, threads);
  if (plan.query_splits == 1 && split == SliceSplit::KeyChunks)
    plan.key_chunks = key_splits(heads, keys, threads);
  return plan;
}

int64_t backward_call_sets(int64_t calls, int64_t threads) {
  return std::max<int64_t>(1, std::min<int64_t>(kItemsPerThread * threads, calls));
}

int64_t call_in_set(int64_t set, int64_t sets, int64_t round) {
  return round * sets + (round % 2 == 0 ? set : sets - 1 - set);
}

std::pair<int64_t, int64_t> key_chunk(int64_t split, int64_t splits, int64_t kv_len) {
  const int64_t blocks = (kv_len + kKeyBlock - 1) / kKeyBlock;
  return {std::min(kv_len, split * blocks / splits * kKeyBlock),
          std::min(kv_len, (split + 1) * blocks / splits * kKeyBlock)};
}

} // namespace detail
} // namespace attn
