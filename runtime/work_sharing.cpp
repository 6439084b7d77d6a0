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
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
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
  std::exception_ptr error;
};

void take_items(Items &shared, bool on_caller) {
  int64_t ran = 0;
  std::exception_ptr error;
  {
    std::unique_ptr<at::ThreadLocalStateGuard> state;
    for (int64_t i = shared.next.fetch_add(1, std::memory_order_relaxed); i < shared.count;
         i = shared.next.fetch_add(1, std::memory_order_relaxed), ++ran) {
      if (!on_caller && !state)
        state = std::make_unique<at::ThreadLocalStateGuard>(*shared.caller_state);
      try {
        (*shared.item)(i);
      } catch (...) {
        if (!error)
          error = std::current_exception();
      }
    }
  } // the caller's state leaves this thread before the caller can return
  if (ran == 0)
    return;
  std::lock_guard<std::mutex> lock(shared.mutex);
  shared.done += ran;
  if (error && !shared.error)
    shared.error = error;
  if (shared.done == shared.count)
    shared.finished.notify_all();
}

using Clock = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

/// What the caller shares with helpers that may finish their item after it returned:
/// everything an item touches is owned here or by `item`'s closure.
struct BackedUpItems {
  static constexpr int kNotDone = 0; // then 1 + the copy that finished first
  BackedUpItems(int64_t n, std::shared_ptr<const BackedUpItem> item)
      : count(n), item(std::move(item)), finished(new std::atomic<int>[n]),
        taken_at(new std::atomic<int64_t>[n]) {
    for (int64_t i = 0; i < n; ++i) {
      finished[i].store(kNotDone, std::memory_order_relaxed);
      taken_at[i].store(0, std::memory_order_relaxed);
    }
  }

  /// Runs item i into `copy`; records it as item i's result if no copy finished before,
  /// and a copy-0 run's time (a backup run is no sample of how long an item takes).
  void run(int64_t i, int copy) {
    const int64_t start = now_ns();
    (*item)(i, copy);
    const int64_t took = now_ns() - start;
    int expected = kNotDone;
    if (!finished[i].compare_exchange_strong(expected, 1 + copy))
      return;
    if (copy == 0) {
      std::lock_guard<std::mutex> lock(mutex);
      item_ns += took;
      ++items_timed;
    }
  }

  /// Takes items in order until none is left (copy 0); a helper (not `on_caller`)
  /// first sleeps ATTN_TEST_HELPER_DELAY_MS after taking each, for tests that need the
  /// caller to find every helper's item overdue.
  void take(bool on_caller) {
    static const int64_t test_delay_ms = [] {
      const char *text = std::getenv("ATTN_TEST_HELPER_DELAY_MS");
      return text ? std::max<int64_t>(0, std::atoll(text)) : 0;
    }();
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < count;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      taken_at[i].store(now_ns(), std::memory_order_relaxed);
      if (!on_caller && test_delay_ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(test_delay_ms));
      run(i, 0);
    }
  }

  const int64_t count;
  const std::shared_ptr<const BackedUpItem> item;
  std::atomic<int64_t> next{0};
  std::unique_ptr<std::atomic<int>[]> finished;
  std::unique_ptr<std::atomic<int64_t>[]> taken_at; // 0: not yet stamped by its taker
  std::mutex mutex;
  int64_t item_ns = 0, items_timed = 0; // under `mutex`
};

/// Where helpers leave their references to backed-up items' shared state, for a caller
/// to drop. That state owns tensors a Python object may own too (q, k, v, the outputs
/// returned to the caller); whoever drops the last reference destroys them, and with
/// them may take the GIL to release their Python objects. A helper doing that during
/// the interpreter's shutdown exits inside a destructor and the process aborts
/// ("terminate called without an active exception"), so the last reference is always
/// dropped on a caller's thread, by the next backed-up call; what is left at exit is
/// left alone. Never destroyed, as HelperThreads.
class Graveyard {
public:
  void bury(std::shared_ptr<const void> state) {
    std::lock_guard<std::mutex> lock(mutex_);
    buried_.push_back(std::move(state));
  }
  /// Drops the buried references on the calling thread (a helper still running an
  /// item keeps its own, and buries it again when done).
  void clear() {
    std::vector<std::shared_ptr<const void>> dropped;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      dropped.swap(buried_);
    }
  }
  static Graveyard &instance() {
    static auto *graveyard = new Graveyard;
    return *graveyard;
  }

private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<const void>> buried_;
};

} // namespace

int64_t item_threads(int64_t n) {
  return at::in_parallel_region() ? 1 : std::min<int64_t>(at::get_num_threads(), n);
}

std::vector<int> parallel_items_backed_up(int64_t n, std::shared_ptr<const BackedUpItem> item) {
  std::vector<int> copies(static_cast<size_t>(std::max<int64_t>(n, 0)), 0);
  if (n <= 0)
    return copies;
  const int64_t workers = item_threads(n);
  if (workers <= 1) {
    for (int64_t i = 0; i < n; ++i)
      (*item)(i, 0);
    return copies;
  }
  Graveyard &graveyard = Graveyard::instance();
  graveyard.clear();
  auto items = std::make_shared<BackedUpItems>(n, std::move(item));
  HelperThreads &helpers = HelperThreads::instance();
  for (int64_t w = 1; w < workers; ++w)
    helpers.post(
        [items, &graveyard]() mutable {
          items->take(/*on_caller=*/false);
          graveyard.bury(std::move(items));
        },
        static_cast<size_t>(workers - 1));
  items->take(/*on_caller=*/true);
  // Every item is taken; wait for those still running on helpers, each until it is
  // overdue: twice the mean time of the items finished so far after it was taken
  // (stamped when the caller first saw it, if its taker had not stamped it yet). The
  // caller polls rather than sleeps: its core has nothing else of this call to do, and
  // a sleeping caller on a loaded machine is woken late (tens of milliseconds).
  for (int64_t i = 0; i < n; ++i) {
    const int64_t first_seen = now_ns();
    while (items->finished[i].load() == BackedUpItems::kNotDone) {
      const int64_t stamped = items->taken_at[i].load(std::memory_order_relaxed);
      int64_t mean = 0;
      {
        std::lock_guard<std::mutex> lock(items->mutex);
        mean = items->items_timed ? items->item_ns / items->items_timed : -1;
      }
      if (mean < 0 || now_ns() >= (stamped ? stamped : first_seen) + 2 * mean) {
        items->run(i, 1);
        break;
      }
      std::this_thread::yield();
    }
  }
  for (int64_t i = 0; i < n; ++i)
    copies[static_cast<size_t>(i)] = items->finished[i].load() - 1;
  return copies;
}

void parallel_items(int64_t n, const std::function<void(int64_t)> &item) {
  if (n <= 0)
    return;
  const int64_t workers = item_threads(n);
  if (workers <= 1) {
    for (int64_t i = 0; i < n; ++i)
      item(i);
    return;
  }
  const at::ThreadLocalState caller_state;
  auto items = std::make_shared<Items>();
  items->count = n;
  items->item = &item;
  items->caller_state = &caller_state;
  HelperThreads &helpers = HelperThreads::instance();
  for (int64_t w = 1; w < workers; ++w)
    helpers.post([items] { take_items(*items, /*on_caller=*/false); },
                 static_cast<size_t>(workers - 1));
  take_items(*items, /*on_caller=*/true);
  std::unique_lock<std::mutex> lock(items->mutex);
  items->finished.wait(lock, [&] { return items->done == items->count; });
  if (items->error)
    std::rethrow_exception(items->error);
}

} // namespace detail
} // namespace attn
