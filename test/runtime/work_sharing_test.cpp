// detail::parallel_items (runtime/work_sharing.h): every item once, under the caller's
// thread-local state, the first exception rethrown after every item ran, a return only
// once helpers' items finished, helpers with the caller's affinity while they run items,
// serial inside a parallel region; on ATen's OpenMP team while it spins after a region,
// on the helpers once it sleeps.
#include "work_sharing.h"

#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>
#include <strings.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using attn::detail::parallel_items;

constexpr int64_t kThreads = 4;

class WorkSharing : public ::testing::Test {
protected:
  void SetUp() override {
    threads_before_ = at::get_num_threads();
    at::set_num_threads(kThreads); // the helpers' own ATen calls
  }
  void TearDown() override { at::set_num_threads(threads_before_); }
  int threads_before_ = 1;
};

// First in the file: ATen's team is then made of two threads on two CPUs, whose libgomp
// threads spin for milliseconds after a region (with more threads than CPUs they spin
// for microseconds only).
class OpenMpTeamSharing : public ::testing::Test {
protected:
  void SetUp() override {
    cpu_set_t cpus;
    ASSERT_EQ(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
    if (CPU_COUNT(&cpus) < 2)
      GTEST_SKIP() << "one CPU: no team of two threads to spin";
    threads_before_ = at::get_num_threads();
    at::set_num_threads(2);
  }
  void TearDown() override {
    if (threads_before_ > 0)
      at::set_num_threads(threads_before_);
  }
  static bool environment_sets(const char *variable, const char *value) {
    const char *set = std::getenv(variable);
    return set && (!value || strcasecmp(set, value) == 0);
  }

public:
  /// A region of the whole team, after which its threads spin for the next one.
  static void run_a_region() {
    at::parallel_for(0, 2, 1, [](int64_t, int64_t) {});
  }

protected:
  int threads_before_ = 0;
};

struct ItemRecord {
  std::vector<std::atomic<int>> runs;
  std::atomic<int> in_region{0}, grad_enabled{0};
  std::mutex mutex;
  std::set<std::thread::id> threads;
  explicit ItemRecord(int64_t n) : runs(static_cast<size_t>(n)) {}
  void ran(int64_t i) {
    runs[static_cast<size_t>(i)].fetch_add(1);
    if (at::in_parallel_region())
      in_region.fetch_add(1);
    if (c10::GradMode::is_enabled())
      grad_enabled.fetch_add(1);
    std::lock_guard<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
  }
};

TEST_F(OpenMpTeamSharing, ItemsGoToTheTeamWhileItSpins) {
  if (environment_sets("OMP_WAIT_POLICY", "passive"))
    GTEST_SKIP() << "OMP_WAIT_POLICY=passive: the team never spins";
  constexpr int64_t n = 32;
  bool on_team = false;
  // The team's other thread may lose its CPU between the region and the call (a loaded
  // machine): then the call is right to use the helpers, and the next attempt tells.
  for (int attempt = 0; attempt < 50 && !on_team; ++attempt) {
    ItemRecord record(n);
    run_a_region();
    {
      c10::NoGradGuard no_grad;
      parallel_items(n, 2, [&](int64_t i) {
        record.ran(i);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      });
    }
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(record.runs[static_cast<size_t>(i)].load(), 1) << "item " << i;
    EXPECT_EQ(record.grad_enabled.load(), 0) << "an item ran outside the caller's grad mode";
    on_team = record.in_region.load() == n && record.threads.size() == 2;
  }
  EXPECT_TRUE(on_team) << "no call right after a region ran its items on the team";
}

TEST_F(OpenMpTeamSharing, RethrowsTheFirstErrorFromTheTeam) {
  if (environment_sets("OMP_WAIT_POLICY", "passive"))
    GTEST_SKIP() << "OMP_WAIT_POLICY=passive: the team never spins";
  bool on_team = false;
  for (int attempt = 0; attempt < 50 && !on_team; ++attempt) {
    std::atomic<int> ran{0}, in_region{0};
    run_a_region();
    EXPECT_THROW(parallel_items(100, 2,
                                [&](int64_t i) {
                                  ran.fetch_add(1);
                                  if (at::in_parallel_region())
                                    in_region.fetch_add(1);
                                  if (i % 10 == 3)
                                    throw std::runtime_error("item failed");
                                }),
                 std::runtime_error);
    EXPECT_EQ(ran.load(), 100);
    on_team = in_region.load() == 100;
  }
  EXPECT_TRUE(on_team) << "no call right after a region ran its items on the team";
}

// Asleep, a team thread has to be woken, and the region's closing barrier would wait for
// it however busy its CPU is: the helpers run the items, and the call does not wait for
// one that has not started.
TEST_F(OpenMpTeamSharing, ItemsGoToTheHelpersOnceTheTeamSleeps) {
  if (environment_sets("OMP_WAIT_POLICY", "active") || environment_sets("GOMP_SPINCOUNT", nullptr))
    GTEST_SKIP() << "OMP_WAIT_POLICY or GOMP_SPINCOUNT set: the team may spin for long";
  ItemRecord record(8);
  run_a_region();
  std::this_thread::sleep_for(std::chrono::milliseconds(300)); // libgomp spins for < 0.3 s
  parallel_items(8, 2, [&](int64_t i) { record.ran(i); });
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_EQ(record.runs[static_cast<size_t>(i)].load(), 1) << "item " << i;
  EXPECT_EQ(record.in_region.load(), 0) << "items ran on a team that had to be woken";
}

// A spinner on the caller's CPU (its own CPU held by another process) would share the
// caller's CPU, and the region's barrier would wait for it: the helpers take the items.
// A fresh process (a death test re-runs this binary) whose threads all have one CPU and
// whose team spins without end (OMP_WAIT_POLICY=active, read when libgomp loads).
TEST(OpenMpTeamOnTheCallersCpu, ItemsGoToTheHelpers) {
  cpu_set_t cpus;
  ASSERT_EQ(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
  int first = 0;
  while (!CPU_ISSET(first, &cpus))
    ++first;
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";
  setenv("OMP_WAIT_POLICY", "active", /*overwrite=*/1);
  EXPECT_EXIT(
      {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(first, &one);
        sched_setaffinity(0, sizeof(one), &one); // the team's threads inherit it
        at::set_num_threads(2);
        OpenMpTeamSharing::run_a_region();
        ItemRecord record(8);
        parallel_items(8, 2, [&](int64_t i) { record.ran(i); });
        std::_Exit(record.in_region.load() == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  unsetenv("OMP_WAIT_POLICY");
}

TEST_F(WorkSharing, RunsEveryItemOnceAcrossThreads) {
  constexpr int64_t n = 400;
  std::vector<std::atomic<int>> runs(n);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  parallel_items(n, kThreads, [&](int64_t i) {
    runs[static_cast<size_t>(i)].fetch_add(1);
    std::this_thread::yield();
    std::lock_guard<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
  });
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(runs[static_cast<size_t>(i)].load(), 1) << "item " << i;
  EXPECT_LE(threads.size(), 4u);
}

TEST_F(WorkSharing, ItemsSeeTheCallersGradMode) {
  std::atomic<int> grad_enabled{0}, on_helpers{0};
  const auto caller = std::this_thread::get_id();
  {
    c10::NoGradGuard no_grad;
    parallel_items(64, kThreads, [&](int64_t) {
      if (c10::GradMode::is_enabled())
        grad_enabled.fetch_add(1);
      if (std::this_thread::get_id() != caller)
        on_helpers.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    });
  }
  EXPECT_TRUE(c10::GradMode::is_enabled());
  EXPECT_EQ(grad_enabled.load(), 0);
  if (on_helpers.load() == 0)
    GTEST_SKIP() << "no helper thread started within 128 ms (a loaded machine)";
}

TEST_F(WorkSharing, RethrowsTheFirstErrorAfterEveryItemRan) {
  std::atomic<int> ran{0};
  EXPECT_THROW(parallel_items(100, kThreads,
                              [&](int64_t i) {
                                ran.fetch_add(1);
                                if (i % 10 == 3)
                                  throw std::runtime_error("item failed");
                              }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 100);
}

// The caller spins for a helper's last item only about two of its own items' time
// (2 ms at most), then sleeps until the helper reports it: either way it returns with
// every item finished.
TEST_F(WorkSharing, WaitsForAHelpersItemPastTheSpin) {
  const auto caller = std::this_thread::get_id();
  for (const auto helper_item :
       {std::chrono::microseconds(300), std::chrono::microseconds(30000)}) {
    constexpr int64_t n = 8;
    std::vector<std::atomic<bool>> finished(n);
    std::atomic<int> on_helpers{0};
    parallel_items(n, kThreads, [&](int64_t i) {
      if (std::this_thread::get_id() != caller) {
        on_helpers.fetch_add(1);
        std::this_thread::sleep_for(helper_item);
      } else { // long enough for a woken helper to take an item (tens of microseconds)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      finished[static_cast<size_t>(i)].store(true);
    });
    for (int64_t i = 0; i < n; ++i)
      EXPECT_TRUE(finished[static_cast<size_t>(i)].load()) << "item " << i;
    if (on_helpers.load() == 0)
      GTEST_SKIP() << "no helper thread started during the call (a loaded machine)";
  }
}

// A helper that last ran on the caller's CPU is woken with that CPU left out of its
// affinity; once it runs an item its affinity is the caller's again, so it never stays
// pinned.
TEST_F(WorkSharing, HelpersRunItemsWithTheCallersAffinity) {
  cpu_set_t callers;
  ASSERT_EQ(sched_getaffinity(0, sizeof(callers), &callers), 0);
  if (CPU_COUNT(&callers) < 2)
    GTEST_SKIP() << "one CPU: no other CPU to wake a helper on";
  const auto caller = std::this_thread::get_id();
  for (int call = 0; call < 4; ++call) {
    std::mutex mutex;
    std::vector<cpu_set_t> helper_affinities;
    parallel_items(8, kThreads, [&](int64_t) {
      if (std::this_thread::get_id() != caller) {
        cpu_set_t mine;
        ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(mine), &mine), 0);
        std::lock_guard<std::mutex> lock(mutex);
        helper_affinities.push_back(mine);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    for (const cpu_set_t &mine : helper_affinities)
      EXPECT_TRUE(CPU_EQUAL(&mine, &callers)) << "call " << call;
  }
}

TEST_F(WorkSharing, SerialInsideAParallelRegionAndForNoItems) {
  parallel_items(0, kThreads, [](int64_t) { FAIL() << "no item to run"; });
  std::atomic<int> nested{0};
  at::parallel_for(0, 2, 1, [&](int64_t begin, int64_t end) {
    // OpenMP may give the region a team of one thread (a loaded machine): that is no
    // parallel region, and the items may then use helpers.
    if (!at::in_parallel_region())
      return;
    nested.fetch_add(1);
    const auto outer = std::this_thread::get_id();
    parallel_items(16, kThreads, [&](int64_t) {
      EXPECT_EQ(std::this_thread::get_id(), outer);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  });
  if (nested.load() == 0)
    GTEST_SKIP() << "at::parallel_for ran on a team of one thread";
}

TEST_F(WorkSharing, ManyCallersShareTheHelpers) {
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int call = 0; call < 50; ++call)
        parallel_items(16, kThreads, [&](int64_t i) { total.fetch_add(i); });
    });
  for (auto &caller : callers)
    caller.join();
  EXPECT_EQ(total.load(), 4 * 50 * (15 * 16 / 2));
}

} // namespace
