//===- work_sharing.cpp - items taken by threads as they finish -----------===//
//
// The helpers are the runtime's own threads, not LibTorch's inter-op pool: a task given
// to at::launch carries a copy of the caller's thread-local state, Python objects
// included (dispatch modes, saved-tensor hooks), and a helper that starts after the
// call returned destroys that copy on its own thread, taking the GIL; during the
// interpreter's shutdown that thread exits inside a destructor and the process aborts
// ("terminate called without an active exception"). Here only the caller owns its
// state: a helper installs it while it runs an item, which the caller is still waiting
// for, and a helper that finds no item left never touches it.
//
//===----------------------------------------------------------------------===//
#include "work_sharing.h"

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace attn {
namespace detail {
namespace {

/// Threads that run posted tasks, created as callers ask for more. Never destroyed:
/// at exit its threads are parked waiting for a task and hold nothing, whereas joining
/// them from a static destructor would race the other libraries' teardown.
class HelperThreads {
public:
  void post(std::function<void()> task, size_t threads_wanted) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (threads_.size() < threads_wanted)
      threads_.emplace_back([this] { serve(); });
    tasks_.push_back(std::move(task));
    wake_.notify_one();
  }

  /// The process's helpers; after a fork the child (whose helpers did not survive it)
  /// gets new ones, leaving the parent's copy, whose mutex a helper may have held, alone.
  static HelperThreads &instance() {
    static const bool fork_handler = [] {
      pthread_atfork(nullptr, nullptr, [] { current_.store(nullptr); });
      return true;
    }();
    (void)fork_handler;
    HelperThreads *helpers = current_.load();
    if (helpers)
      return *helpers;
    auto *fresh = new HelperThreads;
    if (current_.compare_exchange_strong(helpers, fresh))
      return *fresh;
    delete fresh; // another caller made them first (it has no threads yet)
    return *helpers;
  }

private:
  void serve() {
    at::init_num_threads(); // an item's own ATen calls use the caller's thread count
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return !tasks_.empty(); });
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  static std::atomic<HelperThreads *> current_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
};

std::atomic<HelperThreads *> HelperThreads::current_{nullptr};

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

/// CPU seconds this thread has run: unlike the wall clock, time the scheduler gave
/// another task on this thread's core does not count.
double thread_busy_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

/// What the caller shares with its helpers, who may outlive the call: `item` and
/// `caller_state` are read only by a thread that claimed an item, while the caller
/// still waits for that item.
struct Items {
  std::atomic<int64_t> next{0};
  int64_t count = 0;
  const std::function<void(int64_t)> *item = nullptr;
  const at::ThreadLocalState *caller_state = nullptr;
  std::mutex mutex;
  std::condition_variable finished;
  int64_t done = 0;
  double busy_seconds = 0; // the helpers', and the caller's since it woke them
  Clock::time_point last_item_done;
  std::exception_ptr error;
};

/// Adds a thread's `ran` items (and their busy seconds) to what is done.
void report_items(Items &shared, int64_t ran, double busy_seconds, std::exception_ptr error) {
  if (ran == 0)
    return;
  std::lock_guard<std::mutex> lock(shared.mutex);
  shared.done += ran;
  shared.busy_seconds += busy_seconds;
  if (error && !shared.error)
    shared.error = error;
  if (shared.done == shared.count) {
    shared.last_item_done = Clock::now();
    shared.finished.notify_all();
  }
}

void help_with_items(Items &shared) {
  int64_t ran = 0;
  std::exception_ptr error;
  double busy_since = 0;
  {
    std::unique_ptr<at::ThreadLocalStateGuard> state;
    for (int64_t i = shared.next.fetch_add(1, std::memory_order_relaxed); i < shared.count;
         i = shared.next.fetch_add(1, std::memory_order_relaxed), ++ran) {
      if (!state) {
        busy_since = thread_busy_seconds();
        state = std::make_unique<at::ThreadLocalStateGuard>(*shared.caller_state);
      }
      try {
        (*shared.item)(i);
      } catch (...) {
        if (!error)
          error = std::current_exception();
      }
    }
  } // the caller's state leaves this thread before the caller can return
  report_items(shared, ran, ran > 0 ? thread_busy_seconds() - busy_since : 0.0, error);
}

} // namespace

bool ParallelSite::eager_start() {
  int64_t left = backed_off_calls_left_.load(std::memory_order_relaxed);
  while (left > 0)
    if (backed_off_calls_left_.compare_exchange_weak(left, left - 1, std::memory_order_relaxed))
      return false;
  return true;
}

void ParallelSite::record(double busy_seconds, double wall_seconds) {
  if (wall_seconds <= 0 || busy_seconds >= kMinParallelism * wall_seconds) {
    back_off_length_.store(0, std::memory_order_relaxed);
    backed_off_calls_left_.store(0, std::memory_order_relaxed);
    return;
  }
  const int64_t length = std::min<int64_t>(
      kMostBackedOffCalls, std::max<int64_t>(1, 2 * back_off_length_.load(std::memory_order_relaxed)));
  back_off_length_.store(length, std::memory_order_relaxed);
  backed_off_calls_left_.store(length, std::memory_order_relaxed);
}

void parallel_items(int64_t n, const std::function<void(int64_t)> &item, ParallelSite &site) {
  if (n <= 0)
    return;
  const int64_t workers = std::min<int64_t>(at::get_num_threads(), n);
  if (workers <= 1 || at::in_parallel_region()) {
    for (int64_t i = 0; i < n; ++i)
      item(i);
    return;
  }
  const at::ThreadLocalState caller_state;
  auto items = std::make_shared<Items>();
  items->count = n;
  items->item = &item;
  items->caller_state = &caller_state;

  const Clock::time_point start = Clock::now();
  bool woken = false;
  Clock::time_point woken_at;
  double caller_busy_since = 0;
  auto wake_helpers = [&] {
    HelperThreads &helpers = HelperThreads::instance();
    for (int64_t w = 1; w < workers; ++w)
      helpers.post([items] { help_with_items(*items); }, static_cast<size_t>(workers - 1));
    woken = true;
    woken_at = Clock::now();
    caller_busy_since = thread_busy_seconds();
  };
  if (site.eager_start())
    wake_helpers();

  int64_t ran = 0;
  std::exception_ptr error;
  for (int64_t i = items->next.fetch_add(1, std::memory_order_relaxed); i < n;
       i = items->next.fetch_add(1, std::memory_order_relaxed), ++ran) {
    if (!woken && seconds_between(start, Clock::now()) >= ParallelSite::kLateHelpersSeconds)
      wake_helpers();
    try {
      item(i);
    } catch (...) {
      if (!error)
        error = std::current_exception();
    }
  }
  report_items(*items, ran, woken ? thread_busy_seconds() - caller_busy_since : 0.0, error);
  std::unique_lock<std::mutex> lock(items->mutex);
  items->finished.wait(lock, [&] { return items->done == items->count; });
  if (woken)
    site.record(items->busy_seconds, seconds_between(woken_at, items->last_item_done));
  if (items->error)
    std::rethrow_exception(items->error);
}

} // namespace detail
} // namespace attn
