// attn-train: the NT delayed-addition demo of train.py in C++ LibTorch.
//
// A tiny causal transformer (token + position embedding, pre-LayerNorm blocks of
// multi-head attention and a tanh feed-forward layer, linear readout) learns the
// N{base}T{tau} task x_t = (x_{t-1} + x_{t-1-tau}) mod base (Gros, expressive attention,
// NT tasks). The attention of every block is attn::attention() on a compiled artifact;
// the normalizer's learnable parameters (MultiMax's 8, sigmoid's bias, ...) are
// registered as module parameters and trained with the rest.
//
//   build/bin/attn-compile examples/normalizers/softmax.mlir -o /tmp/softmax.so
//   build/bin/attn-train /tmp/softmax.so [--steps 600] [--base 16] [--tau 2]
//       [--seq-len 32] [--batch 32] [--d-model 64] [--heads 2] [--layers 1]
//       [--lr 3e-3] [--seed 0] [--log-every 25] [--threads 2] [--float64]
//       [--checkpoint FILE [--checkpoint-every N] [--resume]] [--history FILE.csv]
//
// With --checkpoint, the model, the optimizer, the data generator and the step are
// saved every --checkpoint-every steps, at the end and on Ctrl-C / SIGTERM (which then
// stops the run); --resume continues it exactly where it stopped.
#include "attn/modules.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <string>

namespace {

struct Config {
  std::string artifact;
  int64_t steps = 600, base = 16, tau = 2, seq_len = 32, batch = 32;
  int64_t d_model = 64, heads = 2, layers = 1, log_every = 25, threads = 2;
  double lr = 3e-3;
  uint64_t seed = 0;
  bool float64 = false;
  std::string checkpoint, history;
  int64_t checkpoint_every = 0;
  bool resume = false;
};


// [batch, len + 1] sequences of the NT task.
torch::Tensor nt_batch(const Config &c, at::Generator &gen) {
  auto x = torch::empty({c.batch, c.seq_len + 1}, torch::kLong);
  x.slice(1, 0, c.tau + 1)
      .copy_(torch::randint(0, c.base, {c.batch, c.tau + 1}, gen, torch::kLong));
  auto acc = x.accessor<int64_t, 2>();
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t t = c.tau + 1; t <= c.seq_len; ++t)
      acc[b][t] = (acc[b][t - 1] + acc[b][t - 1 - c.tau]) % c.base;
  return x;
}

struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t d_model, int64_t heads, std::shared_ptr<const attn::Library> lib) {
    ln1 = register_module("ln1", torch::nn::LayerNorm(
                                     torch::nn::LayerNormOptions({d_model})));
    // the drop-in module: projections, heads and the normalizer's learnable params
    // (registered as "attn.normalizer.<name>")
    attn = register_module(
        "attn", attn::MultiheadAttention(
                    attn::MultiheadAttentionOptions(d_model, heads, std::move(lib))
                        .batch_first(true)));
    ln2 = register_module("ln2", torch::nn::LayerNorm(
                                     torch::nn::LayerNormOptions({d_model})));
    ff1 = register_module("ff1", torch::nn::Linear(d_model, 4 * d_model));
    ff2 = register_module("ff2", torch::nn::Linear(4 * d_model, d_model));
  }

  torch::Tensor forward(torch::Tensor x) {
    auto h = ln1->forward(x);
    x = x + std::get<0>(attn(h, h, h, torch::Tensor(), /*need_weights=*/false,
                              /*is_causal=*/true));
    return x + ff2->forward(torch::tanh(ff1->forward(ln2->forward(x))));
  }

  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  attn::MultiheadAttention attn{nullptr};
  torch::nn::Linear ff1{nullptr}, ff2{nullptr};
};
TORCH_MODULE(Block);

struct TinyTransformerImpl : torch::nn::Module {
  TinyTransformerImpl(const Config &c, std::shared_ptr<const attn::Library> lib) {
    tok = register_module("tok", torch::nn::Embedding(c.base, c.d_model));
    pos = register_parameter("pos", 0.1 * torch::randn({c.seq_len, c.d_model}));
    for (int64_t i = 0; i < c.layers; ++i)
      blocks->push_back(Block(c.d_model, c.heads, lib));
    register_module("blocks", blocks);
    ln = register_module("ln", torch::nn::LayerNorm(
                                   torch::nn::LayerNormOptions({c.d_model})));
    out = register_module("out", torch::nn::Linear(c.d_model, c.base));
  }

  torch::Tensor forward(const torch::Tensor &x) {
    auto h = tok->forward(x) + pos.slice(0, 0, x.size(1));
    for (auto &b : *blocks) h = b->as<Block>()->forward(h);
    return out->forward(ln->forward(h));
  }

  torch::nn::Embedding tok{nullptr};
  torch::Tensor pos;
  torch::nn::ModuleList blocks;
  torch::nn::LayerNorm ln{nullptr};
  torch::nn::Linear out{nullptr};
};
TORCH_MODULE(TinyTransformer);

// loss (cross-entropy) and accuracy over the positions t >= tau, whose next symbol
// is determined by the context
std::pair<torch::Tensor, double> loss_and_accuracy(TinyTransformer &model,
                                                   const torch::Tensor &x, int64_t tau) {
  auto logits = model->forward(x.slice(1, 0, x.size(1) - 1)).slice(1, tau);
  auto target = x.slice(1, 1).slice(1, tau);
  auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                   target.reshape({-1}));
  double acc = logits.argmax(-1).eq(target).to(torch::kDouble).mean().item<double>();
  return {loss, acc};
}

volatile std::sig_atomic_t stop_signal = 0;
extern "C" void request_stop(int signum) { stop_signal = signum; }

// Model, optimizer, data generator and step in one archive, written atomically (a
// crash mid-write leaves the previous checkpoint).
void save_checkpoint(const std::string &path, TinyTransformer &model,
                     torch::optim::Optimizer &opt, at::Generator &gen, int64_t step) {
  torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
  model->save(model_archive);
  opt.save(optimizer_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("generator", gen.get_state());
  archive.write("step", torch::tensor(step));
  const std::string tmp = path + ".tmp";
  archive.save_to(tmp);
  TORCH_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot move ", tmp, " to ", path);
}

int64_t load_checkpoint(const std::string &path, TinyTransformer &model,
                        torch::optim::Optimizer &opt, at::Generator &gen) {
  torch::serialize::InputArchive archive, model_archive, optimizer_archive;
  archive.load_from(path);
  archive.read("model", model_archive);
  archive.read("optimizer", optimizer_archive);
  model->load(model_archive);
  opt.load(optimizer_archive);
  torch::Tensor state, step;
  archive.read("generator", state);
  archive.read("step", step);
  gen.set_state(state);
  return step.item<int64_t>();
}

[[noreturn]] void usage(const char *argv0) {
  std::fprintf(stderr,
               "usage: %s ARTIFACT.so [--steps N] [--base N] [--tau T] [--seq-len L]\n"
               "       [--batch B] [--d-model D] [--heads H] [--layers N] [--lr X]\n"
               "       [--seed S] [--log-every N] [--threads N] [--float64]\n"
               "       [--checkpoint FILE [--checkpoint-every N] [--resume]] [--history CSV]\n",
               argv0);
  std::exit(2);
}

Config parse(int argc, char **argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char * {
      if (i + 1 >= argc) usage(argv[0]);
      return argv[++i];
    };
    if (a == "--steps") c.steps = std::atoll(next());
    else if (a == "--base") c.base = std::atoll(next());
    else if (a == "--tau") c.tau = std::atoll(next());
    else if (a == "--seq-len") c.seq_len = std::atoll(next());
    else if (a == "--batch") c.batch = std::atoll(next());
    else if (a == "--d-model") c.d_model = std::atoll(next());
    else if (a == "--heads") c.heads = std::atoll(next());
    else if (a == "--layers") c.layers = std::atoll(next());
    else if (a == "--lr") c.lr = std::atof(next());
    else if (a == "--seed") c.seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--log-every") c.log_every = std::atoll(next());
    else if (a == "--threads") c.threads = std::atoll(next());
    else if (a == "--float64") c.float64 = true;
    else if (a == "--checkpoint") c.checkpoint = next();
    else if (a == "--checkpoint-every") c.checkpoint_every = std::atoll(next());
    else if (a == "--resume") c.resume = true;
    else if (a == "--history") c.history = next();
    else if (a == "-h" || a == "--help") usage(argv[0]);
    else if (!a.empty() && a[0] != '-' && c.artifact.empty()) c.artifact = a;
    else usage(argv[0]);
  }
  if (c.artifact.empty() || c.d_model % c.heads != 0 || c.log_every <= 0 ||
      (c.resume && c.checkpoint.empty()))
    usage(argv[0]);
  return c;
}

} // namespace

int main(int argc, char **argv) {
  Config c = parse(argc, argv);
  torch::set_num_threads(static_cast<int>(c.threads));
  const torch::Dtype dtype = c.float64 ? torch::kDouble : torch::kFloat;
  try {
    auto lib = attn::Library::load(c.artifact);
    const auto &man = lib->manifest();
    std::cout << "artifact " << c.artifact << ": kernel " << man.kernel << ", normalizer "
              << man.normalizer << ", " << man.param_names.size() << " learnable param(s)\n"
              << "NT task N=" << c.base << " T=" << c.tau << ", L=" << c.seq_len << "; "
              << c.layers << " layer(s), d_model " << c.d_model << ", " << c.heads
              << " head(s)" << std::endl;

    torch::manual_seed(c.seed);
    TinyTransformer model(c, lib);
    model->to(dtype);
    torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(c.lr));
    auto gen = at::detail::createCPUGenerator(c.seed + 1);

    int64_t start = 0;
    if (c.resume) {
      start = load_checkpoint(c.checkpoint, model, opt, gen);
      std::printf("resumed from %s at step %lld\n", c.checkpoint.c_str(),
                  static_cast<long long>(start));
    }
    std::ofstream history;
    if (!c.history.empty()) {
      history.open(c.history, c.resume ? std::ios::app : std::ios::trunc);
      TORCH_CHECK(history, "cannot write --history ", c.history);
      // Every digit of the double, so a resumed run can be compared bit for bit.
      history << std::setprecision(std::numeric_limits<double>::max_digits10);
      if (!c.resume) history << "step,loss,acc\n";
    }
    std::signal(SIGINT, request_stop);
    std::signal(SIGTERM, request_stop);

    auto t0 = std::chrono::steady_clock::now();
    double first = 0, last = 0;
    int64_t step = start;
    while (step < c.steps && !stop_signal) {
      ++step;
      auto x = nt_batch(c, gen);
      auto [loss, acc] = loss_and_accuracy(model, x, c.tau);
      opt.zero_grad();
      loss.backward();
      opt.step();
      const double l = loss.item<double>();
      if (history.is_open()) history << step << "," << l << "," << acc << "\n";
      if (step <= 10) first += l / std::min<int64_t>(10, c.steps);
      if (step > c.steps - 10) last += l / std::min<int64_t>(10, c.steps);
      if (step == start + 1 || step % c.log_every == 0) {
        double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("step %5lld/%lld  loss %.4f  acc %.3f  (%.1f steps/s)\n",
                    static_cast<long long>(step), static_cast<long long>(c.steps), l, acc,
                    static_cast<double>(step - start) / std::max(secs, 1e-9));
        std::fflush(stdout);
      }
      if (!c.checkpoint.empty() && c.checkpoint_every > 0 && step % c.checkpoint_every == 0)
        save_checkpoint(c.checkpoint, model, opt, gen, step);
    }
    if (!c.checkpoint.empty())
      save_checkpoint(c.checkpoint, model, opt, gen, step);
    if (stop_signal) {
      std::printf("interrupted at step %lld%s%s\n", static_cast<long long>(step),
                  c.checkpoint.empty() ? "" : "; checkpoint ", c.checkpoint.c_str());
      return 130;
    }
    {
      torch::NoGradGuard ng;
      Config ce = c;
      ce.batch = 512;
      auto [loss, acc] = loss_and_accuracy(model, nt_batch(ce, gen), c.tau);
      std::printf("eval on 512 fresh sequences: loss %.4f  acc %.3f\n",
                  loss.item<double>(), acc);
    }
    for (const auto &p : model->named_parameters())
      if (p.key().find(".normalizer.") != std::string::npos)
        std::cout << "learned normalizer param " << p.key() << " = "
                  << p.value().item<double>() << "\n";
    if (start == 0)
      std::printf("mean loss first 10 steps %.4f -> last 10 steps %.4f\n", first, last);
  } catch (const c10::Error &e) {
    std::cerr << "attn-train: " << e.what_without_backtrace() << std::endl;
    return 1;
  }
  return 0;
}
