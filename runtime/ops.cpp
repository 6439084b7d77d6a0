//===- ops.cpp - TORCH_LIBRARY(attn) ops for Python ------------------------===//
//
// Registered as CompositeImplicitAutograd kernels (m.def with a function): they run
// above autograd, so attn::attention's torch::autograd::Function builds the graph.
//
//===----------------------------------------------------------------------===//
#include "attn/modules.h"
#include "attn/runtime.h"

#include <torch/library.h>

namespace {

using torch::Tensor;

attn::Options make_options(bool is_causal, const c10::optional<Tensor> &key_lengths,
                           const c10::optional<std::vector<Tensor>> &inputs) {
  attn::Options o;
  o.is_causal = is_causal;
  o.key_lengths = key_lengths;
  o.inputs = inputs.value_or(std::vector<Tensor>());
  return o;
}

Tensor op_attention(const std::string &artifact, const Tensor &q, const Tensor &k,
                    const Tensor &v, const Tensor &params, bool is_causal,
                    const c10::optional<Tensor> &key_lengths,
                    const c10::optional<std::vector<Tensor>> &inputs) {
  return attn::attention(attn::Library::load(artifact), q, k, v, params,
                         make_options(is_causal, key_lengths, inputs));
}

std::tuple<Tensor, Tensor, Tensor> op_attention_forward(const std::string &artifact,
                                                        const Tensor &q, const Tensor &k,
                                                        const Tensor &v, const Tensor &params,
                                                        bool is_causal,
                                                        const c10::optional<Tensor> &key_lengths,
                                                        const c10::optional<std::vector<Tensor>> &inputs) {
  return attn::attention_forward(attn::Library::load(artifact), q, k, v, params,
                                 make_options(is_causal, key_lengths, inputs));
}

Tensor op_attention_weights(const std::string &artifact, const Tensor &q, const Tensor &k,
                            const Tensor &params, bool is_causal,
                            const c10::optional<Tensor> &key_lengths,
                            const c10::optional<std::vector<Tensor>> &inputs) {
  return attn::attention_weights(attn::Library::load(artifact), q, k, params,
                                 make_options(is_causal, key_lengths, inputs));
}

std::string op_manifest(const std::string &artifact) {
  return attn::Library::load(artifact)->manifest_text();
}

} // namespace

TORCH_LIBRARY(attn, m) {
  m.def("attention(str artifact, Tensor q, Tensor k, Tensor v, Tensor params, "
        "bool is_causal=False, Tensor? key_lengths=None, Tensor[]? inputs=None) -> Tensor",
        &op_attention);
  m.def("attention_forward(str artifact, Tensor q, Tensor k, Tensor v, Tensor params, "
        "bool is_causal=False, Tensor? key_lengths=None, Tensor[]? inputs=None) "
        "-> (Tensor, Tensor, Tensor)",
        &op_attention_forward);
  m.def("attention_weights(str artifact, Tensor q, Tensor k, Tensor params, "
        "bool is_causal=False, Tensor? key_lengths=None, Tensor[]? inputs=None) -> Tensor",
        &op_attention_weights);
  m.def("manifest(str artifact) -> str", &op_manifest);
  m.def("key_lengths_from_padding(Tensor key_padding_mask, int keys) -> Tensor",
        &attn::key_lengths_from_padding);
}
