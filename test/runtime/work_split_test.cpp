// The split policy (runtime/work_split.h, attn/runtime.h): pure functions of the sizes
// and the thread count. Each expectation is worked out from the documented rule in its
// comment: about kItemsPerThread calls per thread, calls of whole kQueryBlock rows or
// kKeyBlock keys, and one call per slice for an artifact whose calls take whole slices.
#include "gpu_launch.h"
#include "internal.h"
#include "work_split.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace {

using attn::kItemsPerThread;
using attn::kKeyBlock;
using attn::kQueryBlock;
using attn::SliceSplit;
using attn::detail::backward_call_sets;
using attn::detail::backward_split;
using attn::detail::call_in_set;
using attn::detail::forward_split;
using attn::detail::key_chunk;
using attn::detail::threads_worth;

static_assert(kItemsPerThread == 4 && kQueryBlock == 64 && kKeyBlock == 512,
              "the expectations below are worked out for these constants");

TEST(WorkSplit, ThreadsWorthTheirWakeUp) {
  // floor(work / least per thread), between 1 and the threads there are.
  EXPECT_EQ(threads_worth(0, 4, 100'000), 1);
  EXPECT_EQ(threads_worth(199'999, 4, 100'000), 1);
  EXPECT_EQ(threads_worth(200'000, 4, 100'000), 2);
  EXPECT_EQ(threads_worth(350'000, 4, 100'000), 3);
  EXPECT_EQ(threads_worth(1e12, 4, 100'000), 4);
  EXPECT_EQ(threads_worth(1e300, 16, 1), 16); // no overflow past int64_t
  EXPECT_EQ(threads_worth(5e5, 0, 100'000), 1);
  // 0: every thread there is, whatever the work.
  EXPECT_EQ(threads_worth(0, 4, 0), 4);
}

TEST(WorkSplit, CostEstimates) {
  using attn::detail::CallSize;
  using attn::detail::kNanosPerByte;
  using attn::detail::kNanosPerMultiplyAdd;
  // A decoder step over 8 heads × 1024 keys, d = dv = 64, f32: 8·1024·128 multiply-adds
  // and K, V's 4 MiB read once.
  const CallSize step{8, 1, 1024, 64, 64, 4, false};
  EXPECT_DOUBLE_EQ(attn::detail::forward_nanos(step),
                   8 * 1024 * 128 * kNanosPerMultiplyAdd + (4 << 20) * kNanosPerByte);
  // The backward's products: q·k, dO·v, then P·dO, dS·k and dS·q (3d + 2dv per pair).
  EXPECT_DOUBLE_EQ(attn::detail::backward_nanos(step),
                   8 * 1024 * 320 * kNanosPerMultiplyAdd + (4 << 20) * kNanosPerByte);
  // f64 reads twice the bytes; on 8 lanes (pair_cost 2) its products take twice the time.
  CallSize doubles = step;
  doubles.element_bytes = 8;
  doubles.multiply_add_cost = 2;
  EXPECT_DOUBLE_EQ(attn::detail::forward_nanos(doubles), 2 * attn::detail::forward_nanos(step));
  // The generic loops' products at 30 times the reference; the bytes as before.
  CallSize generic = step;
  generic.multiply_add_cost = 30;
  EXPECT_DOUBLE_EQ(attn::detail::forward_nanos(generic),
                   30 * 8 * 1024 * 128 * kNanosPerMultiplyAdd + (4 << 20) * kNanosPerByte);
  // K and V are read once per 64 query rows: 130 rows read them three times.
  const CallSize prompt{1, 130, 100, 8, 8, 4, false};
  EXPECT_DOUBLE_EQ(attn::detail::forward_nanos(prompt),
                   130 * 100 * 16 * kNanosPerMultiplyAdd + 3 * 100 * 16 * 4 * kNanosPerByte);
  // Causal, 100 queries on the last 100 of 100 keys: 100·100 − 100·99/2 = 5050 pairs.
  CallSize causal{1, 100, 100, 8, 8, 4, true};
  EXPECT_DOUBLE_EQ(attn::detail::forward_nanos(causal),
                   5050 * 16 * kNanosPerMultiplyAdd + 2 * 100 * 16 * 4 * kNanosPerByte);
  // The merge reads each row's dv + 3 numbers from each of `splits` partial states.
  EXPECT_DOUBLE_EQ(attn::detail::merge_nanos(step, 4), 8 * 4 * 67 * 4 * kNanosPerByte);
}

TEST(WorkSplit, PairCostOfTheSchedulesACallTakes) {
  using attn::CpuPairCost;
  using attn::detail::pair_cost;
  const std::vector<CpuPairCost> costs{
      {"f32", 0, 0, 30, 20}, {"f32", 64, 64, 2, 3}, {"f64", 0, 0, 60, 40}};
  // d = dv = 64 takes the tiled schedule of 64; any other the generic loops.
  EXPECT_EQ(pair_cost(costs, "f32", 64, 64, 4, false), 2);
  EXPECT_EQ(pair_cost(costs, "f32", 64, 64, 4, true), 3);
  EXPECT_EQ(pair_cost(costs, "f32", 48, 48, 4, false), 30);
  EXPECT_EQ(pair_cost(costs, "f32", 64, 32, 4, true), 20);
  EXPECT_EQ(pair_cost(costs, "f32", 32, 64, 4, true), 20);
  // f64 has no tiled entry: its generic one.
  EXPECT_EQ(pair_cost(costs, "f64", 64, 64, 8, false), 60);
  // A score whose weights project q and k from 16 to 32 columns: calls with d = 16 and
  // dv = 32 take the tiled schedule of 32 (the entry point dispatches on the projected
  // rows), d = dv = 32 would not.
  const std::vector<CpuPairCost> projected{{"f32", 0, 0, 30, 20}, {"f32", 32, 16, 1, 1}};
  EXPECT_EQ(pair_cost(projected, "f32", 16, 32, 4, false), 1);
  EXPECT_EQ(pair_cost(projected, "f32", 32, 32, 4, false), 30);
  EXPECT_EQ(pair_cost(projected, "f32", 16, 16, 4, false), 30);
  // A dtype the manifest has no entry for: the reference rate per 4 bytes.
  EXPECT_EQ(pair_cost(costs, "", 64, 64, 2, false), 0.5);
  // A manifest without cpu_cost: the reference rate per 4 bytes of element.
  EXPECT_EQ(pair_cost({}, "f32", 64, 64, 4, false), 1);
  EXPECT_EQ(pair_cost({}, "f64", 48, 48, 8, true), 2);
}

TEST(WorkSplit, ForwardRowsPerCall) {
  // Rows per call: the fewest multiple of 64 that leaves at most ceil(4 * threads /
  // heads) calls per slice.
  // 8 slices on 2 threads already give 4 per thread: one call per slice.
  EXPECT_EQ(attn::forward_rows_per_call(8, 128, 2), 128);
  EXPECT_EQ(attn::forward_rows_per_call(64, 4096, 2), 4096);
  // One slice on 2 threads: 8 calls of 4096 / 8 rows.
  EXPECT_EQ(attn::forward_rows_per_call(1, 4096, 2), 512);
  // 3 slices on 4 threads: 6 calls per slice; 1000 / 6 = 166.7 rows, rounded up to 192.
  EXPECT_EQ(attn::forward_rows_per_call(3, 1000, 4), 192);
  // Never fewer than 64 rows: 100 rows are 2 calls, not 8; a decoder step is one.
  EXPECT_EQ(attn::forward_rows_per_call(1, 100, 2), 64);
  EXPECT_EQ(attn::forward_rows_per_call(1, 1, 16), 64);
}

TEST(WorkSplit, BackwardQuerySplits) {
  // B·H >= 4 per thread: whole slices; fewer: that many calls per thread, which threads
  // take as they finish.
  EXPECT_EQ(attn::backward_query_splits(8, 4096, 2), 1);
  EXPECT_EQ(attn::backward_query_splits(1, 4096, 2), 8);
  EXPECT_EQ(attn::backward_query_splits(3, 4096, 2), 3);
  EXPECT_EQ(attn::backward_query_splits(6, 4096, 16), 11);
  EXPECT_EQ(attn::backward_query_splits(1, 4096, 1), 1);
  // At least kQueryBlock rows per call.
  EXPECT_EQ(attn::backward_query_splits(1, 100, 2), 1);
  EXPECT_EQ(attn::backward_query_splits(1, 3 * kQueryBlock, 16), 3);
  EXPECT_EQ(attn::backward_query_splits(1, 0, 2), 1);
}

TEST(WorkSplit, KeySplits) {
  // One decoder step (one call) on 2 threads: eight key chunks of >= kKeyBlock keys.
  EXPECT_EQ(attn::key_splits(1, 65536, 2), 8);
  EXPECT_EQ(attn::key_splits(1, 65536, 16), 64);
  EXPECT_EQ(attn::key_splits(3, 65536, 2), 3);
  EXPECT_EQ(attn::key_splits(8, 65536, 2), 1);
  EXPECT_EQ(attn::key_splits(1, kKeyBlock, 2), 1);
  EXPECT_EQ(attn::key_splits(1, 3 * kKeyBlock, 16), 3);
  EXPECT_EQ(attn::key_splits(1, 65536, 1), 1);
}

TEST(WorkSplit, QuerySplitsBalanceVisitedPairs) {
  EXPECT_EQ(attn::query_split_begin(0, 2, 1000, 1000, false), 0);
  EXPECT_EQ(attn::query_split_begin(1, 2, 1000, 1000, false), 500);
  EXPECT_EQ(attn::query_split_begin(2, 2, 1000, 1000, false), 1000);
  // Causal: row i visits i + 1 keys; half the pairs lie in the first ~1000/sqrt(2) rows.
  EXPECT_EQ(attn::query_split_begin(1, 2, 1000, 1000, true), 707);
  // Causal with 10 keys: from row 10 on every row visits 10 keys.
  const int64_t begin = attn::query_split_begin(1, 2, 1000, 10, true);
  EXPECT_GE(begin, 500);
  EXPECT_LE(begin, 506);
  // No keys: rows split evenly.
  EXPECT_EQ(attn::query_split_begin(1, 4, 1000, 0, true), 250);
  for (bool causal : {false, true})
    for (int64_t splits : {1, 2, 3, 7, 16})
      for (int64_t s = 0; s < splits; ++s)
        EXPECT_LE(attn::query_split_begin(s, splits, 517, 300, causal),
                  attn::query_split_begin(s + 1, splits, 517, 300, causal));
}

TEST(WorkSplit, KeyChunksOnKeyBlocks) {
  using Range = std::pair<int64_t, int64_t>;
  // 2100 keys are 5 blocks of 512 (the last short); 4 chunks end at blocks
  // floor((s + 1) * 5 / 4) = 1, 2, 3, 5, the last at kv_len.
  EXPECT_EQ(key_chunk(0, 4, 2100), Range(0, 512));
  EXPECT_EQ(key_chunk(1, 4, 2100), Range(512, 1024));
  EXPECT_EQ(key_chunk(2, 4, 2100), Range(1024, 1536));
  EXPECT_EQ(key_chunk(3, 4, 2100), Range(1536, 2100));
  EXPECT_EQ(key_chunk(1, 2, 600), Range(512, 600));
  EXPECT_EQ(key_chunk(0, 1, 600), Range(0, 600));
  // Every kv_len and chunk count: the chunks tile [0, kv_len) in order, each boundary
  // inside it on a multiple of kKeyBlock.
  for (int64_t kv_len : {0, 1, 511, 512, 513, 2100, 65536})
    for (int64_t splits : {1, 2, 3, 8}) {
      int64_t end = 0;
      for (int64_t s = 0; s < splits; ++s) {
        const auto [begin, chunk_end] = key_chunk(s, splits, kv_len);
        EXPECT_EQ(begin, end) << "kv_len " << kv_len << ", chunk " << s << " of " << splits;
        EXPECT_LE(begin, chunk_end);
        EXPECT_TRUE(chunk_end == kv_len || chunk_end % kKeyBlock == 0)
            << "kv_len " << kv_len << ", chunk " << s << " of " << splits << " ends at "
            << chunk_end;
        end = chunk_end;
      }
      EXPECT_EQ(end, kv_len) << "kv_len " << kv_len << ", " << splits << " chunks";
    }
}

TEST(WorkSplit, ForwardSplitsKeysOnlyForFewCalls) {
  // A decoder step (one slice, one query) against 65536 keys on 2 threads: one call of
  // 64 rows, its keys in 8 chunks (4 per thread) merged afterwards.
  auto split = forward_split(SliceSplit::KeyChunks, 1, 1, 65536, 2);
  EXPECT_EQ(split.rows_per_call, 64);
  EXPECT_EQ(split.key_chunks, 8);
  // Two slices: 2 calls, 4 chunks each.
  EXPECT_EQ(forward_split(SliceSplit::KeyChunks, 2, 1, 65536, 2).key_chunks, 4);
  // 8 slices, or one slice of 4096 queries (8 calls of 512 rows): already 4 calls per
  // thread, no key chunks.
  EXPECT_EQ(forward_split(SliceSplit::KeyChunks, 8, 1, 65536, 2).key_chunks, 1);
  split = forward_split(SliceSplit::KeyChunks, 1, 4096, 65536, 2);
  EXPECT_EQ(split.rows_per_call, 512);
  EXPECT_EQ(split.key_chunks, 1);
}

TEST(WorkSplit, WholeSliceCallsAreNeverSplit) {
  // One call per slice, all its rows and keys, however few slices for the threads.
  auto forward = forward_split(SliceSplit::Whole, 1, 1000, 65536, 16);
  EXPECT_EQ(forward.rows_per_call, 1000);
  EXPECT_EQ(forward.key_chunks, 1);
  auto backward = backward_split(SliceSplit::Whole, 1, 4096, 65536, 16);
  EXPECT_EQ(backward.query_splits, 1);
  EXPECT_EQ(backward.key_chunks, 1);
}

TEST(WorkSplit, RowsSplitQueriesNeverKeys) {
  // A decoder step against 65536 keys: the rows still split, their keys never (an
  // implicit normalizer's call solves its rows' thresholds over all their keys; a
  // scan's backward chunk needs the suffix sums of the chunks after it).
  auto forward = forward_split(SliceSplit::Rows, 1, 1, 65536, 2);
  EXPECT_EQ(forward.rows_per_call, 64);
  EXPECT_EQ(forward.key_chunks, 1);
  auto backward = backward_split(SliceSplit::Rows, 1, 1, 2100, 2);
  EXPECT_EQ(backward.query_splits, 1);
  EXPECT_EQ(backward.key_chunks, 1);
  backward = backward_split(SliceSplit::Rows, 1, 4096, 65536, 2);
  EXPECT_EQ(backward.query_splits, 8);
  EXPECT_EQ(backward.key_chunks, 1);
}

TEST(WorkSplit, TheManifestsSplitsDecideNotItsAlgorithm) {
  // An online kernel's manifest that says rows (hand-written here; attn-compile writes
  // key_chunks for online kernels): a decoder step is never split into key chunks.
  const attn::Manifest manifest = attn::detail::parse_manifest("rows.json", R"({"abi": )" +
      std::to_string(ATTN_ABI_VERSION) + R"(, "kernel": "k", "normalizer": "n",
      "algorithm": "online",
      "splits": {"forward": "rows", "backward": "rows", "partial_calls": false},
      "denominator": "sum", "mask": "none", "params": [], "inputs": [],
      "contract": {"kind": "scaled_dot", "scale": null, "feature": false},
      "dtypes": ["f32"], "devices": ["cpu"]})");
  EXPECT_EQ(forward_split(manifest.splits.forward, 1, 1, 65536, 2).key_chunks, 1);
  EXPECT_EQ(backward_split(manifest.splits.backward, 1, 1, 2100, 2).key_chunks, 1);
}

TEST(WorkSplit, BackwardSplitsQueriesElseKeys) {
  // One slice of 4096 queries on 2 threads: 8 query splits (each its own dk, dv buffer),
  // no key chunks.
  auto split = backward_split(SliceSplit::KeyChunks, 1, 4096, 65536, 2);
  EXPECT_EQ(split.query_splits, 8);
  EXPECT_EQ(split.key_chunks, 1);
  // A decoder step against 2100 keys: too few queries for a split, so the keys go in
  // chunks, at most 2100 / 512 = 4 of them (8 would be 4 per thread).
  split = backward_split(SliceSplit::KeyChunks, 1, 1, 2100, 2);
  EXPECT_EQ(split.query_splits, 1);
  EXPECT_EQ(split.key_chunks, 4);
  // 8 slices on 2 threads: whole slices.
  split = backward_split(SliceSplit::KeyChunks, 8, 1, 65536, 2);
  EXPECT_EQ(split.query_splits, 1);
  EXPECT_EQ(split.key_chunks, 1);
}

TEST(DecodeRule, TheCasesOfPythonsDecodeSplit) {
  // test_gpu_target_choice.py's test_decode_split_choice, case for case: the GPU's decode
  // forward (attn_fwd tiles of 128 rows, decode tiles of 16 rows x 64 keys, 132 SMs).
  const attn::TritonDecodeRule rule{16, 2};
  auto choose = [&](int64_t rows, int64_t keys, int64_t group, int64_t batch_kv_heads,
                    int64_t sms = 132) -> std::pair<int64_t, int64_t> {
    auto chunks = attn::detail::decode_key_chunks(rows, keys, group, batch_kv_heads, 128, 64,
                                                  16, sms, rule);
    return chunks ? std::make_pair(chunks->count, chunks->keys) : std::make_pair(0L, 0L);
  };
  using Chunks = std::pair<int64_t, int64_t>; // (0, 0): attn_fwd serves the call
  EXPECT_EQ(choose(1, 8192, 4, 8), Chunks(32, 256)); // 8 programs, 264 wanted
  EXPECT_EQ(choose(1, 8192, 8, 4), Chunks(64, 128));
  EXPECT_EQ(choose(1, 100, 4, 8), Chunks(2, 64)); // at most one chunk per key tile
  EXPECT_EQ(choose(1, 64, 4, 8), Chunks(0, 0));   // one tile: nothing to split
  EXPECT_EQ(choose(17, 8192, 1, 8), Chunks(0, 0)); // more rows than a decode tile
  EXPECT_EQ(choose(1, 8192, 8, 32), Chunks(0, 0)); // 256 programs fill 132 SMs
}

TEST(WorkSplit, BackwardCallSets) {
  // 4 sets per thread, never more sets than calls.
  EXPECT_EQ(backward_call_sets(100, 2), 8);
  EXPECT_EQ(backward_call_sets(1000, 16), 64);
  EXPECT_EQ(backward_call_sets(3, 2), 3);
  EXPECT_EQ(backward_call_sets(0, 4), 1);
}

TEST(WorkSplit, CallSetsAlternateDirectionEachRound) {
  // 16 calls in 4 sets: set 0 takes calls 0, 7, 8, 15 (forward, backward, ...), set 3
  // takes 3, 4, 11, 12; on a ramp of work (call i costs i) every set costs 30.
  EXPECT_EQ(std::vector<int64_t>({call_in_set(0, 4, 0), call_in_set(0, 4, 1),
                                  call_in_set(0, 4, 2), call_in_set(0, 4, 3)}),
            std::vector<int64_t>({0, 7, 8, 15}));
  EXPECT_EQ(std::vector<int64_t>({call_in_set(3, 4, 0), call_in_set(3, 4, 1),
                                  call_in_set(3, 4, 2), call_in_set(3, 4, 3)}),
            std::vector<int64_t>({3, 4, 11, 12}));
  for (int64_t set = 0; set < 4; ++set) {
    int64_t cost = 0;
    for (int64_t round = 0; round < 4; ++round)
      cost += call_in_set(set, 4, round);
    EXPECT_EQ(cost, 30) << "set " << set;
  }
  // Every call runs once, whatever the count: rounds go on while round * sets < calls,
  // and a set skips a result >= calls.
  for (int64_t calls : {1, 5, 10, 17, 64})
    for (int64_t sets : {1, 3, 4, 8}) {
      std::vector<int> runs(static_cast<size_t>(calls), 0);
      for (int64_t set = 0; set < sets; ++set)
        for (int64_t round = 0; round * sets < calls; ++round)
          if (const int64_t call = call_in_set(set, sets, round); call < calls)
            ++runs[static_cast<size_t>(call)];
      EXPECT_EQ(runs, std::vector<int>(static_cast<size_t>(calls), 1))
          << calls << " calls in " << sets << " sets";
    }
}

} // namespace
