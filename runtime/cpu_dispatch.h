//===- cpu_dispatch.h - a call's CPU entry points, in parallel ------------===//
#ifndef ATTN_RUNTIME_CPU_DISPATCH_H
#define ATTN_RUNTIME_CPU_DISPATCH_H

#include "validation.h"

#include <tuple>
#include <vector>

namespace attn {
namespace detail {

/// out [B, H, Nq, dv], row_max and row_sum [B, H, Nq] of a validated CPU call.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor>
run_forward_cpu(const Library &lib, const Problem &p, const torch::Tensor &q,
                const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &params,
                const std::vector<torch::Tensor> &inputs);

/// dq, dk, dv, dparams and the tensor inputs' gradients (an empty [0] tensor for an
/// input that is not learnable) of a validated CPU call.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor,
           std::vector<torch::Tensor>>
run_backward_cpu(const Library &lib, const Problem &p, const torch::Tensor &q,
                 const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &params,
                 const std::vector<torch::Tensor> &inputs, const torch::Tensor &out,
                 const torch::Tensor &row_max, const torch::Tensor &row_sum,
                 const torch::Tensor &grad_out);

/// The S partial states [B, H, S·Nq(, dv)] folded and finished by the artifact's merge
/// (abi.h, attn_merge_T): out, row_max, row_sum.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor>
run_merge(const Library &lib, const Problem &p, const torch::Tensor &params,
          const std::vector<torch::Tensor> &inputs, const torch::Tensor &o_parts,
          const torch::Tensor &max_parts, const torch::Tensor &sum_parts,
          const torch::Tensor &count_parts);

/// One key block's partial forward (context parallelism): out, row_max, row_sum and
/// row_count, the rows' running state over the block's keys (abi.h, partial = 1).
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor>
run_partial_forward(const Library &lib, const Problem &p, const torch::Tensor &q,
                    const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &params,
                    const std::vector<torch::Tensor> &inputs);

} // namespace detail
} // namespace attn

#endif // ATTN_RUNTIME_CPU_DISPATCH_H
