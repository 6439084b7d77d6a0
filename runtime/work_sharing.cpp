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
// Where ATen's own OpenMP threads are spinning after a region (libgomp's threads spin
// for milliseconds before they sleep: 4-8 ms measured on a 2-vCPU EPYC), a call right
// after a matrix product, as a model's attention is, gives its items to them instead:
// a woken helper would share a CPU with the spinner for that long (an 8-head decoder
// step 6.2-6.7 ms after SDPA or a matmul, 4.3-4.8 ms otherwise).
//
//===----------------------------------------------------------------------===//
#include "work_sharing.h"

#include <ATen/Config.h>
#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace attn {
namespace detail {
namespace {

/// Threads that run posted tasks, created as callers ask for more. Never destroyed:
/// at exit its threads are parked waiting for a task and hold nothing, whereas joining
/// them from a static destructor would race the other libraries' teardown.
class HelperThreads {
public:
  /// Queues `copies` runs of `task`, one per helper, with that many helpers at least.
  void post(const std::function<void()> &task, size_t copies) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (helpers_.size() < copies) {
      auto helper = std::make_unique<Helper>();
      if (sched_getaffinity(0, sizeof(helper->allowed), &helper->allowed) != 0)
        CPU_ZERO(&helper->allowed); // unknown: never kept off a CPU
      Helper *self = helper.get();
      helper->thread = std::thread([this, self] { serve(*self); });
      helpers_.push_back(std::move(helper));
    }
    keep_off_callers_cpu(); // once per call: a helper that already woke for it runs free
    for (size_t copy = 0; copy < copies; ++copy) {
      tasks_.push_back(task);
      wake_.notify_one();
    }
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
  struct Helper {
    std::thread thread;
    cpu_set_t allowed;             // its CPUs when created (the creating caller's)
    std::atomic<int> last_cpu{-1}; // where its last task ended
    bool kept_off = false;         // woken with `allowed` less a caller's CPU (mutex_)
  };

  /// A woken thread goes to an idle CPU if there is one, else back where it last ran or
  /// beside the thread that woke it. Where the other CPUs are busy (another process's
  /// loop, an OpenMP thread spinning after its region) a helper that last ran on the
  /// caller's CPU so stays there for the rest of the run, and the caller's items run on
  /// one CPU (a trace of the busy-core bench: every 8-head decoder step), although on
  /// the busy CPU the woken helper would have been given its share at once. So a helper
  /// that last ran on the caller's CPU is woken with that CPU left out of its affinity,
  /// which it takes back once it runs. Called with mutex_ held.
  void keep_off_callers_cpu() {
    const int cpu = sched_getcpu();
    if (cpu < 0)
      return;
    for (const std::unique_ptr<Helper> &helper : helpers_) {
      const int last = helper->last_cpu.load(std::memory_order_relaxed);
      if (helper->kept_off || (last != cpu && last != -1) || !CPU_ISSET(cpu, &helper->allowed))
        continue;
      cpu_set_t elsewhere = helper->allowed;
      CPU_CLR(cpu, &elsewhere);
      if (CPU_COUNT(&elsewhere) > 0 && pthread_setaffinity_np(helper->thread.native_handle(),
                                                              sizeof(elsewhere), &elsewhere) == 0)
        helper->kept_off = true;
    }
  }

  void serve(Helper &self) {
    at::init_num_threads(); // an item's own ATen calls use the caller's thread count
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return !tasks_.empty(); });
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      const bool was_kept_off = std::exchange(self.kept_off, false);
      lock.unlock();
      if (was_kept_off) // running now: free to move again, e.g. to a CPU the caller leaves
        pthread_setaffinity_np(pthread_self(), sizeof(self.allowed), &self.allowed);
      task();
      self.last_cpu.store(sched_getcpu(), std::memory_order_relaxed);
      lock.lock();
    }
  }

  static std::atomic<HelperThreads *> current_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::unique_ptr<Helper>> helpers_;
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
  std::mutex mutex; // guards `error`, and with `finished` the caller's sleep
  std::condition_variable finished;
  std::atomic<int64_t> done{0};
  std::exception_ptr error;
};

/// A spinning thread's pause: it lets the core's other hardware thread run and saves power.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// The longest the caller spins for the helpers' last items before it sleeps.
constexpr std::chrono::microseconds kMostCallerSpin{2000};

/// Returns how many items this thread ran.
int64_t take_items(Items &shared, bool on_caller) {
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
    return 0;
  std::lock_guard<std::mutex> lock(shared.mutex);
  if (error && !shared.error)
    shared.error = error;
  if (shared.done.fetch_add(ran) + ran == shared.count)
    shared.finished.notify_all();
  return ran;
}

/// Waits for the items helpers still run. A caller that sleeps here gives its CPU to
/// whichever thread is runnable, typically an OpenMP thread spinning after the model's
/// last region, and waking it then waits for that thread's time slice: measured at
/// 2-3 ms after helpers had finished 1.3 ms calls. So it first spins for about two of
/// its own items (the helpers' last items started before its own last one ended); it
/// sleeps at once where it ran none (a helper took them all, likely on its CPU).
/// Returns the first exception an item threw.
std::exception_ptr wait_for_helpers(Items &shared, std::chrono::steady_clock::time_point started,
                                    int64_t caller_items) {
  using clock = std::chrono::steady_clock;
  if (caller_items > 0) {
    const clock::time_point now = clock::now();
    const clock::time_point give_up =
        now + std::min<clock::duration>(2 * (now - started) / caller_items, kMostCallerSpin);
    while (shared.done.load() != shared.count && clock::now() < give_up)
      for (int i = 0; i < 64; ++i)
        cpu_relax();
  }
  std::unique_lock<std::mutex> lock(shared.mutex);
  shared.finished.wait(lock, [&] { return shared.done.load() == shared.count; });
  return shared.error;
}

#if AT_PARALLEL_OPENMP && defined(__linux__)
/// The threads of the calling thread's OpenMP team besides itself (libgomp keeps a pool
/// per thread that starts regions), each as an open /proc/self/task/<tid>/stat, which
/// tells whether that thread is on a CPU or waiting for one ('R') or asleep.
class OpenMpTeam {
public:
  OpenMpTeam(const OpenMpTeam &) = delete;
  OpenMpTeam &operator=(const OpenMpTeam &) = delete;
  ~OpenMpTeam() { forget(); }

  /// Whether every other thread of the calling thread's team of `size` is running now,
  /// which right after a region means spinning for the next one, each on a CPU of its
  /// own, not the caller's: a spinner beside the caller (its own CPU held by another
  /// process) would share the caller's CPU, and the region's barrier would wait for it.
  /// Never in a forked child: libgomp's pool did not survive the fork, and a region
  /// there never ends.
  static bool spinning(int64_t size) {
    if (in_forked_child_.load(std::memory_order_relaxed))
      return false;
    thread_local OpenMpTeam team;
    if (team.size_ != size)
      team.learn(size);
    if (team.stat_files_.empty())
      return false;
    std::vector<int> cpus{sched_getcpu()};
    for (int fd : team.stat_files_) {
      char line[512];
      const ssize_t length = pread(fd, line, sizeof(line) - 1, 0);
      if (length <= 0) { // the thread has gone (libgomp replaced it): learn the team again
        team.forget();
        team.size_ = 0;
        return false;
      }
      line[length] = '\0';
      int cpu = -1;
      if (!running_on(line, cpu) || cpu < 0 ||
          std::find(cpus.begin(), cpus.end(), cpu) != cpus.end())
        return false;
      cpus.push_back(cpu);
    }
    return true;
  }

  static void forked() { in_forked_child_.store(true); }

private:
  OpenMpTeam() = default;

  /// Runs one region on a team of `size` to learn its threads: once per calling thread,
  /// again when the team's size changes or one of its threads has gone.
  void learn(int64_t size) {
    forget();
    size_ = size;
    std::vector<pid_t> tids(static_cast<size_t>(size), 0);
    at::parallel_for(0, size, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        tids[static_cast<size_t>(t)] = static_cast<pid_t>(syscall(SYS_gettid));
    });
    const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
    std::sort(tids.begin(), tids.end());
    tids.erase(std::unique(tids.begin(), tids.end()), tids.end());
    tids.erase(std::remove_if(tids.begin(), tids.end(),
                              [&](pid_t tid) { return tid == self || tid == 0; }),
               tids.end());
    if (static_cast<int64_t>(tids.size()) != size - 1) // a smaller team: unknown
      return;
    for (pid_t tid : tids) {
      char path[64];
      std::snprintf(path, sizeof(path), "/proc/self/task/%d/stat", static_cast<int>(tid));
      const int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) { // no /proc: never use the team
        forget();
        return;
      }
      stat_files_.push_back(fd);
    }
  }

  /// Whether a task's stat line says it is running or runnable ('R'), and `cpu`, the CPU
  /// it last ran on. The line is "tid (name) state ...", `)` may be in the name, and the
  /// CPU is the 39th field.
  static bool running_on(const char *line, int &cpu) {
    const char *name_end = strrchr(line, ')');
    if (!name_end || name_end[1] != ' ' || name_end[2] != 'R')
      return false;
    int field = 3;
    for (const char *c = name_end + 2; *c; ++c)
      if (*c == ' ' && ++field == 39) {
        cpu = std::atoi(c + 1);
        return true;
      }
    return false;
  }

  void forget() {
    for (int fd : stat_files_)
      close(fd);
    stat_files_.clear();
  }

  static std::atomic<bool> in_forked_child_;
  int64_t size_ = 0;
  std::vector<int> stat_files_;
};

std::atomic<bool> OpenMpTeam::in_forked_child_{false};
// At load, not at first use: a process may fork before its first parallel call.
[[maybe_unused]] const bool kOpenMpTeamForkHandler = [] {
  return pthread_atfork(nullptr, nullptr, [] { OpenMpTeam::forked(); }) == 0;
}();
#endif

/// Whether every thread of ATen's OpenMP team (at::get_num_threads()) is spinning, each
/// on a CPU of its own, so that a region would start at once on each: its closing
/// barrier waits for every thread of the team, and one that is asleep may wait for a
/// busy CPU.
bool openmp_team_is_spinning() {
#if AT_PARALLEL_OPENMP && defined(__linux__)
  const int64_t size = at::get_num_threads();
  return size > 1 && OpenMpTeam::spinning(size);
#else
  return false;
#endif
}

} // namespace

void parallel_items(int64_t n, int64_t threads, const std::function<void(int64_t)> &item) {
  if (n <= 0)
    return;
  const int64_t workers = std::min<int64_t>(threads, n);
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
  if (openmp_team_is_spinning()) {
    // Every thread of the team takes items: none has to be woken.
    at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t, int64_t) {
      take_items(*items, /*on_caller=*/at::get_thread_num() == 0);
    });
    if (items->error)
      std::rethrow_exception(items->error);
    return;
  }
  HelperThreads::instance().post([items] { take_items(*items, /*on_caller=*/false); },
                                 static_cast<size_t>(workers - 1));
  const auto started = std::chrono::steady_clock::now();
  if (std::exception_ptr error =
          wait_for_helpers(*items, started, take_items(*items, /*on_caller=*/true)))
    std::rethrow_exception(error);
}

} // namespace detail
} // namespace attn
