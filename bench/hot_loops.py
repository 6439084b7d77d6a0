#!/usr/bin/env python3
"""Where our kernels' time goes, on a VM without hardware counters (perf's cpu-clock
sampling still works):

    perf record -e cpu-clock -F 4000 -o build/bench/perf.data -- \\
        .venv/bin/python bench/hot_loops.py softmax --n 2048 --reps 25
    .venv/bin/python bench/hot_loops.py --annotate build/bench/perf.data

The first runs one workload's forward and forward+backward (B = 1, H = 2, f32, one
thread: the samples are the kernel's own) in a loop and prints their times. The second
reads `perf annotate` of attn_forward_f32 and attn_backward_f32 and prints, for the
hottest code (the inner loops), the share of samples and the instruction mix: FMAs, FMAs
with a memory operand, vector loads and broadcasts, vector stores, stack references
(spilled registers).
"""

import argparse
import os
import re
import subprocess
import sys
import time
from collections import defaultdict

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)

WINDOW = 0x200  # bytes of code per bucket: about one inner loop


def run(args):
    import torch

    import peers
    torch.set_num_threads(1)
    workload = peers.WORKLOADS[args.workload]
    ours = peers.Ours(peers.compile_ours(workload)[0])
    x = peers.Inputs(workload, args.n, args.d, args.causal, b=1, h=2)
    fwd, fwdbwd = ours.bind(x, "fwd")[0], ours.bind(x, "fwd+bwd")[0]
    for _ in range(args.reps):
        t0 = time.perf_counter()
        fwd()
        t1 = time.perf_counter()
        fwdbwd()
        t2 = time.perf_counter()
        print(f"fwd {1e3 * (t1 - t0):.1f} ms  fwd+bwd {1e3 * (t2 - t1):.1f} ms", flush=True)


def instruction_mix(lines):
    fma = [t for t in lines if "vfmadd" in t]
    return {"insns": len(lines), "fma": len(fma), "fma_mem": sum("(" in t for t in fma),
            "loads": sum(bool(re.match(r"(vmov\w+\s+-?(0x)?[0-9a-f]*\(|vbroadcast)", t)) for t in lines),
            "stores": sum(bool(re.match(r"vmov\w+\s+%[xyz]mm\d+,.*\(", t)) for t in lines),
            "stack": sum("(%rbp)" in t or "(%rsp)" in t for t in lines)}


def annotate(path):
    for symbol in ("attn_forward_f32", "attn_backward_f32"):
        text = subprocess.run(["perf", "annotate", "-i", path, "--stdio", "-s", symbol],
                              capture_output=True, text=True).stdout
        rows = [(float(m[1]), int(m[2], 16), m[3]) for m in
                re.finditer(r"^\s+([0-9.]+) :\s+([0-9a-f]+):\s+(.*)$", text, re.M)]
        if not rows:
            print(f"{symbol}: no samples in {path}")
            continue
        share = defaultdict(float)
        for pct, addr, _ in rows:
            share[addr // WINDOW] += pct
        print(f"{symbol}: hottest {WINDOW:#x}-byte windows (% of its samples; instruction mix)")
        for window, pct in sorted(share.items(), key=lambda kv: -kv[1])[:4]:
            mix = instruction_mix([t for _, a, t in rows if a // WINDOW == window])
            print(f"  {window * WINDOW:#8x} {pct:5.1f}%  " + "  ".join(f"{k} {v}" for k, v in mix.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload", nargs="?", default="softmax")
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--annotate", metavar="PERF_DATA", help="summarise a perf.data instead")
    args = ap.parse_args()
    if args.annotate:
        annotate(args.annotate)
    else:
        run(args)


if __name__ == "__main__":
    main()
