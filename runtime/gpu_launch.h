//===- gpu_launch.h - a call's GPU kernels (the Triton backend) -----------===//
#ifndef ATTN_RUNTIME_GPU_LAUNCH_H
#define ATTN_RUNTIME_GPU_LAUNCH_H

#include "validation.h"

#include <optional>
#include <tuple>
#include <vector>

namespace attn {
namespace detail {

struct KeyChunks {
  int64_t count = 0, keys = 0; // chunks, and keys per chunk (a multiple of the key tile)
};

/// The decode forward's key chunks for a call of `rows` query rows over `keys` keys
/// (`group` query heads per kv head, batch_kv_heads = B·H_kv) on a GPU of `sm_count`
/// SMs, or none where attn_fwd (block_m query rows per program) serves it: at most
/// rule.max_rows rows and fewer attn_fwd programs than SMs; then chunks of whole key
/// tiles (block_n keys; decode_block_m rows of the GQA group per program) for about
/// rule.programs_per_sm programs per SM, at most one chunk per tile. The rule of
/// attn.triton_backend.decode_split (its arguments in this order), pinned by the same
/// cases in work_split_test and test_gpu_target_choice.
std::optional<KeyChunks> decode_key_chunks(int64_t rows, int64_t keys, int64_t group,
                                           int64_t batch_kv_heads, int64_t block_m,
                                           int64_t block_n, int64_t decode_block_m,
                                           int64_t sm_count, const TritonDecodeRule &rule);

/// out [B, H, Nq, dv], row_max and row_sum [B, H, Nq] (float32) of a validated CUDA call.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor>
run_forward_triton(const Library &lib, const Problem &p, const torch::Tensor &q,
                   const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &params,
                   const std::vector<torch::Tensor> &inputs);

/// dq, dk, dv, dparams and the tensor inputs' gradients of a validated CUDA call.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor,
           std::vector<torch::Tensor>>
run_backward_triton(const Library &lib, const Problem &p, const torch::Tensor &q,
                    const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &params,
                    const std::vector<torch::Tensor> &inputs, const torch::Tensor &out,
                    const torch::Tensor &row_max, const torch::Tensor &row_sum,
                    const torch::Tensor &grad_out);

} // namespace detail
} // namespace attn

#endif // ATTN_RUNTIME_GPU_LAUNCH_H
