// detail::parallel_items (runtime/work_sharing.h): every item once, under the caller's
// thread-local state, the first exception rethrown after every item ran, serial inside
// a parallel region; and detail::ParallelSite, which backs off helpers that added no
// throughput and wakes them late in a backed-off call that runs long.
#include "work_sharing.h"

#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using attn::detail::ParallelSite;

ParallelSite &test_site() {
  static ParallelSite site;
  return site;
}

void parallel_items(int64_t n, const std::function<void(int64_t)> &item) {
  attn::detail::parallel_items(n, item, test_site());
}

class WorkSharing : public ::testing::Test {
protected:
  void SetUp() override {
    threads_before_ = at::get_num_threads();
    at::set_num_threads(4);
  }
  void TearDown() override { at::set_num_threads(threads_before_); }
  int threads_before_ = 1;
};

TEST_F(WorkSharing, RunsEveryItemOnceAcrossThreads) {
  constexpr int64_t n = 400;
  std::vector<std::atomic<int>> runs(n);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  parallel_items(n, [&](int64_t i) {
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
    parallel_items(64, [&](int64_t) {
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
  EXPECT_THROW(parallel_items(100,
                              [&](int64_t i) {
                                ran.fetch_add(1);
                                if (i % 10 == 3)
                                  throw std::runtime_error("item failed");
                              }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 100);
}

TEST_F(WorkSharing, SerialInsideAParallelRegionAndForNoItems) {
  parallel_items(0, [](int64_t) { FAIL() << "no item to run"; });
  std::atomic<int> nested{0};
  at::parallel_for(0, 2, 1, [&](int64_t begin, int64_t end) {
    // OpenMP may give the region a team of one thread (a loaded machine): that is no
    // parallel region, and the items may then use helpers.
    if (!at::in_parallel_region())
      return;
    nested.fetch_add(1);
    const auto outer = std::this_thread::get_id();
    parallel_items(16, [&](int64_t) {
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
        parallel_items(16, [&](int64_t i) { total.fetch_add(i); });
    });
  for (auto &caller : callers)
    caller.join();
  EXPECT_EQ(total.load(), 4 * 50 * (15 * 16 / 2));
}

TEST(ParallelSiteTest, BacksOffAfterACallWithoutParallelismAndDoublesUpToTheCap) {
  ParallelSite site;
  EXPECT_TRUE(site.eager_start());
  // Two threads busy 1.1 s over 1 s of wall time: below kMinParallelism.
  site.record(1.1, 1.0);
  EXPECT_FALSE(site.eager_start());
  EXPECT_TRUE(site.eager_start()); // 1 backed-off call, then a measuring one
  site.record(1.0, 1.0);
  EXPECT_FALSE(site.eager_start());
  EXPECT_FALSE(site.eager_start());
  EXPECT_TRUE(site.eager_start()); // 2, doubled
  int64_t length = 2;
  for (int round = 0; round < 10; ++round) {
    site.record(1.0, 1.0);
    length = std::min<int64_t>(2 * length, ParallelSite::kMostBackedOffCalls);
    for (int64_t call = 0; call < length; ++call)
      ASSERT_FALSE(site.eager_start()) << "round " << round << ", call " << call;
    ASSERT_TRUE(site.eager_start()) << "round " << round;
  }
  EXPECT_EQ(length, ParallelSite::kMostBackedOffCalls);
}

TEST(ParallelSiteTest, ACallWhoseThreadsRanSideBySideRestoresTheEagerStart) {
  ParallelSite site;
  site.record(1.0, 1.0);
  site.record(1.0, 1.0);
  site.record(1.9, 1.0); // e.g. a long backed-off call that woke its helpers late
  for (int call = 0; call < 10; ++call)
    EXPECT_TRUE(site.eager_start());
  site.record(1.0, 1.0); // the back-off starts over at one call
  EXPECT_FALSE(site.eager_start());
  EXPECT_TRUE(site.eager_start());
}

TEST_F(WorkSharing, ABackedOffCallRunsOnTheCallerUntilItRunsLong) {
  ParallelSite site;
  site.record(1.0, 1.0);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> on_helpers{0};
  // A short call (well under kLateHelpersSeconds): the caller alone.
  const auto short_start = std::chrono::steady_clock::now();
  attn::detail::parallel_items(8, [&](int64_t) {
    if (std::this_thread::get_id() != caller)
      on_helpers.fetch_add(1);
  }, site);
  const std::chrono::duration<double> short_took = std::chrono::steady_clock::now() - short_start;
  if (short_took.count() < ParallelSite::kLateHelpersSeconds)
    EXPECT_EQ(on_helpers.load(), 0);
  // Backed off again (2 calls now); a long call wakes the helpers once it has run
  // kLateHelpersSeconds.
  site.record(1.0, 1.0);
  std::vector<std::atomic<int>> runs(64);
  std::atomic<int> late_on_helpers{0};
  attn::detail::parallel_items(64, [&](int64_t i) {
    runs[static_cast<size_t>(i)].fetch_add(1);
    if (std::this_thread::get_id() != caller)
      late_on_helpers.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }, site);
  for (int64_t i = 0; i < 64; ++i)
    ASSERT_EQ(runs[static_cast<size_t>(i)].load(), 1) << "item " << i;
  if (late_on_helpers.load() == 0)
    GTEST_SKIP() << "no helper took an item within 64 ms of being woken (a loaded machine)";
}

} // namespace
