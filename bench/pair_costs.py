"""What a (query, key) pair costs on one thread in each CPU schedule, against the
manifest's cpu_cost, and whether the threads a call gets by that estimate pay.

    .venv/bin/python bench/pair_costs.py                      # markdown on stdout
    .venv/bin/python bench/pair_costs.py --normalizers softmax,sparsemax --reps 15

The runtime estimates a call's one-thread time from its multiply-adds at the reference
rate (runtime/work_split.h, kNanosPerMultiplyAdd: an f32 multiply-add of the tiled loops
on 16 lanes) times the manifest's cpu_cost of the schedule that runs the call (the
compiler's, lib/Analysis/Schedules.cpp cpuPairCost), plus the bytes of K and V it reads;
a call gets a thread per min_thread_work_ns of it. Per example normalizer (f32, this
machine's native vectors), head dim (64: tiled where the algorithm allows; 48: the
generic loops) and shape (a decoder step: 8 heads × 1 × 1024 keys; a prompt: 8 heads ×
64 × 256), the first table gives the measured one-thread ns per multiply-add of the
forward and the backward (fwd+bwd − fwd; d + dv and 3d + 2dv multiply-adds per pair,
the K and V bytes included) beside the manifest's (cost × the reference). The second
times each forward on 2 threads with the default min_thread_work_ns (the threads the
estimate gives), with 0 (both threads) and on 1 thread, interleaved: the default should
be within noise of the faster of the other two.
"""
import argparse
import json
import statistics
import sys
import time

import torch

import thread_scaling  # noqa: E402  (sys.path holds bench/)
from thread_scaling import bench  # noqa: E402
import attn  # noqa: E402

# runtime/work_split.h kNanosPerMultiplyAdd.
REFERENCE_NS = 0.02
SHAPES = {"decoder step": (8, 1, 1024), "prompt": (8, 64, 256)}
HEAD_DIMS = (64, 48)
NORMALIZERS = ("softmax", "tanhmax", "sparsemax", "entmax15", "stick_breaking")


def median_seconds(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def manifest_cost(kernel, d, backward):
    """The cost the runtime picks (work_split.cpp pair_cost) for an f32 call with
    d = dv."""
    return torch.ops.attn.cpu_pair_cost(kernel.path, torch.float32, d, d, backward)


def calls(kernel, bh, nq, nk, d):
    q, k, v, do = (torch.randn(1, bh, n, d) for n in (nq, nk, nk, nq))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]

    def forward():
        kernel.forward_with_stats(q, k, v)

    def forward_backward():
        for t in leaves:
            t.grad = None
        kernel(*leaves).backward(do)
    return forward, forward_backward


def cost_row(name, kernel, shape_name, d, reps):
    bh, nq, nk = SHAPES[shape_name]
    forward, forward_backward = calls(kernel, bh, nq, nk, d)
    torch.set_num_threads(1)
    fwd = median_seconds(forward, reps)
    bwd = median_seconds(forward_backward, max(3, reps // 2)) - fwd
    pairs = bh * nq * nk
    return {"normalizer": name, "shape": shape_name, "d": d,
            "fwd_ns_per_ma": fwd * 1e9 / (pairs * 2 * d),
            "bwd_ns_per_ma": bwd * 1e9 / (pairs * 5 * d),
            "fwd_manifest": manifest_cost(kernel, d, False) * REFERENCE_NS,
            "bwd_manifest": manifest_cost(kernel, d, True) * REFERENCE_NS}


def threads_row(name, kernel, shape_name, d, reps):
    bh, nq, nk = SHAPES[shape_name]
    forward, _ = calls(kernel, bh, nq, nk, d)
    default = attn.min_thread_work_ns()

    def setting(threads, min_ns):
        def run():
            torch.set_num_threads(threads)
            attn.set_min_thread_work_ns(min_ns)
            start = time.perf_counter()
            forward()
            return time.perf_counter() - start
        return run
    impls = {"default": setting(2, default), "0": setting(2, 0), "1 thr": setting(1, default)}
    samples = {label: [] for label in impls}
    for run in impls.values():
        run()
    for rep in range(reps):
        labels = list(impls)
        labels = labels[rep % len(labels):] + labels[:rep % len(labels)]
        for label in labels:
            samples[label].append(impls[label]())
    attn.set_min_thread_work_ns(default)
    return {"normalizer": name, "shape": shape_name, "d": d,
            "us": {label: statistics.median(s) * 1e6 for label, s in samples.items()}}


def markdown(info, costs, threads):
    lines = [f"{info['cpu_model']} (AVX-512: {info['avx512f']}), torch {info['torch_version']}", "",
             "| normalizer | shape | d | fwd ns/MA | manifest | bwd ns/MA | manifest |",
             "|---|---|---|---|---|---|---|"]
    for r in costs:
        lines.append(f"| {r['normalizer']} | {r['shape']} | {r['d']} | {r['fwd_ns_per_ma']:.3f} | "
                     f"{r['fwd_manifest']:.2f} | {r['bwd_ns_per_ma']:.3f} | {r['bwd_manifest']:.2f} |")
    lines += ["", "| normalizer | shape | d | fwd, 2 thr default (µs) | 2 thr, 0 | 1 thr |",
              "|---|---|---|---|---|---|"]
    for r in threads:
        us = r["us"]
        lines.append(f"| {r['normalizer']} | {r['shape']} | {r['d']} | {us['default']:.0f} | "
                     f"{us['0']:.0f} | {us['1 thr']:.0f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--normalizers", default=",".join(NORMALIZERS))
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    info = bench.machine_info(2, None)
    costs, threads = [], []
    for name in args.normalizers.split(","):
        with open(f"{bench.REPO}/examples/normalizers/{name}.mlir") as f:
            kernel = attn.compile(f.read(), dtypes=("f32",))
        for d in HEAD_DIMS:
            for shape_name in SHAPES:
                costs.append(cost_row(name, kernel, shape_name, d, args.reps))
                threads.append(threads_row(name, kernel, shape_name, d, args.reps))
                print(json.dumps(threads[-1]), file=sys.stderr, flush=True)
    torch.set_num_threads(2)
    if args.json:
        bench.write_json(args.json, {"machine": info, "costs": costs, "threads": threads})
    print(markdown(info, costs, threads))


if __name__ == "__main__":
    main()
