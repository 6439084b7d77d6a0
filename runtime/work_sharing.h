//===- work_sharing.h - items taken by threads as they finish -------------===//
#ifndef ATTN_RUNTIME_WORK_SHARING_H
#define ATTN_RUNTIME_WORK_SHARING_H

#include <atomic>
#include <cstdint>
#include <functional>

namespace attn {
namespace detail {

/// What one call site's recent calls measured: whether the helpers it woke added
/// throughput. A helper whose core is taken (a busy loop, another process) adds none:
/// the scheduler runs it beside the caller on the caller's core, or gives it a share of
/// the taken one, and each call then pays the switches, the wake-ups and the wait for a
/// claimed item without gaining. After such a call the site's next calls start on the
/// caller alone and wake helpers only once the call has run kLateHelpers (a short call
/// then never pays for them, a long one loses at most that much); every call that woke
/// them measures again, and a call whose threads ran side by side restores the eager
/// start. Only who runs the items changes, never the items: results keep their bits.
class ParallelSite {
public:
  /// Helpers are woken at a backed-off call's start once it has run this long.
  static constexpr double kLateHelpersSeconds = 2e-3;
  /// A call whose threads' busy time is below this many times its wall time (from the
  /// helpers' wake-up to the last item) gained less than a quarter of a core.
  static constexpr double kMinParallelism = 1.25;
  /// The longest run of backed-off calls between two eager ones.
  static constexpr int64_t kMostBackedOffCalls = 64;

  /// Whether the next call wakes its helpers at its start (and counts down a back-off).
  bool eager_start();
  /// A call that woke helpers: its threads' busy seconds after the wake-up, against
  /// the wall seconds from the wake-up to its last item.
  void record(double busy_seconds, double wall_seconds);

private:
  // Atomics, not a mutex: a process may fork while another thread records. Concurrent
  // callers of one site may interleave their updates; each is still a valid state.
  std::atomic<int64_t> backed_off_calls_left_{0};
  std::atomic<int64_t> back_off_length_{0};
};

/// Runs item(i) for every i in [0, n) on the calling thread and up to
/// at::get_num_threads() - 1 helper threads, each taking the next item as it finishes
/// one, so uneven items (causal masks, padding) and a thread slowed by a busy core
/// balance. Returns once every item is done, without waiting for a helper that has not
/// started: an OpenMP region (at::parallel_for) ends in a barrier that waits for every
/// thread of the team, so one thread whose core another process held had held up the
/// whole call (2 threads slower than 1). Items run under the caller's ATen thread-local
/// state (grad mode, dispatch keys), as at::launch would run them. Items are the same
/// whichever thread runs them: what a caller sums per item stays deterministic. The
/// first exception an item throws is rethrown once every item is done. `site` decides
/// when the helpers are woken (ParallelSite) and learns from the call.
void parallel_items(int64_t n, const std::function<void(int64_t)> &item, ParallelSite &site);

} // namespace detail
} // namespace attn

#endif // ATTN_RUNTIME_WORK_SHARING_H
