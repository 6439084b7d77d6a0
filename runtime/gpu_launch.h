//===- gpu_launch.h - a call's GPU kernels (the Triton backend) -----------===//
#ifndef ATTN_RUNTIME_GPU_LAUNCH_H
#define ATTN_RUNTIME_GPU_LAUNCH_H

#include "validation.h"

#include <tuple>
#include <vector>

namespace attn {
namespace detail {

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
