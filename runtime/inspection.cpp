//===- inspection.cpp - attention weights, for inspection only -------------===//
//
// Training never forms the N×N weights w_ij = g(s_ij)/C_i. To look at them (plots,
// probing) they come out of the compiled forward itself: with V the identity of the
// keys, O_i = Σ_j w_ij e_j is row i of the weights. They are therefore exactly the
// weights the kernel applies, masks and learnable params included, and this file holds
// no attention math.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime.h"

namespace attn {

torch::Tensor attention_weights(const std::shared_ptr<const Library> &lib, const torch::Tensor &q,
                                const torch::Tensor &k, const torch::Tensor &params,
                                const Options &opts) {
  const char *fn = "attn::attention_weights";
  TORCH_CHECK(lib, fn, ": lib is null, expected a Library from attn::Library::load");
  TORCH_CHECK(q.defined() && q.dim() == 4, fn, ": q must be a 4-D tensor [B, H, Nq, d]");
  TORCH_CHECK(k.defined() && k.dim() == 4, fn, ": k must be a 4-D tensor [B, H_kv, Nk, d]");
  const int64_t B = q.size(0), H = q.size(1), Nq = q.size(2), Nk = k.size(2);
  TORCH_CHECK(B * H * Nq * Nk <= kMaxAttentionWeights, fn, ": the weights of q ", q.sizes(),
              " and k ", k.sizes(), " would have ", B * H * Nq * Nk, " elements, more than the ",
              kMaxAttentionWeights,
              " allowed for inspection; pass fewer batches, heads or queries at a time");
  // GPU kernels need dv == d, which V = identity (dv = Nk) breaks; the artifact's CPU
  // code computes the same weights.
  if (!q.device().is_cpu()) {
    TORCH_CHECK(lib->has_device("cpu"), fn, ": q is on ", q.device(),
                " and the weights are computed by the artifact's CPU code, but artifact ",
                lib->path(), " has none");
    Options cpu_opts = opts;
    if (opts.key_lengths.has_value() && opts.key_lengths->defined())
      cpu_opts.key_lengths = opts.key_lengths->cpu();
    for (c10::optional<torch::Tensor> *starts : {&cpu_opts.query_start, &cpu_opts.key_starts})
      if (starts->has_value() && (*starts)->defined())
        *starts = (*starts)->cpu();
    for (torch::Tensor &input : cpu_opts.inputs)
      input = input.cpu();
    torch::Tensor cpu_params = params.defined() ? params.cpu() : params;
    return attention_weights(lib, q.cpu(), k.cpu(), cpu_params, cpu_opts).to(q.device());
  }
  // The identity is broadcast over batch and heads (stride 0), so only Nk×Nk is allocated;
  // it has k's heads (grouped-query attention: fewer than q's).
  torch::Tensor identity = torch::eye(Nk, q.options()).expand({k.size(0), k.size(1), Nk, Nk});
  return std::get<0>(attention_forward(lib, q, k, identity, params, opts));
}

} // namespace attn
