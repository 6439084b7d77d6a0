#!/usr/bin/env python3
"""Reproduction (a): TanhMax vs softmax on synthetic polarity-token classification.

TanhMax paper (Huang, Yang, Wang, "Rethinking attention weights as bidirectional
coefficients", ../../../shared/seeds/000_*), Sec. 5.1 and Figures 1-2: a model with one
attention module and a sigmoid output, trained from scratch with BCE and Adam, gives
positive tokens positive and negative tokens negative TanhMax weights, while softmax
weights are all positive. Here, at laptop scale:

  * vocabulary of 8 positive, 8 negative and 48 neutral tokens; a sentence of 20 tokens
    holds 1-4 polarity tokens (never as many positive as negative), the rest neutral;
    label = more positive than negative tokens;
  * model: embedding h_i (uniform ±0.1, as in the paper) used as key and value, one
    learned context vector u as the query (score s_i = u·h_i/sqrt(d), hierarchical-
    attention style), dropout, linear readout w + sigmoid. The attention is the compiled example normalizer (softmax.mlir or
    tanhmax.mlir); the weights are read back with Kernel.attention_weights;
  * metric: sign agreement between each polarity token's attention weight and its
    polarity (+ for positive, - for negative tokens), over a held-out set, per seed.
    The model has an exact symmetry (u, w) -> (-u, -w) that flips every TanhMax weight
    and leaves the prediction unchanged, so the orientation is arbitrary: we report the
    raw agreement and the orientation-free one, max(a, 1 - a).

    .venv/bin/python examples/repro/tanhmax_polarity.py [--steps 400] [--seeds 3]

Writes examples/repro/tanhmax_polarity.png and .json.
"""
import argparse
import time

import torch
from torch import nn

from common import REPRO, kernel, plotting, write_results

POSITIVE, NEGATIVE, NEUTRAL = 8, 8, 48
VOCAB = POSITIVE + NEGATIVE + NEUTRAL
LENGTH = 20


def polarity_of(tokens):
    """+1 positive, -1 negative, 0 neutral, elementwise."""
    return (tokens < POSITIVE).long() - ((tokens >= POSITIVE) & (tokens < POSITIVE + NEGATIVE)).long()


def sentences(batch, gen):
    """([batch, LENGTH] tokens, [batch] labels in {0, 1})."""
    count = torch.randint(1, 5, (batch,), generator=gen)
    slots = torch.arange(4).unsqueeze(0) < count.unsqueeze(1)            # [batch, 4]
    positive = torch.randint(0, 2, (batch, 4), generator=gen).bool() & slots
    while True:                                 # redraw the signs of tied sentences
        tied = 2 * positive.sum(1) == count
        if not tied.any():
            break
        redraw = torch.randint(0, 2, (batch, 4), generator=gen).bool() & slots
        positive = torch.where(tied.unsqueeze(1), redraw, positive)
    ids = torch.where(positive, torch.randint(0, POSITIVE, (batch, 4), generator=gen),
                      POSITIVE + torch.randint(0, NEGATIVE, (batch, 4), generator=gen))
    tokens = POSITIVE + NEGATIVE + torch.randint(0, NEUTRAL, (batch, LENGTH), generator=gen)
    where = torch.rand(batch, LENGTH, generator=gen).argsort(1)[:, :4]   # distinct positions
    tokens.scatter_(1, where, torch.where(slots, ids, tokens.gather(1, where)))
    labels = (2 * positive.sum(1) > count).float()
    return tokens, labels


class PolarityClassifier(nn.Module):
    def __init__(self, attention, d):
        super().__init__()
        self.attention = attention
        self.embed = nn.Embedding(VOCAB, d)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        self.context = nn.Parameter(0.1 * torch.randn(d))
        self.dropout = nn.Dropout(0.1)
        self.readout = nn.Linear(d, 1)
        self.params = nn.Parameter(attention.initial_params())

    def qkv(self, tokens):
        h = self.dropout(self.embed(tokens))                        # [B, L, d]
        q = self.context.expand(tokens.shape[0], 1, 1, -1)          # [B, 1, 1, d]
        return q, h.unsqueeze(1), h.unsqueeze(1)         # [B, 1, L, d] each

    def forward(self, tokens):
        q, k, v = self.qkv(tokens)
        return self.readout(self.attention(q, k, v, self.params)[:, 0, 0]).squeeze(-1)

    @torch.no_grad()
    def weights(self, tokens):
        q, k, _ = self.qkv(tokens)
        return self.attention.attention_weights(q, k, self.params)[:, 0, 0]   # [B, L]


def run(name, seed, steps, batch=64, d=32):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(1000 + seed)
    model = PolarityClassifier(kernel(name), d)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    loss_fn = nn.BCEWithLogitsLoss()
    for _ in range(steps):
        tokens, labels = sentences(batch, gen)
        loss = loss_fn(model(tokens), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    tokens, labels = sentences(1000, torch.Generator().manual_seed(7))
    with torch.no_grad():
        accuracy = ((model(tokens) > 0).float() == labels).float().mean().item()
    weights = model.weights(tokens)
    polarity = polarity_of(tokens)
    marked = polarity != 0
    agreement = (torch.sign(weights[marked]) == polarity[marked]).float().mean().item()
    oriented = max(agreement, 1 - agreement)
    by_class = {cls: weights[polarity == p].mean().item()
                for cls, p in (("positive", 1), ("negative", -1), ("neutral", 0))}
    return {"accuracy": accuracy, "sign_agreement": agreement,
            "sign_agreement_up_to_orientation": oriented, "mean_weight": by_class,
            "tokens": tokens, "weights": weights, "polarity": polarity}


def label(token):
    t = int(token)
    if t < POSITIVE:
        return f"+{t}"
    if t < POSITIVE + NEGATIVE:
        return f"-{t - POSITIVE}"
    return "·"


def plot(runs, path):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 7), gridspec_kw={"height_ratios": [1, 1.2]})
    for col, (name, r) in enumerate(runs.items()):
        rows = range(4)
        ax = axes[0, col]
        w = r["weights"][:4]
        image = plotting.draw_attention_map(
            ax, w, row_labels=[f"sentence {i}" for i in rows], col_labels=None,
            title=f"{name}: weights on 4 test sentences (+k positive, -k negative token)")
        for i in rows:
            for j in range(LENGTH):
                ax.text(j, i, label(r["tokens"][i, j]), ha="center", va="center", fontsize=7)
        ax.set_xticks([])
        fig.colorbar(image, ax=ax)
        ax = axes[1, col]
        colors = {1: ("tab:orange", "positive"), -1: ("tab:blue", "negative"), 0: ("tab:green", "neutral")}
        for p, (color, text) in colors.items():
            sel = r["polarity"] == p
            x = r["tokens"][sel].float() + 0.3 * torch.rand(int(sel.sum()))
            ax.scatter(x.numpy(), r["weights"][sel].numpy(), s=3, alpha=0.4, c=color, label=text)
        ax.axhline(0, color="k", lw=0.5)
        ax.set_xlabel("token id")
        ax.set_ylabel("attention weight")
        ax.set_title(f"{name}: accuracy {r['accuracy']:.3f}, sign agreement "
                     f"{r['sign_agreement']:.3f} (up to orientation "
                     f"{r['sign_agreement_up_to_orientation']:.3f})", fontsize=9)
        ax.legend(markerscale=4, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--out", default=str(REPRO))
    args = p.parse_args(argv)
    t0 = time.time()
    results, shown = {}, {}
    for name in ("softmax", "tanhmax"):
        per_seed = [run(name, seed, args.steps) for seed in range(args.seeds)]
        shown[name] = per_seed[0]
        keys = ("accuracy", "sign_agreement", "sign_agreement_up_to_orientation", "mean_weight")
        results[name] = [{k: r[k] for k in keys}
                         for r in per_seed]
        for seed, r in enumerate(results[name]):
            print(f"{name:8s} seed {seed}: accuracy {r['accuracy']:.3f}  sign agreement "
                  f"{r['sign_agreement']:.3f} (up to orientation "
                  f"{r['sign_agreement_up_to_orientation']:.3f})  mean weight " +
                  "  ".join(f"{k} {v:+.4f}" for k, v in r["mean_weight"].items()))
    png = f"{args.out}/tanhmax_polarity.png"
    plot(shown, png)
    write_results("tanhmax_polarity", {"steps": args.steps, "seconds": round(time.time() - t0, 1),
                                       "runs": results}, args.out)
    print(f"wrote {png} in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
