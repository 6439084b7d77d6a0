//===- ops.cpp - TORCH_LIBRARY(attn): the dispatcher ops and their autograd ----===//
//
// Every tensor op has CPU and CUDA kernels (the same functions: they validate and
// dispatch to the artifact's CPU or GPU code) and an Autograd kernel; their fake
// implementations, for FakeTensor / torch.compile / torch.export, are the Python
// module attn.ops (named here with set_python_module; `import attn.ops` registers them).
//
// attn::attention is the one autograd implementation: its Autograd kernel is a
// torch::autograd::Function that calls attn::attention_forward and, in backward,
// attn::attention_backward through the dispatcher, so AOTAutograd traces both ops
// into its forward and backward graphs. The C++ API attn::attention() calls this op.
// The other ops are not differentiable: their Autograd kernel calls the op below
// autograd, so their outputs never require grad.
//
//===----------------------------------------------------------------------===//
#include "attn/modules.h"
#include "attn/runtime.h"
#include "internal.h"

#include <torch/autograd.h>
#include <torch/library.h>

namespace attn {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using OptionalTensor = std::optional<Tensor>;
using OptionalInputs = std::optional<at::TensorList>; // Tensor[]? inputs
using ForwardSig = std::tuple<Tensor, Tensor, Tensor>(c10::string_view, const Tensor &,
                                                      const Tensor &, const Tensor &,
                                                      const Tensor &, bool,
                                                      const OptionalTensor &,
                                                      const OptionalInputs &,
                                                      const OptionalTensor &, int64_t,
                                                      const OptionalTensor &);
using BackwardSig = std::tuple<Tensor, Tensor, Tensor, Tensor, std::vector<Tensor>>(
    c10::string_view, const Tensor &, const Tensor &, const Tensor &, const Tensor &,
    const Tensor &, const Tensor &, const Tensor &, const Tensor &, bool,
    const OptionalTensor &, const OptionalInputs &, const OptionalTensor &, int64_t,
    const OptionalTensor &);

template <class Sig> c10::TypedOperatorHandle<Sig> typed_op(const char *name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

const c10::TypedOperatorHandle<ForwardSig> &forward_op() {
  static const auto op = typed_op<ForwardSig>("attn::attention_forward");
  return op;
}

const c10::TypedOperatorHandle<BackwardSig> &backward_op() {
  static const auto op = typed_op<BackwardSig>("attn::attention_backward");
  return op;
}

using detail::dtype_tag;
using detail::load_artifact;
using detail::make_options;
using detail::pair_cost;

// --- CPU and CUDA kernels ----------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> forward_kernel(c10::string_view artifact, const Tensor &q,
                                                  const Tensor &k, const Tensor &v,
                                                  const Tensor &params, bool is_causal,
                                                  const OptionalTensor &key_lengths,
                                                  const OptionalInputs &inputs,
                                                  const OptionalTensor &query_start, int64_t key_start,
                                                  const OptionalTensor &key_starts) {
  return attention_forward(load_artifact(artifact), q, k, v, params,
                           make_options(is_causal, key_lengths, inputs, query_start, key_start,
                                        key_starts));
}

/// attn::attention below autograd (inference mode, or called below the Autograd key).
Tensor attention_kernel(c10::string_view artifact, const Tensor &q, const Tensor &k,
                        const Tensor &v, const Tensor &params, bool is_causal,
                        const OptionalTensor &key_lengths, const OptionalInputs &inputs,
                        const OptionalTensor &query_start, int64_t key_start,
                        const OptionalTensor &key_starts) {
  return std::get<0>(forward_kernel(artifact, q, k, v, params, is_causal, key_lengths, inputs,
                                    query_start, key_start, key_starts));
}

std::tuple<Tensor, Tensor, Tensor, Tensor, std::vector<Tensor>>
backward_kernel(c10::string_view artifact, const Tensor &q, const Tensor &k, const Tensor &v,
                const Tensor &params, const Tensor &out, const Tensor &row_max,
                const Tensor &row_sum, const Tensor &grad_out, bool is_causal,
                const OptionalTensor &key_lengths, const OptionalInputs &inputs,
                const OptionalTensor &query_start, int64_t key_start,
                const OptionalTensor &key_starts) {
  return attention_backward(load_artifact(artifact), q, k, v, params, out, row_max, row_sum,
                            grad_out,
                            make_options(is_causal, key_lengths, inputs, query_start, key_start,
                                         key_starts));
}

Tensor weights_kernel(c10::string_view artifact, const Tensor &q, const Tensor &k,
                      const Tensor &params, bool is_causal, const OptionalTensor &key_lengths,
                      const OptionalInputs &inputs, const OptionalTensor &query_start,
                      int64_t key_start, const OptionalTensor &key_starts) {
  return attention_weights(load_artifact(artifact), q, k, params,
                           make_options(is_causal, key_lengths, inputs, query_start, key_start,
                                        key_starts));
}

/// The schema's SymInt is concrete here (real tensors).
Tensor key_lengths_kernel(const Tensor &key_padding_mask, c10::SymInt keys) {
  return key_lengths_from_padding(key_padding_mask, keys.expect_int());
}

Tensor keep_from_bias_kernel(const Tensor &bias, c10::string_view argument,
                             c10::string_view kernel) {
  return keep_from_bias(bias, argument, kernel);
}

std::string manifest_kernel(c10::string_view artifact) {
  return load_artifact(artifact)->manifest_text();
}

/// The cost of a multiply-add that the runtime's thread estimate takes for a CPU call of
/// this dtype and these head dims (work_split.h pair_cost on the manifest's cpu_cost):
/// bench/pair_costs.py sets it beside what it measures.
double cpu_pair_cost_kernel(c10::string_view artifact, c10::ScalarType dtype, int64_t d, int64_t dv,
                            bool backward) {
  return detail::cpu_pair_cost(*load_artifact(artifact), dtype, d, dv, backward);
}

// --- autograd ------------------------------------------------------------------

class AttentionFunction : public torch::autograd::Function<AttentionFunction> {
public:
  /// `inputs` is a TensorList so that each tensor input is a variable of the graph.
  static Tensor forward(AutogradContext *ctx, c10::string_view artifact, const Tensor &q,
                        const Tensor &k, const Tensor &v, const Tensor &params, bool is_causal,
                        const OptionalTensor &key_lengths, const OptionalTensor &query_start,
                        int64_t key_start, const OptionalTensor &key_starts,
                        at::TensorList inputs) {
    auto [out, row_max, row_sum] =
        forward_op().call(artifact, q, k, v, params, is_causal, key_lengths, inputs, query_start,
                          key_start, key_starts);
    // Saved: inputs, O and the O(B·H·Nq) row statistics; nothing N×N.
    std::vector<Tensor> saved{q,       k,   v, params, out, row_max,
                              row_sum, key_lengths.value_or(Tensor()),
                              query_start.value_or(Tensor()), key_starts.value_or(Tensor())};
    saved.insert(saved.end(), inputs.begin(), inputs.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["artifact"] = std::string(artifact);
    ctx->saved_data["is_causal"] = is_causal;
    ctx->saved_data["key_start"] = key_start;
    return out;
  }

  static variable_list backward(AutogradContext *ctx, variable_list grad_outputs) {
    // The engine enables grad mode in backward only for create_graph=True. The
    // kernels' gradients are not themselves differentiable: refuse rather than hand
    // back gradients that silently have no graph.
    TORCH_CHECK(!torch::GradMode::is_enabled(),
                "attn::attention: double backward (create_graph=True) is not supported: the "
                "compiled backward kernel is not differentiable");
    auto saved = ctx->get_saved_variables();
    const std::vector<Tensor> inputs(saved.begin() + 10, saved.end());
    // One per forward argument after ctx, each tensor input counted.
    variable_list grads(10 + inputs.size());
    const Tensor &grad = grad_outputs.at(0);
    if (!grad.defined())
      return grads;
    auto optional = [](const Tensor &t) { return t.defined() ? OptionalTensor(t) : OptionalTensor(); };
    const std::string &artifact = ctx->saved_data["artifact"].toStringRef();
    auto [dq, dk, dv, dparams, dinputs] = backward_op().call(
        artifact, saved[0], saved[1], saved[2], saved[3], saved[4], saved[5], saved[6], grad,
        ctx->saved_data["is_causal"].toBool(), optional(saved[7]), at::TensorList(inputs),
        optional(saved[8]), ctx->saved_data["key_start"].toInt(), optional(saved[9]));
    grads[1] = dq;
    grads[2] = dk;
    grads[3] = dv;
    grads[4] = dparams;
    const auto &declared = load_artifact(artifact)->manifest().inputs;
    for (size_t n = 0; n < inputs.size(); ++n)
      if (declared[n].learnable)
        grads[10 + n] = dinputs[n];
    return grads;
  }
};

Tensor attention_autograd(c10::string_view artifact, const Tensor &q, const Tensor &k,
                          const Tensor &v, const Tensor &params, bool is_causal,
                          const OptionalTensor &key_lengths, const OptionalInputs &inputs,
                          const OptionalTensor &query_start, int64_t key_start,
                          const OptionalTensor &key_starts) {
  at::TensorList tables = inputs.value_or(at::TensorList());
  auto lib = load_artifact(artifact);
  const auto &declared = lib->manifest().inputs;
  for (size_t n = 0; n < std::min(declared.size(), tables.size()); ++n)
    TORCH_CHECK(declared[n].learnable || !tables[n].requires_grad(), "attn::attention: input ",
                declared[n].name, " requires grad but kernel ", lib->manifest().kernel,
                " declares it without 'learnable', so it gets no gradient; declare it "
                "`attn.input @",
                declared[n].name, " learnable : ...` or pass it detached");
  Tensor checked = detail::checked_params(*lib, "attn::attention", q, k, v, params,
                                          make_options(is_causal, key_lengths, inputs,
                                                       query_start, key_start, key_starts));
  return AttentionFunction::apply(artifact, q, k, v, checked, is_causal, key_lengths, query_start,
                                  key_start, key_starts, tables);
}

} // namespace

namespace detail {
Options make_options(bool is_causal, const std::optional<torch::Tensor> &key_lengths,
                     const std::optional<at::TensorList> &inputs,
                     const std::optional<torch::Tensor> &query_start, int64_t key_start,
                     const std::optional<torch::Tensor> &key_starts) {
  Options o;
  o.is_causal = is_causal;
  o.key_lengths = key_lengths;
  o.query_start = query_start;
  o.key_start = key_start;
  o.key_starts = key_starts;
  if (inputs)
    o.inputs = inputs->vec();
  return o;
}

void not_differentiable(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  at::AutoDispatchBelowADInplaceOrView guard;
  op.callBoxed(stack);
}

const c10::TypedOperatorHandle<AttentionSig> &attention_op() {
  static const auto op = typed_op<AttentionSig>("attn::attention");
  return op;
}
} // namespace detail

} // namespace attn

TORCH_LIBRARY(attn, m) {
  m.set_python_module("attn.ops");
  m.def("attention(str artifact, Tensor q, Tensor k, Tensor v, Tensor params, "
        "bool is_causal=False, Tensor? key_lengths=None, Tensor[]? inputs=None, "
        "Tensor? query_start=None, int key_start=0, Tensor? key_starts=None) -> Tensor");
  m.def("attention_forward(str artifact, Tensor q, Tensor k, Tensor v, Tensor params, "
        "bool is_causal=False, Tensor? key_lengths=None, Tensor[]? inputs=None, "
        "Tensor? query_start=None, int key_start=0, Tensor? key_starts=None) "
        "-> (Tensor, Tensor, Tensor)");
  m.def("attention_backward(str artifact, Tensor q, Tensor k, Tensor v, Tensor params, "
        "Tensor out, Tensor row_max, Tensor row_sum, Tensor grad_out, bool is_causal=False, "
        "Tensor? key_lengths=None, Tensor[]? inputs=None, Tensor? query_start=None, "
        "int key_start=0, Tensor? key_starts=None) "
        "-> (Tensor, Tensor, Tensor, Tensor, Tensor[])");
  m.def("attention_weights(str artifact, Tensor q, Tensor k, Tensor params, "
        "bool is_causal=False, Tensor? key_lengths=None, Tensor[]? inputs=None, "
        "Tensor? query_start=None, int key_start=0, Tensor? key_starts=None) -> Tensor");
  m.def("key_lengths_from_padding(Tensor key_padding_mask, SymInt keys) -> Tensor");
  m.def("keep_from_bias(Tensor bias, str argument, str kernel) -> Tensor");
  // No tensor argument: one kernel for every dispatch key. attn.Kernel reads it once,
  // at load, so compiled graphs never call it.
  m.def("manifest(str artifact) -> str", &attn::manifest_kernel);
  m.def("cpu_pair_cost(str artifact, ScalarType dtype, int d, int dv, bool backward) -> float",
        &attn::cpu_pair_cost_kernel);
  // Process-wide settings of the CPU runtime (attn/runtime.h), read by each call.
  m.def("min_thread_work_ns() -> float", &attn::min_thread_work_nanos);
  m.def("set_min_thread_work_ns(float nanoseconds) -> float", &attn::set_min_thread_work_nanos);
}

#define ATTN_BACKEND_KERNELS(m)                                                                \
  m.impl("attention", &attn::attention_kernel);                                                \
  m.impl("attention_forward", &attn::forward_kernel);                                          \
  m.impl("attention_backward", &attn::backward_kernel);                                        \
  m.impl("attention_weights", &attn::weights_kernel);                                          \
  m.impl("key_lengths_from_padding", &attn::key_lengths_kernel);                               \
  m.impl("keep_from_bias", &attn::keep_from_bias_kernel)

TORCH_LIBRARY_IMPL(attn, CPU, m) { ATTN_BACKEND_KERNELS(m); }
TORCH_LIBRARY_IMPL(attn, CUDA, m) { ATTN_BACKEND_KERNELS(m); }

TORCH_LIBRARY_IMPL(attn, Autograd, m) {
  m.impl("attention", &attn::attention_autograd);
  for (const char *op :
       {"attention_forward", "attention_backward", "attention_weights", "key_lengths_from_padding",
        "keep_from_bias"})
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&attn::detail::not_differentiable>());
}
