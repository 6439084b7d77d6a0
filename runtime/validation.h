//===- validation.h - a call's arguments against its artifact ------------===//
#ifndef ATTN_RUNTIME_VALIDATION_H
#define ATTN_RUNTIME_VALIDATION_H

#include "attn/runtime.h"

#include <algorithm>
#include <string>
#include <vector>

namespace attn {
namespace detail {

/// Everything the dispatch needs, established by validate().
struct Problem {
  int64_t B = 0, H = 0, Nq = 0, Nk = 0, d = 0, dv = 0, P = 0;
  /// Grouped-query attention: k and v have H / group heads, query head h reads key/value
  /// head h / group (1: as many heads as q).
  int64_t group = 1;
  torch::ScalarType dtype = torch::kFloat;
  torch::Device device{torch::kCPU};
  bool causal = false;
  std::vector<int64_t> kv_len; // [B]
  torch::Tensor key_lengths;          // GPU only: kv_len as int64 [B] on the device
  /// The absolute positions of q's row 0 and of k's row 0 per batch entry ([B] each).
  std::vector<int64_t> query_start, key_start;
  torch::Tensor query_starts, key_starts; // GPU only: as int64 [B] on the device

  /// The positions a tensor input's dim named Nq (Nk) spans: up to the call's last query (key).
  int64_t query_positions() const {
    return Nq + *std::max_element(query_start.begin(), query_start.end());
  }
  int64_t key_positions() const {
    return Nk + *std::max_element(key_start.begin(), key_start.end());
  }
  /// 1: the backward sees every key one index later, at [1, kv_len + 1), so that no
  /// call has kv_begin = 0 and none takes the row offset's share (abi.h): a key block
  /// of context parallelism other than the one that takes it (attention_partial_backward).
  /// The entry points get key_start - key_shift: the regions still see key row r at
  /// position key_start + r.
  int64_t key_shift = 0;
  /// Context parallelism's blocks: a tensor input's dim named Nq or Nk may span more
  /// positions than the call's (the whole sequence's table), since a block's regions
  /// read it at both i and j.
  bool whole_sequence_tables = false;

  bool cuda() const { return device.is_cuda(); }
  /// The dtype of row_max / row_sum: q's on the CPU, float32 on the GPU (the GPU
  /// kernels accumulate in float32 whatever the input dtype).
  torch::ScalarType stats_dtype() const { return cuda() ? torch::kFloat : dtype; }

  /// The key/value head that query head h reads.
  int64_t kv_head(int64_t h) const { return h / group; }

  /// Sizes read off q [B, H, Nq, d], k [B, H_kv, Nk, d] and v [B, H_kv, Nk, dv].
  static Problem of(const torch::Tensor &q, const torch::Tensor &k,
                    const torch::Tensor &v) {
    Problem p;
    p.B = q.size(0);
    p.H = q.size(1);
    p.Nq = q.size(2);
    p.d = q.size(3);
    p.Nk = k.size(2);
    p.dv = v.size(3);
    p.group = k.size(1) > 0 && p.H >= k.size(1) && p.H % k.size(1) == 0 ? p.H / k.size(1) : 1;
    p.dtype = q.scalar_type();
    p.device = q.device();
    return p;
  }
};

/// The checks of a call's q, k, v, params and options against the artifact (devices,
/// dtypes, ranks, sizes, positions, tensor inputs, key_lengths), each failing with a
/// c10::Error that names `fn`, the argument and what was expected; the Problem they
/// establish. whole_sequence_tables: see Problem.
Problem validate(const Library &lib, const char *fn, const torch::Tensor &q,
                 const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &params,
                 const Options &opts, bool whole_sequence_tables = false);

/// `t` defined, dense, and on a device the artifact has code for; `expected_shape`
/// (e.g. "[B, H, Nq, d]") for the messages.
void check_tensor(const Library &lib, const char *fn, const char *name, const torch::Tensor &t,
                  const char *expected_shape);

/// A forward-produced or gradient tensor against the problem: device, shape and dtype
/// (row_stats: row_max / row_sum, float32 on the GPU).
void check_aux(const Library &lib, const char *fn, const char *name, const torch::Tensor &t,
               const Problem &p, std::vector<int64_t> shape, const char *shape_doc,
               bool row_stats = false);

/// The checks of one key block's call of context parallelism (attn/partial.h).
void check_block(const Library &lib, const char *fn, const Problem &p, bool row_offset);

/// A tensor's sizes as "[2, 3, 4]", for messages.
std::string shape_str(const torch::Tensor &t);

} // namespace detail
} // namespace attn

#endif // ATTN_RUNTIME_VALIDATION_H
