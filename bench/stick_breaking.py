#!/usr/bin/env python3
"""Stick-breaking attention (a scan normalizer) on the CPU: ours against its eager
PyTorch composition and that composition under torch.compile, forward+backward, f32.

    .venv/bin/python bench/stick_breaking.py [--shapes 4x512 4x1024] [--d 64] [--budget 3]

Compiles examples/normalizers/stick_breaking_left_over.mlir (the paper's form: keys
j < i, the left-over weight to the query's own value) and, for the cost relative to
our softmax in the same run, examples/normalizers/softmax.mlir (causal), with
build/bin/attn-compile. Each shape is B·H x N (B = 1). Every implementation is checked
against ours (O and dq, dk, dv) before it is timed; all are timed interleaved (median
of repetitions after a warm-up, 2 torch threads).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ATTN_BUILD_DIR", os.path.join(REPO, "build"))


def compile_kernel(name):
    import attn
    out_dir = os.path.join(BUILD, "bench-artifacts")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, f"{name}.so")
    src = os.path.join(REPO, "examples", "normalizers", f"{name}.mlir")
    subprocess.run([os.path.join(BUILD, "bin", "attn-compile"), src, "-o", out], check=True)
    return attn.Kernel(out)


def eager_stick_breaking(q, k, v):
    """w_ij = σ(s_ij)·Π_{i > k > j}(1 − σ(s_ik)) in log space, O = w v + r_i v_i."""
    n = q.shape[-2]
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril(-1)
    discount = torch.where(keep, -F.softplus(s), 0.0)
    after = discount.flip(-1).cumsum(-1).flip(-1) - discount   # Σ_{k > j}
    w = torch.where(keep, torch.exp(F.logsigmoid(s) + after), 0.0)
    left_over = torch.exp(discount.sum(-1, keepdim=True))
    return w @ v + left_over * v


def median_times(fns, budget):
    """Interleaved: one call of each per round, until `budget` seconds (>= 3 rounds)."""
    for fn in fns.values():
        fn()  # warm-up (and torch.compile's compilation)
    times = {name: [] for name in fns}
    start = time.perf_counter()
    while min(len(t) for t in times.values()) < 3 or time.perf_counter() - start < budget:
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: statistics.median(t) for name, t in times.items()}


def fwd_bwd(forward, q, k, v, dout):
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    out = forward(*leaves)
    return [out.detach(), *torch.autograd.grad(out, leaves, dout)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=["4x512", "4x1024"],
                    help="B·H x N per shape")
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--budget", type=float, default=3.0, help="seconds of timing per shape")
    args = ap.parse_args()
    torch.set_num_threads(2)
    ours = compile_kernel("stick_breaking_left_over")
    softmax = compile_kernel("softmax")
    compiled = torch.compile(eager_stick_breaking)

    print(f"stick-breaking fwd+bwd, f32, d = {args.d}, 2 threads, torch {torch.__version__}")
    print("| B·H x N | ours (ms) | eager (ms) | torch.compile (ms) | ours vs eager | "
          "ours vs compile | ours / our softmax |")
    print("|---|---|---|---|---|---|---|")
    for shape in args.shapes:
        bh, n = (int(x) for x in shape.split("x"))
        g = torch.Generator().manual_seed(0)
        q, k, v, dout = (torch.randn(1, bh, n, args.d, generator=g) for _ in range(4))
        fns = {
            "ours": lambda: fwd_bwd(ours, q, k, v, dout),
            "eager": lambda: fwd_bwd(eager_stick_breaking, q, k, v, dout),
            "compile": lambda: fwd_bwd(compiled, q, k, v, dout),
            "softmax": lambda: fwd_bwd(lambda *t: softmax(*t, is_causal=True), q, k, v, dout),
        }
        want = fns["ours"]()
        for name in ("eager", "compile"):
            for what, a, b in zip(("O", "dq", "dk", "dv"), fns[name](), want):
                if not torch.allclose(a, b, rtol=1e-3, atol=1e-4):
                    sys.exit(f"{name} {shape}: {what} differs from ours by "
                             f"{(a - b).abs().max().item():.3g}")
        t = median_times(fns, args.budget)
        print(f"| {bh}x{n} | {1e3 * t['ours']:.1f} | {1e3 * t['eager']:.1f} | "
              f"{1e3 * t['compile']:.1f} | {t['eager'] / t['ours']:.2f}× | "
              f"{t['compile'] / t['ours']:.2f}× | {t['ours'] / t['softmax']:.2f}× |")


if __name__ == "__main__":
    main()
