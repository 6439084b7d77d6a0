//===- attention.cpp - the attention entry points ------------------------===//
//
// attn::attention (through the dispatcher op, runtime/ops.cpp, which owns autograd),
// attention_forward / attention_backward, and the ops of context parallelism: each
// validates its arguments (validation.h) and runs the device's kernels
// (cpu_dispatch.h, gpu_launch.h). No attention math here.
//
//===----------------------------------------------------------------------===//
#include "attn/partial.h"
#include "attn/runtime.h"
#include "cpu_dispatch.h"
#include "gpu_launch.h"
#include "internal.h"
#include "validation.h"

namespace attn {

namespace {

using torch::Tensor;
using detail::check_aux;
using detail::check_block;
using detail::check_tensor;
using detail::Problem;
using detail::run_merge;
using detail::run_partial_forward;
using detail::shape_str;
using detail::validate;

/// The device's forward: the artifact's Triton kernels or its CPU entry points.
std::tuple<Tensor, Tensor, Tensor> run_forward(const Library &lib, const Problem &p,
                                               const Tensor &q, const Tensor &k,
                                               const Tensor &v, const Tensor &params,
                                               const std::vector<Tensor> &inputs) {
  if (p.cuda())
    return detail::run_forward_triton(lib, p, q, k, v, params, inputs);
  return detail::run_forward_cpu(lib, p, q, k, v, params, inputs);
}

/// The device's backward, as run_forward.
std::tuple<Tensor, Tensor, Tensor, Tensor, std::vector<Tensor>>
run_backward(const Library &lib, const Problem &p, const Tensor &q, const Tensor &k,
             const Tensor &v, const Tensor &params, const std::vector<Tensor> &inputs,
             const Tensor &out, const Tensor &row_max, const Tensor &row_sum,
             const Tensor &grad_out) {
  if (p.cuda())
    return detail::run_backward_triton(lib, p, q, k, v, params, inputs, out, row_max, row_sum,
                                       grad_out);
  return detail::run_backward_cpu(lib, p, q, k, v, params, inputs, out, row_max, row_sum,
                                  grad_out);
}

Tensor empty_params(const Tensor &params, const Tensor &q) {
  if (params.defined())
    return params;
  return torch::empty({0}, q.options());
}

} // namespace

namespace detail {
Tensor checked_params(const Library &lib, const char *fn, const Tensor &q, const Tensor &k,
                      const Tensor &v, const Tensor &params, const Options &opts) {
  if (params.defined() && q.defined() && k.defined() && v.defined())
    return params;
  validate(lib, fn, q, k, v, params, opts);
  return empty_params(params, q);
}
} // namespace detail

Tensor attention(const std::shared_ptr<const Library> &lib, const Tensor &q, const Tensor &k,
                 const Tensor &v, const Tensor &params, const Options &opts) {
  TORCH_CHECK(lib, "attn::attention: lib is null, expected a Library from attn::Library::load");
  return detail::attention_op().call(lib->path(), q, k, v, params, opts.is_causal,
                                     opts.key_lengths, std::optional<at::TensorList>(opts.inputs),
                                     opts.query_start, opts.key_start, opts.key_starts);
}

std::tuple<Tensor, Tensor, Tensor> attention_forward(const std::shared_ptr<const Library> &lib,
                                                     const Tensor &q, const Tensor &k,
                                                     const Tensor &v, const Tensor &params,
                                                     const Options &opts) {
  TORCH_CHECK(lib, "attn::attention_forward: lib is null, expected a Library from "
                   "attn::Library::load");
  Problem p = validate(*lib, "attn::attention_forward", q, k, v, params, opts);
  torch::NoGradGuard no_grad;
  return run_forward(*lib, p, q, k, v, empty_params(params, q), opts.inputs);
}

std::tuple<Tensor, Tensor, Tensor, Tensor, std::vector<Tensor>>
attention_backward(const std::shared_ptr<const Library> &lib, const Tensor &q, const Tensor &k,
                   const Tensor &v, const Tensor &params, const Tensor &out,
                   const Tensor &row_max, const Tensor &row_sum, const Tensor &grad_out,
                   const Options &opts) {
  const char *fn = "attn::attention_backward";
  TORCH_CHECK(lib, fn, ": lib is null, expected a Library from attn::Library::load");
  Problem p = validate(*lib, fn, q, k, v, params, opts);
  check_aux(*lib, fn, "out", out, p, {p.B, p.H, p.Nq, p.dv}, "[B, H, Nq, dv]");
  check_aux(*lib, fn, "row_max", row_max, p, {p.B, p.H, p.Nq}, "[B, H, Nq]", true);
  check_aux(*lib, fn, "row_sum", row_sum, p, {p.B, p.H, p.Nq}, "[B, H, Nq]", true);
  check_aux(*lib, fn, "grad_out", grad_out, p, {p.B, p.H, p.Nq, p.dv}, "[B, H, Nq, dv]");
  torch::NoGradGuard no_grad;
  return run_backward(*lib, p, q, k, v, empty_params(params, q), opts.inputs, out, row_max,
                      row_sum, grad_out);
}

std::tuple<Tensor, Tensor, Tensor, Tensor>
attention_partial_forward(const std::shared_ptr<const Library> &lib, const Tensor &q,
                          const Tensor &k, const Tensor &v, const Tensor &params,
                          const Options &opts) {
  const char *fn = "attn::attention_partial_forward";
  TORCH_CHECK(lib, fn, ": lib is null, expected a Library from attn::Library::load");
  Problem p = validate(*lib, fn, q, k, v, params, opts, true);
  check_block(*lib, fn, p, true);
  torch::NoGradGuard no_grad;
  return run_partial_forward(*lib, p, q, k, v, empty_params(params, q), opts.inputs);
}

std::tuple<Tensor, Tensor, Tensor>
attention_merge(const std::shared_ptr<const Library> &lib, const Tensor &q, const Tensor &k,
                const Tensor &v, const Tensor &params, const Tensor &o_parts,
                const Tensor &max_parts, const Tensor &sum_parts, const Tensor &count_parts,
                const Options &opts) {
  const char *fn = "attn::attention_merge";
  TORCH_CHECK(lib, fn, ": lib is null, expected a Library from attn::Library::load");
  Problem p = validate(*lib, fn, q, k, v, params, opts, true);
  check_block(*lib, fn, p, true);
  check_tensor(*lib, fn, "o_parts", o_parts, "[B, H, S*Nq, dv]");
  const int64_t splits = o_parts.dim() == 4 && p.Nq > 0 ? o_parts.size(2) / p.Nq : 0;
  TORCH_CHECK(splits >= 1 && o_parts.size(2) == splits * p.Nq, fn,
              ": o_parts must have shape [B, H, S*Nq, dv] with S >= 1 (the S partial states "
              "of q's ", p.Nq, " rows, state s in rows [s*Nq, (s+1)*Nq)), got ",
              shape_str(o_parts));
  check_aux(*lib, fn, "o_parts", o_parts, p, {p.B, p.H, splits * p.Nq, p.dv}, "[B, H, S*Nq, dv]");
  for (const auto &[name, t] : {std::pair<const char *, const Tensor &>{"max_parts", max_parts},
                                {"sum_parts", sum_parts},
                                {"count_parts", count_parts}})
    check_aux(*lib, fn, name, t, p, {p.B, p.H, splits * p.Nq}, "[B, H, S*Nq]");
  torch::NoGradGuard no_grad;
  return run_merge(*lib, p, empty_params(params, q), opts.inputs, o_parts, max_parts, sum_parts,
                   count_parts);
}

std::tuple<Tensor, Tensor, Tensor, Tensor, std::vector<Tensor>>
attention_partial_backward(const std::shared_ptr<const Library> &lib, const Tensor &q,
                           const Tensor &k, const Tensor &v, const Tensor &params,
                           const Tensor &out, const Tensor &row_max, const Tensor &row_sum,
                           const Tensor &grad_out, const Options &opts, bool row_offset) {
  const char *fn = "attn::attention_partial_backward";
  TORCH_CHECK(lib, fn, ": lib is null, expected a Library from attn::Library::load");
  Problem p = validate(*lib, fn, q, k, v, params, opts, true);
  check_block(*lib, fn, p, row_offset);
  check_aux(*lib, fn, "out", out, p, {p.B, p.H, p.Nq, p.dv}, "[B, H, Nq, dv]");
  check_aux(*lib, fn, "row_max", row_max, p, {p.B, p.H, p.Nq}, "[B, H, Nq]", true);
  check_aux(*lib, fn, "row_sum", row_sum, p, {p.B, p.H, p.Nq}, "[B, H, Nq]", true);
  check_aux(*lib, fn, "grad_out", grad_out, p, {p.B, p.H, p.Nq, p.dv}, "[B, H, Nq, dv]");
  p.key_shift = row_offset ? 0 : 1;
  torch::NoGradGuard no_grad;
  return run_backward(*lib, p, q, k, v, empty_params(params, q), opts.inputs, out, row_max,
                      row_sum, grad_out);
}

} // namespace attn

