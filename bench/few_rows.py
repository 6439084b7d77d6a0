"""Calls with few query rows (a decoder step, a short prompt against a long cache): ours
against SDPA's CPU flash kernel, on 2 threads, same run.

    .venv/bin/python bench/few_rows.py                                  # markdown on stdout
    .venv/bin/python bench/few_rows.py --baseline-compiler /tmp/attn-compile-old --reps 25

Rows (softmax, f32, examples/normalizers/softmax.mlir, non-causal): Nq query rows per
head against Nk keys, forward and fwd+bwd. These are the shapes where packing the keys
costs as much as the products: every key is packed for a handful of rows (calls of at
most 16 rows take the decode schedule, which reads K row by row instead). With
--baseline-compiler, our kernel compiled by that attn-compile too ('ours@base'), timed
interleaved with the rest (thread_scaling.time_interleaved: rotating order, median).

The memory bound: the run measures the machine's read bandwidth on 2 threads (the median
of summing a 1 GiB tensor) and reports, per forward row, the time to stream K and V once
at that rate and ours ÷ that time (the target for 1-16 rows: within 1.5×). K and V of
these shapes (8-64 MiB) may stay in the last-level cache between repetitions, as they
would not in a model's decoder step; the ratio can then fall below 1.
"""
import argparse
import json
import statistics
import sys
import time

import torch

import thread_scaling  # noqa: E402  (sys.path holds bench/: runner, tensors, timing)
from thread_scaling import bench, peers  # noqa: E402

# (B·H, Nq, Nk, d)
SHAPES = [(1, 1, 65536, 64), (1, 1, 65536, 128), (8, 1, 8192, 64), (8, 1, 8192, 128),
          (8, 16, 4096, 128), (8, 128, 4096, 64), (1, 100, 16384, 64)]


def read_bandwidth(reps=9, gib=1):
    """Bytes per second that summing a `gib` GiB f32 tensor reads on the current threads
    (median of `reps`, after a warm-up)."""
    x = torch.ones(gib << 28)
    x.sum()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        x.sum()
        times.append(time.perf_counter() - t)
    return x.numel() * 4 / statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--baseline-compiler", default=None, metavar="ATTN_COMPILE")
    ap.add_argument("--json", default=None)
    ap.add_argument("--only-decode", action="store_true",
                    help="only the rows of one query row (the decode targets)")
    args = ap.parse_args()

    workload = peers.WORKLOADS["softmax"]
    kernels = {"ours": peers.compile_ours(workload)[0]}
    if args.baseline_compiler:
        kernels["ours@base"] = peers.compile_ours(workload, args.baseline_compiler)[0]
    info = bench.machine_info(2, vec_isa=None)
    torch.set_num_threads(2)
    bandwidth = read_bandwidth()
    rows = []
    for bh, nq, nk, d in SHAPES:
        if args.only_decode and nq != 1:
            continue
        q, k, v, do = thread_scaling.tensors(bh, nq, nk, d)
        for pss in ("fwd", "fwd+bwd"):
            impls = {name: (2, thread_scaling.runner("ours", kernel, q, k, v, do, False, pss))
                     for name, kernel in kernels.items()}
            impls["sdpa"] = (2, thread_scaling.runner("sdpa", None, q, k, v, do, False, pss))
            med, _, foreign = thread_scaling.time_interleaved(impls, args.reps)
            row = {"bh": bh, "nq": nq, "nk": nk, "d": d, "pass": pss,
                   "ms": {n: round(s * 1e3, 3) for n, s in med.items()},
                   "stream_ms": round(2 * bh * nk * d * 4 / bandwidth * 1e3, 3),
                   "foreign_cpus": round(foreign, 3)}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)

    names = list(kernels) + ["sdpa"]
    print(f"{info['cpu_model']}, torch {info['torch_version']}, 2 threads, median of "
          f"{args.reps}; read bandwidth {bandwidth / 1e9:.1f} GB/s (2 threads, 1 GiB sum)\n")
    print("| B·H | Nq | Nk | d | pass | " + " | ".join(f"{n} (ms)" for n in names)
          + (" | base ÷ ours" if args.baseline_compiler else "")
          + " | SDPA ÷ ours | K+V stream (ms) | ours ÷ stream | foreign CPUs |")
    print("|---" * (9 + len(names) + bool(args.baseline_compiler)) + "|")
    for r in rows:
        ms = r["ms"]
        cells = [str(r[key]) for key in ("bh", "nq", "nk", "d", "pass")]
        cells += [f"{ms[n]:.3f}" for n in names]
        if args.baseline_compiler:
            cells.append(f"{ms['ours@base'] / ms['ours']:.2f}×")
        cells.append(f"**{ms['sdpa'] / ms['ours']:.2f}×**")
        cells += ([f"{r['stream_ms']:.3f}", f"**{ms['ours'] / r['stream_ms']:.2f}×**"]
                  if r["pass"] == "fwd" else ["", ""])
        cells.append(f"{r['foreign_cpus']:.2f}")
        print("| " + " | ".join(cells) + " |")
    if args.json:
        bench.write_json(args.json, {"machine": info, "read_bandwidth": bandwidth, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
