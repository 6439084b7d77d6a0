//===- modules.h - torch::nn modules backed by attn artifacts ---*- C++ -*-===//
//
// attn::MultiheadAttention follows torch::nn::MultiheadAttention (and the Python
// attn.MultiheadAttention): input and output projections, heads, masks, and the
// kernel's learnable normalizer params registered as parameters "normalizer.<name>",
// so optimisers and named_parameters()/torch::save see them.
//
//   attn::MultiheadAttention mha(attn::MultiheadAttentionOptions(64, 4, "multimax.so")
//                                    .batch_first(true));
//   auto [out, weights] = mha(x, x, x, /*key_padding_mask=*/{}, /*need_weights=*/false,
//                             /*is_causal=*/true);
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_MODULES_H
#define ATTN_MODULES_H

#include "attn/runtime.h"

#include <torch/torch.h>

#include <memory>
#include <string>
#include <tuple>

namespace attn {

struct MultiheadAttentionOptions {
  /// Loads the artifact at `artifact` (attn::Library::load).
  MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads, const std::string &artifact);
  MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads,
                            std::shared_ptr<const Library> library);

  TORCH_ARG(int64_t, embed_dim);
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(std::shared_ptr<const Library>, library);
  /// Biases in the four projections.
  TORCH_ARG(bool, bias) = true;
  /// Feature sizes of key and value inputs; 0 means embed_dim.
  TORCH_ARG(int64_t, kdim) = 0;
  TORCH_ARG(int64_t, vdim) = 0;
  /// Inputs and output are [batch, seq, feature] instead of [seq, batch, feature].
  TORCH_ARG(bool, batch_first) = false;
};

class MultiheadAttentionImpl : public torch::nn::Cloneable<MultiheadAttentionImpl> {
public:
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads, const std::string &artifact)
      : MultiheadAttentionImpl(MultiheadAttentionOptions(embed_dim, num_heads, artifact)) {}
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions &options);

  void reset() override;

  /// query [Nq, B, E] (or [B, Nq, E] with batch_first), key [Nk, B, kdim], value
  /// [Nk, B, vdim]. key_padding_mask: [B, Nk], bool (true = ignore) or additive float
  /// (-inf = ignore). Any pattern with a kernel compiled with the mask input
  /// (attn-compile --attn-mask=bool, or =additive, which also adds other float values to
  /// the score, as torch does); with any other kernel trailing padding only (see
  /// key_lengths_from_padding). Returns (output,
  /// weights); weights are defined only with need_weights: [B, Nq, Nk] averaged over
  /// heads, or [B, H, Nq, Nk] without average_attn_weights (see attention_weights():
  /// for inspection, no gradient).
  std::tuple<torch::Tensor, torch::Tensor>
  forward(const torch::Tensor &query, const torch::Tensor &key, const torch::Tensor &value,
          const torch::Tensor &key_padding_mask = {}, bool need_weights = false,
          bool is_causal = false, bool average_attn_weights = true);

  /// The kernel's params (scalars and flattened weights) as one [P] tensor in manifest
  /// order (differentiable).
  torch::Tensor normalizer_params() const;

  void pretty_print(std::ostream &stream) const override;

  MultiheadAttentionOptions options;
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, out_proj{nullptr};
  torch::nn::ParameterDict normalizer{nullptr};

protected:
  FORWARD_HAS_DEFAULT_ARGS({3, torch::nn::AnyValue(torch::Tensor())},
                           {4, torch::nn::AnyValue(false)}, {5, torch::nn::AnyValue(false)},
                           {6, torch::nn::AnyValue(true)})
};
TORCH_MODULE(MultiheadAttention);

/// key_padding_mask [B, Nk], bool (true = ignore) or torch's additive float form (-inf =
/// ignore, 0 = keep) -> int64 key lengths [B] on the CPU. attn kernels take padding as key
/// lengths, so only trailing padding (on a suffix of each row) is accepted; any other
/// pattern, or other float values, raises c10::NotImplementedError (it needs a kernel with
/// the attn_mask input, attn-compile --attn-mask, which Python's attn.masks fills), never a
/// different mask. Also the op attn::key_lengths_from_padding.
torch::Tensor key_lengths_from_padding(const torch::Tensor &key_padding_mask, int64_t keys);

/// The keep table (bool, same shape) of `bias`, a float mask of 0 (kept) and -inf
/// (masked) for a kernel whose mask input is a keep table (attn-compile --attn-mask=bool);
/// other values raise c10::NotImplementedError naming `argument`, `kernel` and the
/// additive kind. Also the op attn::keep_from_bias, so that torch.compile traces the
/// check without a graph break.
torch::Tensor keep_from_bias(const torch::Tensor &bias, c10::string_view argument,
                             c10::string_view kernel);

} // namespace attn

#endif // ATTN_MODULES_H
