"""Implicit normalizers on CPU: our sparsemax and 1.5-entmax (examples/normalizers,
docs/normalizer-classes.md) against the `entmax` package's sort-based sparsemax and
entmax15 applied to the eager score matrix, with our softmax in the same run; f32,
2 threads, forward and fwd+bwd, non-causal.

    .venv/bin/python bench/entmax.py                      # markdown on stdout
    .venv/bin/python bench/entmax.py --reps 9 --shapes 8x1024x64 8x4096x64

Each peer is checked against our kernel at the timed shape (O, dq, dk, dv) before it is
timed; all implementations of a row are timed interleaved (rotating order, median of
--reps, after a warm-up). The entmax package materialises the B·H·N² score and weight
matrices; ours never does.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

import thread_scaling  # noqa: E402  (sys.path holds bench/ while this script starts)

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("ATTN_BUILD_DIR", REPO / "build"))
NORMALIZERS = {"sparsemax": "sparsemax", "entmax15": "entmax15", "softmax": "softmax"}


def compile_ours(out_dir):
    import attn
    kernels = {}
    for name in NORMALIZERS:
        artifact = Path(out_dir) / f"{name}.so"
        subprocess.run([str(BUILD / "bin" / "attn-compile"),
                        str(REPO / "examples" / "normalizers" / f"{name}.mlir"),
                        "-o", str(artifact)], check=True)
        kernels[name] = attn.load(str(artifact))
    return kernels


def eager(mapping):
    def run(q, k, v):
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        return mapping(s, dim=-1) @ v
    return run


def runner(fn, q, k, v, do, backward):
    leaves = [t.clone().requires_grad_(backward) for t in (q, k, v)]

    def call():
        out = fn(*leaves)
        if backward:
            grads = torch.autograd.grad(out, leaves, grad_outputs=do)
            return out, grads
        return out, ()
    return call


def check(name, got, want):
    for label, a, b in zip(("O", "dq", "dk", "dv"), (got[0], *got[1]), (want[0], *want[1])):
        err = ((a - b).abs().max() / b.abs().max().clamp(min=1e-30)).item()
        if not err < 1e-3:
            sys.exit(f"bench/entmax.py: {name}: {label} differs from ours by {err:.2e} "
                     "(relative to max |peer|)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--shapes", nargs="*", default=["8x1024x64", "8x4096x64"],
                    help="BHxNxd: B·H heads of N queries and N keys, head dim d")
    args = ap.parse_args()
    # This file is bench/entmax.py: the package must not resolve to it.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    import entmax

    torch.set_num_threads(2)
    peers = {"sparsemax": entmax.sparsemax, "entmax15": entmax.entmax15}
    print(f"torch {torch.__version__}, entmax {entmax.__version__}, "
          f"{torch.get_num_threads()} threads, {os.uname().machine}\n")
    print("| shape (B·H×N×d) | pass | ours sparsemax | entmax.sparsemax | ours entmax15 | "
          "entmax.entmax15 | ours softmax |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as out_dir:
        ours = compile_ours(out_dir)
        for shape in args.shapes:
            bh, n, d = (int(x) for x in shape.split("x"))
            gen = torch.Generator().manual_seed(0)
            q, k, v, do = (torch.randn(1, bh, n, d, generator=gen) for _ in range(4))
            for backward in (False, True):
                calls = {}
                for name in ("sparsemax", "entmax15"):
                    mine = runner(lambda q, k, v, kern=ours[name]: kern(q, k, v), q, k, v, do,
                                  backward)
                    peer = runner(eager(peers[name]), q, k, v, do, backward)
                    check(name, peer(), mine())
                    calls[f"ours {name}"], calls[f"entmax {name}"] = mine, peer
                calls["ours softmax"] = runner(lambda q, k, v: ours["softmax"](q, k, v), q, k,
                                               v, do, backward)
                medians = thread_scaling.time_interleaved(
                    {name: (torch.get_num_threads(), call) for name, call in calls.items()},
                    args.reps)[0]
                ms = {name: t * 1e3 for name, t in medians.items()}
                cols = ["ours sparsemax", "entmax sparsemax", "ours entmax15", "entmax entmax15",
                        "ours softmax"]
                print(f"| {bh}×{n}×{d} | {'fwd+bwd' if backward else 'fwd'} | " +
                      " | ".join(f"{ms[c]:.1f} ms" for c in cols) + " |", flush=True)


if __name__ == "__main__":
    main()
