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
at that rate and ours ÷ that time (the target for 1-16 rows: within 1.5×). It also
sums a tensor of K and V's size that is in the cache ("re-read"): the fastest any
implementation can read K and V that a previous call left in the cache, so SDPA ÷
re-read is the most that "SDPA ÷ ours" can be on that row. K and V of
these shapes (8-64 MiB) may stay in the last-level cache between repetitions, as they
would not in a model's decoder step; the ratio can then fall below 1. So every forward
row is timed a second time with K and V out of the cache, as a decoder step finds the
layer's cache after the other layers have run: each call (ours and SDPA's alike) reads
the next of copies of K and V that together exceed COLD_BYTES, and that table gives
each implementation's time over the stream time: 1.0 is the machine's bandwidth.
"""
import argparse
import json
import statistics
import sys
import time

import torch

import thread_scaling  # noqa: E402  (sys.path holds bench/: runner, tensors, timing)
from thread_scaling import bench, peers  # noqa: E402

# Copies of K and V per cold row: together more than any last-level cache of the machine.
COLD_BYTES = 1 << 30

# (B·H, Nq, Nk, d)
SHAPES = [(1, 1, 65536, 64), (1, 1, 65536, 128), (8, 1, 8192, 64), (8, 1, 8192, 128),
          (8, 16, 4096, 128), (8, 128, 4096, 64), (1, 100, 16384, 64)]


def read_bandwidth(reps=9, nbytes=1 << 30):
    """Bytes per second that summing an f32 tensor of `nbytes` reads on the current
    threads (median of `reps`, after a warm-up: a tensor smaller than the last-level
    cache is read from it)."""
    x = torch.ones(nbytes // 4)
    x.sum()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        x.sum()
        times.append(time.perf_counter() - t)
    return x.numel() * 4 / statistics.median(times)


def cold_runners(kernels, q, k, v, do, reps):
    """{name: (2, fn)}: each call, of any implementation, reads the next copy of K and V,
    so that none is read again before COLD_BYTES of others have been."""
    calls = reps * (len(kernels) + 1) + len(kernels) + 1  # timed, and one warm-up each
    copies = min(calls, max(2, -(-COLD_BYTES // (2 * k.numel() * k.element_size()))))
    caches = [(k.clone(), v.clone()) for _ in range(copies)]
    turn = iter(range(1 << 62))

    def cold(kind, kernel):
        per_copy = [thread_scaling.runner(kind, kernel, q, ck, cv, do, False, "fwd")
                    for ck, cv in caches]
        return (2, lambda: per_copy[next(turn) % copies]())
    impls = {name: cold("ours", kernel) for name, kernel in kernels.items()}
    impls["sdpa"] = cold("sdpa", None)
    return impls


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
            kv_bytes = 2 * bh * nk * d * 4
            row = {"bh": bh, "nq": nq, "nk": nk, "d": d, "pass": pss,
                   "ms": {n: round(s * 1e3, 3) for n, s in med.items()},
                   "stream_ms": round(kv_bytes / bandwidth * 1e3, 3),
                   "foreign_cpus": round(foreign, 3)}
            if pss == "fwd":
                row["reread_ms"] = round(kv_bytes / read_bandwidth(nbytes=kv_bytes) * 1e3, 3)
                cold, _, _ = thread_scaling.time_interleaved(
                    cold_runners(kernels, q, k, v, do, args.reps), args.reps)
                row["cold_ms"] = {n: round(s * 1e3, 3) for n, s in cold.items()}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)

    names = list(kernels) + ["sdpa"]
    print(f"{info['cpu_model']}, torch {info['torch_version']}, 2 threads, median of "
          f"{args.reps}; read bandwidth {bandwidth / 1e9:.1f} GB/s (2 threads, 1 GiB sum)\n")
    print("| B·H | Nq | Nk | d | pass | " + " | ".join(f"{n} (ms)" for n in names)
          + (" | base ÷ ours" if args.baseline_compiler else "")
          + " | SDPA ÷ ours | K+V stream (ms) | ours ÷ stream | K+V re-read (ms) | ours ÷ re-read"
          " | SDPA ÷ re-read | foreign CPUs |")
    print("|---" * (12 + len(names) + bool(args.baseline_compiler)) + "|")
    for r in rows:
        ms = r["ms"]
        cells = [str(r[key]) for key in ("bh", "nq", "nk", "d", "pass")]
        cells += [f"{ms[n]:.3f}" for n in names]
        if args.baseline_compiler:
            cells.append(f"{ms['ours@base'] / ms['ours']:.2f}×")
        cells.append(f"**{ms['sdpa'] / ms['ours']:.2f}×**")
        cells += ([f"{r['stream_ms']:.3f}", f"**{ms['ours'] / r['stream_ms']:.2f}×**",
                   f"{r['reread_ms']:.3f}", f"{ms['ours'] / r['reread_ms']:.2f}×",
                   f"{ms['sdpa'] / r['reread_ms']:.2f}×"]
                  if r["pass"] == "fwd" else [""] * 5)
        cells.append(f"{r['foreign_cpus']:.2f}")
        print("| " + " | ".join(cells) + " |")
    print(f"\nK and V out of the cache (each call reads the next of copies exceeding "
          f"{COLD_BYTES >> 20} MiB), forward:\n")
    print("| B·H | Nq | Nk | d | " + " | ".join(f"{n} (ms)" for n in names)
          + " | SDPA ÷ ours | K+V stream (ms) | " + " | ".join(f"{n} ÷ stream" for n in names)
          + " |")
    print("|---" * (6 + 2 * len(names)) + "|")
    for r in rows:
        if "cold_ms" not in r:
            continue
        ms = r["cold_ms"]
        cells = [str(r[key]) for key in ("bh", "nq", "nk", "d")]
        cells += [f"{ms[n]:.3f}" for n in names]
        cells.append(f"**{ms['sdpa'] / ms['ours']:.2f}×**")
        cells.append(f"{r['stream_ms']:.3f}")
        cells += [f"{ms[n] / r['stream_ms']:.2f}×" for n in names]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        bench.write_json(args.json, {"machine": info, "read_bandwidth": bandwidth, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
