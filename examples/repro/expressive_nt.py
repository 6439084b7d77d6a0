#!/usr/bin/env python3
"""Reproduction (b): expressive attention (EA) vs dot-product attention (DPA) on NT
delayed-addition tasks of growing difficulty.

Expressive-attention paper (Gros, "Reorganizing attention-space geometry with expressive
attention", ../../../shared/seeds/002_*): on NT tasks x_t = (x_{t-1} + x_{t-1-T}) mod N,
EA and DPA do equally well on easy tasks, while on harder ones (larger N and T) DPA gets
stuck in a local minimum that EA escapes. Here, at laptop scale, with the demo's tiny
transformer (examples/train/train.py: one pre-LayerNorm block, causal attention, tanh
feed-forward ×4; unlike the paper: learned position embedding, cross-entropy, Adam,
2 heads), the same budget for every task, the compiled example normalizers softmax.mlir
(DPA) and expressive.mlir (EA, w = (q·k)^2 / (ε + Σ (q·k)^2)):

    .venv/bin/python examples/repro/expressive_nt.py [--steps 500] [--seeds 2]

Accuracy = next-symbol accuracy on 512 fresh sequences (positions whose successor the
context determines). Writes examples/repro/expressive_nt.png and .json.
"""
import argparse
import importlib.util
import time

import torch

from common import REPO, REPRO, kernel, plotting, write_results

_spec = importlib.util.spec_from_file_location("nt_demo", REPO / "examples" / "train" / "train.py")
demo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(demo)

TASKS = [(2, 1), (4, 2), (8, 2), (16, 2), (16, 3), (16, 5)]      # (N, T), easy -> hard
ATTENTIONS = {"DPA (softmax)": "softmax", "EA (expressive)": "expressive"}


def run(normalizer, base, tau, seed, steps):
    args = demo.parser().parse_args([
        "--artifact", kernel(normalizer).path, "--base", str(base), "--tau", str(tau),
        "--seq-len", "32", "--batch", "32", "--d-model", "64", "--heads", "2",
        "--lr", "3e-3", "--seed", str(seed)])
    model, opt = demo.build_model(args)
    gen = torch.Generator().manual_seed(seed + 1)
    curve = []
    for step in range(1, steps + 1):
        x = demo.nt_batch(args.batch, args.seq_len, base, tau, gen)
        loss, acc = demo.loss_and_accuracy(model, x, tau)
        opt.zero_grad()
        loss.backward()
        opt.step()
        curve.append({"step": step, "loss": loss.item(), "acc": acc})
    with torch.no_grad():
        _, accuracy = demo.loss_and_accuracy(model, demo.nt_batch(512, 32, base, tau, gen), tau)
    return accuracy, curve


def plot(results, curves, path):
    import matplotlib.pyplot as plt

    fig, (bars, lines) = plt.subplots(1, 2, figsize=(12, 4))
    names = [f"N{n}T{t}" for n, t in TASKS]
    width = 0.8 / len(results)
    for a, (label, per_task) in enumerate(results.items()):
        means = [sum(accs) / len(accs) for accs in per_task.values()]
        xs = [i + (a - 0.5) * width for i in range(len(TASKS))]
        bars.bar(xs, means, width, label=label)
        for x, accs in zip(xs, per_task.values()):
            bars.scatter([x] * len(accs), accs, color="k", s=8, zorder=3)
    bars.set_xticks(range(len(TASKS)))
    bars.set_xticklabels(names)
    bars.set_xlabel("NT task (harder to the right)")
    bars.set_ylabel("eval accuracy (bars: mean, dots: seeds)")
    bars.set_ylim(0, 1.05)
    bars.legend()
    bars.grid(axis="y", alpha=0.3)
    hardest = names[-2]
    for label, curve in curves.items():
        smooth = plotting.moving_average([row["acc"] for row in curve], 25)
        lines.plot(range(len(curve) - len(smooth) + 1, len(curve) + 1), smooth, label=label)
    lines.set_xlabel("step")
    lines.set_ylabel(f"training accuracy, {hardest}, seed 0 (moving avg)")
    lines.grid(alpha=0.3)
    lines.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--out", default=str(REPRO))
    args = p.parse_args(argv)
    t0 = time.time()
    results = {label: {} for label in ATTENTIONS}
    curves = {}
    for base, tau in TASKS:
        task = f"N{base}T{tau}"
        for label, normalizer in ATTENTIONS.items():
            accs = []
            for seed in range(args.seeds):
                accuracy, curve = run(normalizer, base, tau, seed, args.steps)
                accs.append(accuracy)
                if (base, tau) == TASKS[-2] and seed == 0:
                    curves[label] = curve
            results[label][task] = accs
            print(f"{task:7s} {label:16s} accuracy " + " ".join(f"{a:.3f}" for a in accs) +
                  f"   ({time.time() - t0:.0f}s)", flush=True)
    png = f"{args.out}/expressive_nt.png"
    plot(results, curves, png)
    write_results("expressive_nt", {"steps": args.steps, "seeds": args.seeds,
                                    "seconds": round(time.time() - t0, 1),
                                    "accuracy": results}, args.out)
    print(f"wrote {png} in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
