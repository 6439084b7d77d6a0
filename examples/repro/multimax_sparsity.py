#!/usr/bin/env python3
"""Reproduction (c): MultiMax vs softmax, sparsity and multi-modality of attention rows.

MultiMax paper (Zhou, Fritz, Keuper, "MultiMax: sparse and multi-modal attention
learning", ../../../shared/seeds/001_*): softmax trades sparsity against multi-modality
through its temperature; MultiMax's learned piecewise modulator σ (8 params) suppresses
irrelevant entries (sparser rows, Fig. 8: more mass near 0) while keeping several modes.

Here, at laptop scale, a task that needs a sparse *and* bimodal attention row: a
sequence of 24 random digits, two of them marked, and a final query token; the model
must output (a + b) mod 10 for the two marked digits a, b. Model: token embedding, one
attn.MultiheadAttention layer (1 head, d = 32; the final token queries all 25 tokens;
compiled example normalizer softmax.mlir or multimax.mlir, whose 8 params are trained),
then a tanh MLP readout. Measured on 2000 held-out sequences from the query's attention
row (Kernel.attention_weights):

  * relevant mass: total weight on the two marked digits;
  * bimodality: fraction of rows whose two marked digits both get >= 0.25;
  * sparsity: fraction of the 23 irrelevant weights below 1e-3 (and 1e-2), and the
    cumulative distribution of all weights (the paper's Fig. 8).

    .venv/bin/python examples/repro/multimax_sparsity.py [--steps 600] [--seeds 2]

Writes examples/repro/multimax_sparsity.png and .json.
"""
import argparse
import time

import torch
from torch import nn

from common import NORMALIZERS, REPRO, attn, plotting, write_results

DIGITS, LENGTH = 10, 24
QUERY_TOKEN = 2 * DIGITS                    # tokens: digit, marked digit (+10), query


def sequences(batch, gen):
    """([batch, LENGTH + 1] tokens, [batch, DIGITS] multi-hot {a, b}, [batch, 2] marked
    positions)."""
    digits = torch.randint(0, DIGITS, (batch, LENGTH), generator=gen)
    marked = torch.rand(batch, LENGTH, generator=gen).argsort(1)[:, :2]
    tokens = digits.clone()
    tokens.scatter_(1, marked, digits.gather(1, marked) + DIGITS)
    tokens = torch.cat([tokens, torch.full((batch, 1), QUERY_TOKEN)], 1)
    target = torch.zeros(batch, DIGITS).scatter_(1, digits.gather(1, marked), 1.0)
    return tokens, target, marked


class MarkedSum(nn.Module):
    def __init__(self, normalizer, d=32):
        super().__init__()
        self.embed = nn.Embedding(2 * DIGITS + 1, d)
        self.attention = attn.MultiheadAttention(d, 1, batch_first=True, normalizer=normalizer)
        self.readout = nn.Sequential(nn.Linear(d, 128), nn.Tanh(), nn.Linear(128, DIGITS))

    def forward(self, tokens, need_weights=False):
        h = self.embed(tokens)
        out, weights = self.attention(h[:, -1:], h, h, need_weights=need_weights)
        return self.readout(out[:, 0]), weights


def run(name, seed, steps, batch=64):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(100 + seed)
    model = MarkedSum(str(NORMALIZERS / f"{name}.mlir"))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        tokens, target, _ = sequences(batch, gen)
        loss = nn.functional.binary_cross_entropy_with_logits(model(tokens)[0], target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    tokens, target, marked = sequences(2000, torch.Generator().manual_seed(9))
    with torch.no_grad():
        logits, weights = model(tokens, need_weights=True)
    w = weights[:, 0]                                                 # [2000, 25]
    on_marked = w.gather(1, marked)
    irrelevant = w.scatter(1, marked, float("nan"))
    irrelevant = irrelevant[~irrelevant.isnan()]
    return {
        "accuracy": ((logits > 0).float() == target).all(1).float().mean().item(),
        "relevant_mass": on_marked.sum(1).mean().item(),
        "bimodal_rows": (on_marked.min(1).values >= 0.25).float().mean().item(),
        "irrelevant_below_1e-3": (irrelevant < 1e-3).float().mean().item(),
        "irrelevant_below_1e-2": (irrelevant < 1e-2).float().mean().item(),
        "params": {n: round(p.item(), 4) for n, p in model.attention.normalizer.items()},
        "weights": w, "tokens": tokens,
    }


def plot(shown, path):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4), gridspec_kw={"width_ratios": [1.2, 1, 1]})
    cdf = axes[0]
    for name, r in shown.items():
        values = r["weights"].flatten().clamp_min(1e-8).sort().values
        cdf.plot(values.numpy(), torch.linspace(0, 1, len(values)).numpy(), label=name)
    cdf.set_xscale("log")
    cdf.set_xlabel("attention weight")
    cdf.set_ylabel("fraction of weights below")
    cdf.set_title("cumulative distribution of the query row's weights", fontsize=9)
    cdf.grid(alpha=0.3)
    cdf.legend()
    limit = max(r["weights"][:8].max().item() for r in shown.values())
    for ax, (name, r) in zip(axes[1:], shown.items()):
        image = plotting.draw_attention_map(
            ax, r["weights"][:8], row_labels=[f"seq {i}" for i in range(8)], limit=limit,
            title=f"{name}: relevant mass {r['relevant_mass']:.2f}, bimodal rows "
                  f"{r['bimodal_rows']:.2f}, irrelevant < 1e-3: {r['irrelevant_below_1e-3']:.2f}")
        for i in range(8):
            for j in range(LENGTH + 1):
                t = int(r["tokens"][i, j])
                if DIGITS <= t < QUERY_TOKEN:
                    ax.text(j, i, "*", ha="center", va="center", fontsize=8)
        ax.set_xlabel("key position (* = marked digit)")
        fig.colorbar(image, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--out", default=str(REPRO))
    args = p.parse_args(argv)
    t0 = time.time()
    results, shown = {}, {}
    metrics = ("accuracy", "relevant_mass", "bimodal_rows", "irrelevant_below_1e-3",
               "irrelevant_below_1e-2", "params")
    for name in ("softmax", "multimax"):
        runs = [run(name, seed, args.steps) for seed in range(args.seeds)]
        shown[name] = runs[0]
        results[name] = [{k: r[k] for k in metrics} for r in runs]
        for seed, r in enumerate(results[name]):
            print(f"{name:8s} seed {seed}: " + "  ".join(
                f"{k} {v:.3f}" for k, v in r.items() if k != "params") +
                (f"  params {r['params']}" if r["params"] else ""), flush=True)
    png = f"{args.out}/multimax_sparsity.png"
    plot(shown, png)
    write_results("multimax_sparsity", {"steps": args.steps, "seconds": round(time.time() - t0, 1),
                                        "runs": results}, args.out)
    print(f"wrote {png} in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
