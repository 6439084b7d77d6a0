//===- modules.cpp - torch::nn modules backed by attn artifacts -------------===//
#include "attn/modules.h"

#include <cmath>
#include <utility>

namespace attn {

namespace {

/// The kernel's mask input (attn-compile --attn-mask, the pass attn-add-mask-input): a
/// rank-4 input named attn_mask, i8 (a keep table) or float (a score bias).
const TensorInput *mask_input_of(const Manifest &manifest) {
  for (const TensorInput &input : manifest.inputs)
    if (input.name == "attn_mask" && input.shape == std::vector<int64_t>(4, -1) &&
        (input.element == "i8" || input.element == "float"))
      return &input;
  return nullptr;
}

/// key_padding_mask [B, Nk] (bool: true = padded; float: 0 kept, -inf padded, other
/// values added to the score) as the mask input `input` of kernel `kernel`, [B, 1, 1, Nk]:
/// the kernel clamps its reads to the table's extents, so the size-1 dims broadcast over
/// heads and queries without a copy. A keep table (int8) for an i8 input, a bias of q's
/// dtype for a float one; without a mask, a [1, 1, 1, 1] table that keeps every pair.
torch::Tensor mask_table(const std::string &kernel, const TensorInput &input,
                         const torch::Tensor &mask, int64_t batch, int64_t keys,
                         const torch::TensorOptions &q) {
  const bool keep_table = input.element == "i8";
  if (!mask.defined())
    return keep_table ? torch::ones({1, 1, 1, 1}, q.dtype(torch::kInt8))
                      : torch::zeros({1, 1, 1, 1}, q);
  const bool is_bool = mask.scalar_type() == torch::kBool;
  TORCH_CHECK((is_bool || at::isFloatingType(mask.scalar_type())) && mask.dim() == 2 &&
                  mask.size(0) == batch && mask.size(1) == keys,
              "key_padding_mask: expected a bool or floating [", batch, ", ", keys,
              "] tensor, got ", c10::toString(mask.scalar_type()), " ", mask.sizes());
  torch::Tensor table;
  if (keep_table) {
    torch::Tensor keep =
        is_bool ? mask.logical_not() : keep_from_bias(mask, "key_padding_mask", kernel);
    table = keep.to(q.device(), torch::kInt8);
  } else {
    table = is_bool ? torch::zeros({batch, keys}, q).masked_fill(mask.to(q.device()), -INFINITY)
                    : mask.to(q.device(), q.dtype().toScalarType());
  }
  return table.view({batch, 1, 1, keys});
}

} // namespace

MultiheadAttentionOptions::MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads,
                                                     const std::string &artifact)
    : MultiheadAttentionOptions(embed_dim, num_heads, Library::load(artifact)) {}

MultiheadAttentionOptions::MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads,
                                                     std::shared_ptr<const Library> library)
    : embed_dim_(embed_dim), num_heads_(num_heads), library_(std::move(library)) {}

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions &options)
    : options(options) {
  reset();
}

void MultiheadAttentionImpl::reset() {
  const int64_t E = options.embed_dim(), H = options.num_heads();
  TORCH_CHECK(options.library(), "attn::MultiheadAttention: no artifact, expected a Library");
  TORCH_CHECK(E > 0 && H > 0 && E % H == 0, "attn::MultiheadAttention: embed_dim ", E,
              " must be a positive multiple of num_heads ", H);
  const int64_t kdim = options.kdim() > 0 ? options.kdim() : E;
  const int64_t vdim = options.vdim() > 0 ? options.vdim() : E;
  auto linear = [&](int64_t in) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, E).bias(options.bias()));
  };
  q_proj = register_module("q_proj", linear(E));
  k_proj = register_module("k_proj", linear(kdim));
  v_proj = register_module("v_proj", linear(vdim));
  out_proj = register_module("out_proj", linear(E));
  normalizer = register_module("normalizer", torch::nn::ParameterDict());
  // The flat [P] params vector, split into the manifest's named scalars and weights.
  const Manifest &m = options.library()->manifest();
  torch::Tensor initial = options.library()->initial_params(q_proj->weight.scalar_type());
  int64_t offset = 0;
  for (size_t i = 0; i < m.param_names.size(); ++i) {
    const std::vector<int64_t> &shape = m.param_shapes[i];
    const int64_t numel = c10::multiply_integers(shape);
    normalizer->insert(m.param_names[i],
                       initial.narrow(0, offset, numel).view(shape).clone().requires_grad_(true));
    offset += numel;
  }
}

torch::Tensor MultiheadAttentionImpl::normalizer_params() const {
  const auto &names = options.library()->manifest().param_names;
  if (names.empty())
    return torch::zeros({0}, q_proj->weight.options());
  std::vector<torch::Tensor> values;
  for (const auto &name : names)
    values.push_back(normalizer->get(name).reshape({-1}));
  return torch::cat(values);
}

std::tuple<torch::Tensor, torch::Tensor>
MultiheadAttentionImpl::forward(const torch::Tensor &query, const torch::Tensor &key,
                                const torch::Tensor &value,
                                const torch::Tensor &key_padding_mask, bool need_weights,
                                bool is_causal, bool average_attn_weights) {
  const char *fn = "attn::MultiheadAttention";
  for (const auto &[name, t] : {std::pair{"query", &query}, {"key", &key}, {"value", &value}})
    TORCH_CHECK(t->defined() && t->dim() == 3, fn, ": ", name,
                " must be a 3-D tensor ([seq, batch, feature], or [batch, seq, feature] with "
                "batch_first), got ",
                t->defined() ? t->sizes() : c10::IntArrayRef{});
  auto batch_major = [&](const torch::Tensor &t) {
    return options.batch_first() ? t : t.transpose(0, 1);
  };
  torch::Tensor q_in = batch_major(query), k_in = batch_major(key), v_in = batch_major(value);
  const int64_t B = q_in.size(0), Nq = q_in.size(1), Nk = k_in.size(1);
  const int64_t H = options.num_heads(), E = options.embed_dim(), dh = E / H;
  auto heads = [&](const torch::Tensor &x, int64_t length) {
    return x.view({B, length, H, dh}).transpose(1, 2);
  };
  torch::Tensor q = heads(q_proj->forward(q_in), Nq);
  torch::Tensor k = heads(k_proj->forward(k_in), Nk);
  torch::Tensor v = heads(v_proj->forward(v_in), Nk);

  Options opts;
  opts.is_causal = is_causal;
  const Manifest &manifest = options.library()->manifest();
  if (const TensorInput *mask_input = mask_input_of(manifest)) {
    TORCH_CHECK(manifest.inputs.size() == 1, fn, ": kernel ", manifest.kernel,
                " reads tensor inputs besides attn_mask, which this module does not pass; call "
                "attn::attention with Options::inputs");
    opts.inputs = {mask_table(manifest.kernel, *mask_input, key_padding_mask, B, Nk, q.options())};
  } else if (key_padding_mask.defined()) {
    opts.key_lengths = key_lengths_from_padding(key_padding_mask, Nk);
  }
  torch::Tensor params = normalizer_params();
  torch::Tensor o = attention(options.library(), q, k, v, params, opts);
  torch::Tensor out = out_proj->forward(o.transpose(1, 2).reshape({B, Nq, E}));
  if (!options.batch_first())
    out = out.transpose(0, 1);

  torch::Tensor weights;
  if (need_weights) {
    torch::NoGradGuard no_grad;
    weights = attention_weights(options.library(), q, k, params, opts);
    if (average_attn_weights)
      weights = weights.mean(1);
  }
  return {out, weights};
}

void MultiheadAttentionImpl::pretty_print(std::ostream &stream) const {
  const Manifest &m = options.library()->manifest();
  stream << "attn::MultiheadAttention(embed_dim=" << options.embed_dim()
         << ", num_heads=" << options.num_heads() << ", kernel=" << m.kernel << ", params=[";
  for (size_t i = 0; i < m.param_names.size(); ++i)
    stream << (i ? ", " : "") << m.param_names[i];
  stream << "], batch_first=" << (options.batch_first() ? "true" : "false") << ")";
}

torch::Tensor keep_from_bias(const torch::Tensor &bias, c10::string_view argument,
                             c10::string_view kernel) {
  TORCH_CHECK(bias.defined() && at::isFloatingType(bias.scalar_type()), argument,
              ": expected a floating tensor of 0 (kept) and -inf (masked), got ",
              bias.defined() ? c10::toString(bias.scalar_type()) : "an undefined tensor");
  torch::Tensor keep = bias == 0;
  TORCH_CHECK_NOT_IMPLEMENTED((keep | bias.isneginf()).all().item<bool>(), "a float ", argument,
                              " with values other than 0 and -inf needs an additive mask input, "
                              "but kernel ",
                              kernel,
                              " has a bool one (a keep table): compile it with "
                              "attn.compile(source, attn_mask='additive') (attn-compile "
                              "--attn-mask=additive)");
  return keep;
}

torch::Tensor key_lengths_from_padding(const torch::Tensor &key_padding_mask, int64_t keys) {
  const torch::Tensor &mask = key_padding_mask;
  const bool is_bool = mask.defined() && mask.scalar_type() == torch::kBool;
  TORCH_CHECK(mask.defined() && (is_bool || at::isFloatingType(mask.scalar_type())) &&
                  mask.dim() == 2 && mask.size(1) == keys,
              "key_padding_mask: expected a bool or floating [batch, ", keys, "] tensor, got ",
              mask.defined() ? c10::toString(mask.scalar_type()) : "an undefined tensor", " ",
              mask.defined() ? mask.sizes() : c10::IntArrayRef{});
  const char *later =
      " needs the kernel's attn_mask input: only trailing padding (true, or -inf, on a suffix "
      "of each row) runs as key lengths; any pattern runs with a kernel compiled by "
      "attn-compile --attn-mask=bool (Python: attn.compile(source, attn_mask=\"bool\")), "
      "through Python's attn.MultiheadAttention or attn.attention";
  // torch's additive form: -inf marks a padded key, 0 a kept one.
  torch::Tensor padded = is_bool ? mask : mask.isneginf();
  TORCH_CHECK_NOT_IMPLEMENTED(is_bool || (padded | (mask == 0)).all().item<bool>(),
                              "key_padding_mask: a float mask with values other than 0 and -inf",
                              later);
  torch::Tensor lengths = padded.logical_not().sum(1);
  torch::Tensor positions = torch::arange(keys, lengths.options());
  TORCH_CHECK_NOT_IMPLEMENTED(
      torch::equal(padded, positions.unsqueeze(0) >= lengths.unsqueeze(1)),
      "key_padding_mask: padding that is not trailing (a padded key before a kept one)", later);
  return lengths.to(torch::kLong).cpu();
}

} // namespace attn
