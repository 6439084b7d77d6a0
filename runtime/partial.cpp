//===- partial.cpp - the ops of context parallelism (attn/partial.h) ----------===//
//
// attn::attention_partial_forward, attn::attention_merge and
// attn::attention_partial_backward: one query block against one key block, for
// attn.context_parallel (runtime/python/attn/context_parallel.py), which owns the
// ring and the autograd. Not differentiable themselves; their fakes are in attn.ops.
//
//===----------------------------------------------------------------------===//
#include "attn/partial.h"
#include "internal.h"

#include <torch/library.h>

namespace attn {
namespace {

using detail::load_artifact;

using torch::Tensor;
using OptionalTensor = std::optional<Tensor>;
using OptionalInputs = std::optional<at::TensorList>;

/// The Options of a block's call: its first query's and first key's absolute positions.
Options block_options(bool is_causal, const OptionalTensor &key_lengths,
                      const OptionalInputs &inputs, int64_t query_start, int64_t key_start) {
  return detail::make_options(is_causal, key_lengths, inputs,
                              torch::tensor(query_start, torch::dtype(torch::kLong)), key_start);
}

std::tuple<Tensor, Tensor, Tensor, Tensor>
partial_forward_kernel(c10::string_view artifact, const Tensor &q, const Tensor &k,
                       const Tensor &v, const Tensor &params, bool is_causal,
                       const OptionalTensor &key_lengths, const OptionalInputs &inputs,
                       int64_t query_start, int64_t key_start) {
  return attention_partial_forward(
      load_artifact(artifact), q, k, v, params,
      block_options(is_causal, key_lengths, inputs, query_start, key_start));
}

std::tuple<Tensor, Tensor, Tensor>
merge_kernel(c10::string_view artifact, const Tensor &q, const Tensor &k, const Tensor &v,
             const Tensor &params, const Tensor &o_parts, const Tensor &max_parts,
             const Tensor &sum_parts, const Tensor &count_parts, const OptionalTensor &key_lengths,
             const OptionalInputs &inputs, int64_t query_start, int64_t key_start) {
  return attention_merge(load_artifact(artifact), q, k, v, params, o_parts, max_parts, sum_parts,
                         count_parts,
                         block_options(false, key_lengths, inputs, query_start, key_start));
}

std::tuple<Tensor, Tensor, Tensor, Tensor, std::vector<Tensor>>
partial_backward_kernel(c10::string_view artifact, const Tensor &q, const Tensor &k,
                        const Tensor &v, const Tensor &params, const Tensor &out,
                        const Tensor &row_max, const Tensor &row_sum, const Tensor &grad_out,
                        bool row_offset, bool is_causal, const OptionalTensor &key_lengths,
                        const OptionalInputs &inputs, int64_t query_start, int64_t key_start) {
  return attention_partial_backward(
      load_artifact(artifact), q, k, v, params, out, row_max, row_sum, grad_out,
      block_options(is_causal, key_lengths, inputs, query_start, key_start), row_offset);
}

} // namespace
} // namespace attn

TORCH_LIBRARY_FRAGMENT(attn, m) {
  m.def("attention_partial_forward(str artifact, Tensor q, Tensor k, Tensor v, Tensor params, "
        "bool is_causal=False, Tensor? key_lengths=None, Tensor[]? inputs=None, "
        "int query_start=0, int key_start=0) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("attention_merge(str artifact, Tensor q, Tensor k, Tensor v, Tensor params, "
        "Tensor o_parts, Tensor max_parts, Tensor sum_parts, Tensor count_parts, "
        "Tensor? key_lengths=None, Tensor[]? inputs=None, int query_start=0, int key_start=0) "
        "-> (Tensor, Tensor, Tensor)");
  m.def("attention_partial_backward(str artifact, Tensor q, Tensor k, Tensor v, "
        "Tensor params, Tensor out, Tensor row_max, Tensor row_sum, Tensor grad_out, "
        "bool row_offset, bool is_causal=False, Tensor? key_lengths=None, "
        "Tensor[]? inputs=None, int query_start=0, int key_start=0) "
        "-> (Tensor, Tensor, Tensor, Tensor, Tensor[])");
}

// The CUDA kernels are the CPU ones: they refuse GPU tensors with a message.
#define ATTN_PARTIAL_KERNELS(m)                                                                \
  m.impl("attention_partial_forward", &attn::partial_forward_kernel);                          \
  m.impl("attention_merge", &attn::merge_kernel);                                              \
  m.impl("attention_partial_backward", &attn::partial_backward_kernel)

TORCH_LIBRARY_IMPL(attn, CPU, m) { ATTN_PARTIAL_KERNELS(m); }
TORCH_LIBRARY_IMPL(attn, CUDA, m) { ATTN_PARTIAL_KERNELS(m); }

TORCH_LIBRARY_IMPL(attn, Autograd, m) {
  for (const char *op : {"attention_partial_forward", "attention_merge", "attention_partial_backward"})
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&attn::detail::not_differentiable>());
}
