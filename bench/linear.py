#!/usr/bin/env python3
"""Kernelised (linear-time) attention on the CPU: does the time grow linearly in N?

    .venv/bin/python bench/linear.py [--n 4096 16384 65536] [--d 64] [--budget 2]

Compiles examples/normalizers/linear.mlir (elu+1 features, non-causal; the runtime's
is_causal flag gives the causal variant) with build/bin/attn-compile and times, at
B = 1, H = 2, f32, 2 torch threads, the forward and forward+backward for each N
(median of repetitions after a warm-up). Prints time(N_max)/time(N_max/4), which must
stay below 5 (a quadratic kernel gives about 16), and, for context, the same linear
form written eagerly in PyTorch (non-causal only: the eager causal form needs an
N×d×d cumulative sum).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ATTN_BUILD_DIR", os.path.join(REPO, "build"))


def compile_kernel():
    out_dir = os.path.join(BUILD, "bench-artifacts")
    os.makedirs(out_dir, exist_ok=True)
    src = os.path.join(REPO, "examples", "normalizers", "linear.mlir")
    out = os.path.join(out_dir, "linear.so")
    subprocess.run([os.path.join(BUILD, "bin", "attn-compile"), src, "-o", out], check=True)
    torch.ops.load_library(os.path.join(BUILD, "runtime", "libattn_runtime.so"))
    assert "\nalgorithm kernelised\n" in torch.ops.attn.manifest(out)
    return out


def eager_linear(q, k, v, eps=1e-6):
    """O = φ(Q)(φ(K)ᵀV) / (φ(Q)·Σφ(K) + ε), φ = elu + 1."""
    fq = torch.nn.functional.elu(q) + 1
    fk = torch.nn.functional.elu(k) + 1
    state = torch.matmul(fk.transpose(-1, -2), v)
    den = torch.matmul(fq, fk.sum(-2, keepdim=True).transpose(-1, -2)) + eps
    return torch.matmul(fq, state) / den


def median_time(fn, budget):
    fn()  # warm-up
    times = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < budget and len(times) < 50):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), len(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[4096, 16384, 65536])
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--budget", type=float, default=2.0, help="seconds per measurement")
    args = ap.parse_args()
    torch.set_num_threads(2)
    path = compile_kernel()
    B, H, d = 1, 2, args.d
    print(f"# linear attention (elu+1), B={B} H={H} d={d} f32, {torch.get_num_threads()} threads, "
          f"loadavg at start {os.getloadavg()[0]:.1f}")
    print(f"{'variant':<22}{'N':>7}{'ms':>10}{'reps':>6}")
    results = {}
    for causal in (False, True):
        for n in args.n:
            g = torch.Generator().manual_seed(n)
            q, k, v = (torch.randn(B, H, n, d, generator=g).requires_grad_() for _ in range(3))
            dout = torch.randn(B, H, n, d, generator=g)
            p = torch.zeros(0)

            def fwd():
                with torch.no_grad():
                    torch.ops.attn.attention_forward(path, q, k, v, p, causal, None)

            def fwd_bwd():
                torch.ops.attn.attention(path, q, k, v, p, causal, None).backward(dout)

            def eager_fwd():
                with torch.no_grad():
                    eager_linear(q, k, v)

            def eager_fwd_bwd():
                eager_linear(q, k, v).backward(dout)

            rows = [("ours fwd", fwd), ("ours fwd+bwd", fwd_bwd)]
            if not causal:
                rows += [("eager fwd", eager_fwd), ("eager fwd+bwd", eager_fwd_bwd)]
            for label, fn in rows:
                secs, reps = median_time(fn, args.budget)
                name = f"{label}{' causal' if causal else ''}"
                results[(name, n)] = secs
                print(f"{name:<22}{n:>7}{secs * 1e3:>10.1f}{reps:>6}", flush=True)
    big, small = max(args.n), max(args.n) // 4
    print(f"# loadavg at end {os.getloadavg()[0]:.1f}")
    ok = True
    if small in args.n:
        for name in sorted({k[0] for k in results}):
            ratio = results[(name, big)] / results[(name, small)]
            bad = name.startswith("ours") and ratio >= 5
            ok &= not bad
            print(f"time(N={big}) / time(N={small}) {name:<22} {ratio:5.2f}"
                  f"{'  FAIL (>= 5)' if bad else ''}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
