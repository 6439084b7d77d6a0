// attn::MultiheadAttention (runtime/include/attn/modules.h) against
// torch::nn::MultiheadAttention, with a softmax artifact compiled from
// examples/normalizers/softmax.mlir, and its normalizer params with MultiMax's; the
// named extents of a tensor input (examples/families/fox.mlir) through attn::attention;
// and the C++ snippets of docs/usage.md and docs/tools.md as written.
#include "attn/modules.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace {

std::string artifact(const char *name) {
  std::string dir = ATTN_TEST_ARTIFACT_DIR;
  return dir + "/" + name + ".so";
}

// torch's module with the same projections as ours.
torch::nn::MultiheadAttention reference_of(attn::MultiheadAttention &ours) {
  const int64_t E = ours->options.embed_dim(), H = ours->options.num_heads();
  torch::nn::MultiheadAttention ref(torch::nn::MultiheadAttentionOptions(E, H));
  ref->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  ref->in_proj_weight.copy_(
      torch::cat({ours->q_proj->weight, ours->k_proj->weight, ours->v_proj->weight}));
  ref->in_proj_bias.copy_(torch::cat({ours->q_proj->bias, ours->k_proj->bias, ours->v_proj->bias}));
  ref->out_proj->weight.copy_(ours->out_proj->weight);
  ref->out_proj->bias.copy_(ours->out_proj->bias);
  return ref;
}

double max_abs_diff(const torch::Tensor &a, const torch::Tensor &b) {
  return (a - b).abs().max().item<double>();
}

TEST(MultiheadAttention, SoftmaxMatchesTorch) {
  torch::manual_seed(0);
  attn::MultiheadAttention ours(24, 3, artifact("softmax"));
  ours->to(torch::kDouble);
  auto ref = reference_of(ours);
  const int64_t B = 2, L = 7, S = 9;
  auto x = torch::randn({L, B, 24}, torch::kDouble);
  auto mem = torch::randn({S, B, 24}, torch::kDouble);
  auto padding = torch::arange(S).unsqueeze(0) >= torch::tensor({S, int64_t{5}}).unsqueeze(1);

  auto [got, weights] = ours(x, mem, mem, padding, /*need_weights=*/true);
  auto [want, want_weights] = ref(x, mem, mem, padding);
  EXPECT_LT(max_abs_diff(got, want), 1e-12);
  ASSERT_EQ(weights.sizes(), want_weights.sizes());
  EXPECT_LT(max_abs_diff(weights, want_weights), 1e-12);

  auto causal = torch::triu(torch::full({L, L}, -INFINITY, torch::kDouble), 1);
  auto got_causal = std::get<0>(ours(x, x, x, torch::Tensor(), false, /*is_causal=*/true));
  auto want_causal = std::get<0>(ref(x, x, x, torch::Tensor(), false, causal));
  EXPECT_LT(max_abs_diff(got_causal, want_causal), 1e-12);
  EXPECT_FALSE(std::get<1>(ours(x, x, x)).defined()) << "weights without need_weights";

  got_causal.sum().backward();
  want_causal.sum().backward();
  EXPECT_LT(max_abs_diff(ours->q_proj->weight.grad(), ref->in_proj_weight.grad().slice(0, 0, 24)),
            1e-10);
}

TEST(MultiheadAttention, BatchFirst) {
  torch::manual_seed(1);
  attn::MultiheadAttention seq_first(16, 2, artifact("softmax"));
  attn::MultiheadAttention batch_first(
      attn::MultiheadAttentionOptions(16, 2, artifact("softmax")).batch_first(true));
  {
    torch::NoGradGuard no_grad;
    for (auto &item : seq_first->named_parameters())
      batch_first->named_parameters()[item.key()].copy_(item.value());
  }
  auto x = torch::randn({2, 5, 16});
  auto a = std::get<0>(batch_first(x, x, x));
  auto b = std::get<0>(seq_first(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1)));
  EXPECT_LT(max_abs_diff(a, b.transpose(0, 1)), 1e-6);
}

TEST(MultiheadAttention, NormalizerParamsAreTrainedParameters) {
  torch::manual_seed(2);
  attn::MultiheadAttention mha(
      attn::MultiheadAttentionOptions(16, 2, artifact("multimax")).batch_first(true));
  auto named = mha->named_parameters();
  for (const char *name : {"tb1", "td1", "b1", "d1", "tb2", "td2", "b2", "d2"})
    EXPECT_TRUE(named.contains(std::string("normalizer.") + name)) << name;
  auto before = mha->normalizer_params().detach().clone();
  torch::optim::SGD opt(mha->parameters(), torch::optim::SGDOptions(0.5));
  auto x = torch::randn({2, 12, 16}) * 3;
  std::get<0>(mha(x, x, x)).pow(2).mean().backward();
  ASSERT_TRUE(mha->normalizer->get("tb1").grad().defined());
  EXPECT_GT(mha->normalizer->get("tb1").grad().abs().item<double>(), 0);
  opt.step();
  EXPECT_FALSE(torch::equal(before, mha->normalizer_params().detach()));
}

// A kernel with the mask input takes key padding of any pattern, as torch does: a bool
// mask with holes, and for an additive input a float mask of -inf and other values.
TEST(MultiheadAttention, KeyPaddingOfAnyPatternWithTheMaskInput) {
  for (const char *kind : {"bool", "additive"}) {
    SCOPED_TRACE(kind);
    torch::manual_seed(1);
    attn::MultiheadAttention ours(
        attn::MultiheadAttentionOptions(24, 3, artifact((std::string("softmax_") + kind +
                                                         "_mask").c_str())));
    ours->to(torch::kDouble);
    auto ref = reference_of(ours);
    const int64_t B = 2, L = 6, S = 9;
    auto x = torch::randn({L, B, 24}, torch::kDouble).requires_grad_();
    auto mem = torch::randn({S, B, 24}, torch::kDouble);
    auto holes = torch::zeros({B, S}, torch::kBool);
    holes[0][1] = holes[0][4] = holes[1][0] = holes[1][8] = true;
    // Bool, and for an additive input also torch's float form (-inf = padded).
    std::vector<torch::Tensor> masks{holes};
    if (std::string(kind) == "additive")
      masks.push_back(torch::zeros({B, S}, torch::kDouble).masked_fill(holes, -INFINITY));
    for (const auto &mask : masks) {
      auto [got, weights] = ours(x, mem, mem, mask, /*need_weights=*/true);
      auto [want, want_weights] = ref(x, mem, mem, holes);
      EXPECT_LT(max_abs_diff(got, want), 1e-12);
      EXPECT_LT(max_abs_diff(weights, want_weights), 1e-12);
      torch::Tensor got_sum = got.sum(), want_sum = want.sum();
      auto grad = torch::autograd::grad({got_sum}, {x}, {}, /*retain_graph=*/true)[0];
      auto want_grad = torch::autograd::grad({want_sum}, {x}, {}, /*retain_graph=*/true)[0];
      EXPECT_LT(max_abs_diff(grad, want_grad), 1e-10);
    }
    if (std::string(kind) == "additive") {
      // Other float values are added to the score; libtorch's module takes them as an
      // attn_mask (one batch entry: its [L, S] form).
      auto bias = torch::zeros({1, S}, torch::kDouble).masked_fill(holes.slice(0, 0, 1), -INFINITY);
      bias[0][2] = 0.75;
      auto x0 = x.slice(1, 0, 1), mem0 = mem.slice(1, 0, 1);
      auto got = std::get<0>(ours(x0, mem0, mem0, bias));
      auto want = std::get<0>(ref->forward(x0, mem0, mem0, {}, false, bias.expand({L, S})));
      EXPECT_LT(max_abs_diff(got, want), 1e-12);
    }
    // No mask: every key takes part.
    auto [got, weights] = ours(x, mem, mem);
    auto [want, want_weights] = ref(x, mem, mem);
    EXPECT_LT(max_abs_diff(got, want), 1e-12);
  }
  attn::MultiheadAttention keep_table(
      attn::MultiheadAttentionOptions(8, 2, artifact("softmax_bool_mask")).batch_first(true));
  keep_table->to(torch::kDouble);
  auto x = torch::randn({2, 5, 8}, torch::kDouble);
  auto biased = torch::zeros({2, 5}, torch::kDouble);
  biased[0][3] = 0.5;
  try {
    keep_table(x, x, x, biased);
    ADD_FAILURE() << "a float key_padding_mask of other values than 0, -inf reached a keep table";
  } catch (const c10::Error &e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("--attn-mask=additive"),
              std::string::npos)
        << e.what_without_backtrace();
  }
  EXPECT_THROW(keep_table(x, x, x, torch::zeros({2, 4}, torch::kBool)), c10::Error);
}

TEST(MultiheadAttention, Errors) {
  attn::MultiheadAttention mha(
      attn::MultiheadAttentionOptions(8, 2, artifact("softmax")).batch_first(true));
  auto x = torch::randn({2, 5, 8});
  auto holes = torch::zeros({2, 5}, torch::kBool);
  holes[0][1] = true;
  try {
    mha(x, x, x, holes);
    ADD_FAILURE() << "a non-trailing key_padding_mask was accepted";
  } catch (const c10::Error &e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("only trailing padding"),
              std::string::npos);
  }
  EXPECT_THROW(mha(x[0], x, x), c10::Error);
  EXPECT_THROW(attn::MultiheadAttention(10, 3, artifact("softmax")), c10::Error);
}

TEST(TensorInputs, NamedExtentsAreCheckedAtEveryCall) {
  // FoX's c is declared [B, H, Nq]; passed as [B, N, H] it is refused naming the dim.
  auto lib = attn::Library::load(artifact("fox"));
  const int64_t B = 2, H = 4, N = 37;
  auto q = torch::randn({B, H, N, 16}, torch::kDouble);
  auto c = torch::cumsum(torch::log_sigmoid(torch::randn({B, H, N}, torch::kDouble)), -1);
  auto params = lib->initial_params(torch::kDouble);
  attn::Options opts;
  opts.inputs = {c};
  EXPECT_TRUE(torch::isfinite(attn::attention(lib, q, q, q, params, opts)).all().item<bool>());
  opts.inputs = {c.transpose(1, 2).contiguous()};
  try {
    attn::attention(lib, q, q, q, params, opts);
    ADD_FAILURE() << "c of shape [B, N, H] was accepted";
  } catch (const c10::Error &e) {
    EXPECT_NE(std::string(e.what_without_backtrace())
                  .find("input c has extent 37 in dim 1, expected H = 4 (the heads of q"),
              std::string::npos)
        << e.what_without_backtrace();
  }
}

TEST(KeyLengthsFromPadding, BoolAndAdditiveFloatMasks) {
  auto padded = torch::arange(5).unsqueeze(0) >= torch::tensor({5, 2, 0}).unsqueeze(1);
  auto additive = torch::zeros({3, 5}).masked_fill(padded, -INFINITY);
  for (const auto &mask : {padded, additive}) {
    auto lengths = attn::key_lengths_from_padding(mask, 5);
    EXPECT_EQ(lengths.scalar_type(), torch::kLong);
    EXPECT_TRUE(torch::equal(lengths, torch::tensor({5, 2, 0}, torch::kLong)));
  }
  // What only a kernel with the attn_mask input runs: NotImplementedError, naming it.
  auto expect_not_implemented = [](const torch::Tensor &mask, const char *what) {
    try {
      attn::key_lengths_from_padding(mask, 5);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const c10::NotImplementedError &e) {
      const std::string msg = e.what_without_backtrace();
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_NE(msg.find("needs the kernel's attn_mask input"), std::string::npos) << msg;
      EXPECT_NE(msg.find("attn-compile --attn-mask=bool"), std::string::npos) << msg;
    }
  };
  auto holes = padded.clone();
  holes[1][0] = true;
  expect_not_implemented(holes, "padding that is not trailing");
  expect_not_implemented(additive.masked_fill(additive.isinf(), -1e9),
                         "a float mask with values other than 0 and -inf");
  EXPECT_THROW(attn::key_lengths_from_padding(padded.to(torch::kLong), 5), c10::Error);
  EXPECT_THROW(attn::key_lengths_from_padding(padded, 6), c10::Error);
}

// The C++ snippets of docs/usage.md and docs/tools.md, verbatim (test_docs.py checks that
// they are), run in the artifacts' directory, as the pages' relative paths assume.
TEST(DocsSnippets, CallAnArtifactAndTheModule) {
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(ATTN_TEST_ARTIFACT_DIR);
  torch::manual_seed(3);
  auto q = torch::randn({2, 4, 16, 64}, torch::requires_grad());
  auto k = torch::randn({2, 4, 16, 64}, torch::requires_grad());
  auto v = torch::randn({2, 4, 16, 64}, torch::requires_grad());
  {
    auto lib = attn::Library::load("tanhmax.so");
    attn::Options opts;
    opts.is_causal = true;
    torch::Tensor out = attn::attention(lib, q, k, v, lib->initial_params(), opts);  // autograd-aware
    out.sum().backward();
    EXPECT_EQ(out.sizes(), q.sizes());
    ASSERT_TRUE(q.grad().defined());
    EXPECT_GT(q.grad().abs().sum().item<double>(), 0);
  }
  auto x = torch::randn({2, 10, 64});
  {
    attn::MultiheadAttention mha(attn::MultiheadAttentionOptions(64, 4, "multimax.so").batch_first(true));
    auto [out, weights] = mha->forward(x, x, x, /*key_padding_mask=*/{}, /*need_weights=*/true,
                                       /*is_causal=*/true);
    EXPECT_EQ(out.sizes(), x.sizes());
    EXPECT_EQ(weights.sizes(), (std::vector<int64_t>{2, 10, 10}));
    EXPECT_EQ(weights[0][0][1].item<double>(), 0);   // causal: the first query sees one key
  }
  std::filesystem::current_path(cwd);
}

} // namespace
