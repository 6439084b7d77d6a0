"""Shapes that must fill every core: one thread against two in the same run.

    .venv/bin/python bench/thread_scaling.py                 # every row, markdown on stdout
    .venv/bin/python bench/thread_scaling.py --json build/bench/threads.json --reps 5

Rows (softmax, f32, examples/normalizers/softmax.mlir; SDPA's CPU flash kernel beside it):
  - one long sequence, B·H = 1, N = 16384, d = 64, fwd+bwd, causal and not: the backward
    splits a slice's queries over threads (runtime: backward_query_splits);
  - a decoder step, Nq = 1 against Nk = 65536 keys, B·H = 1, d = 64, forward and
    fwd+bwd: both split the keys over threads (runtime: key_splits);
  - short decoder steps, Nq = 1 against Nk = 16, 512 and 2048 keys, B·H = 8, d = 64,
    forward: calls of tens to hundreds of microseconds, where waking a helper costs as
    much as it saves (runtime: min_thread_work_ns);
  - the backward's rate at B·H = 8, N = 4096, d = 64 and 128 on 2 threads: (fwd+bwd − fwd)
    against the run's sgemm, FLOPs counted as 2.5× the forward's 4·N²·d per slice.
Each implementation's two thread counts are timed interleaved (rotating order) for --reps
repetitions after a warm-up, ours first, then SDPA's (scaling_row); the backward-rate
rows interleave both. The median is reported, with the foreign CPU load seen.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (machine facts, sgemm, foreign-CPU accounting)
import peers  # noqa: E402


def runner(kind, kernel, q, k, v, do, causal, pss):
    """A callable doing one pass of `kind` (ours | sdpa) on these tensors."""
    if kind == "ours":
        params = torch.empty(0)
        if pss == "fwd":
            return lambda: kernel.forward_with_stats(q, k, v, params, causal)[0]
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]

        def ours_step():
            for t in leaves:
                t.grad = None
            kernel(*leaves, params, causal).backward(do)
        return ours_step
    sdpa = peers.Sdpa()
    if pss == "fwd":
        return lambda: sdpa.forward(q, k, v, None, causal)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]

    def sdpa_step():
        for t in leaves:
            t.grad = None
        sdpa.attention(*leaves, None, causal).backward(do)
    return sdpa_step


def time_interleaved(impls, reps):
    """impls: {name: (threads, fn)} -> {name: (median seconds, samples)}, each warmed up
    once, then timed round-robin with the order rotating every round."""
    names = list(impls)
    for name in names:
        torch.set_num_threads(impls[name][0])
        impls[name][1]()
    samples = {name: [] for name in names}
    busy, wall = 0.0, 0.0
    for r in range(reps):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            threads, fn = impls[name]
            torch.set_num_threads(threads)
            c0 = bench.cpu_snapshot()
            t = time.perf_counter()
            fn()
            dt = time.perf_counter() - t
            busy += bench.foreign_cpu_seconds(c0, bench.cpu_snapshot())
            wall += dt
            samples[name].append(dt)
    return {n: statistics.median(s) for n, s in samples.items()}, samples, busy / max(wall, 1e-9)


def tensors(bh, nq, nk, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, bh, nq, d, generator=g)
    k, v = (torch.randn(1, bh, nk, d, generator=g) for _ in range(2))
    return q, k, v, torch.randn(1, bh, nq, d, generator=g)


# Decoder steps over short caches (B·H = 8, d = 64): 10-200 µs on one thread.
SHORT_DECODE_KEYS = (16, 512, 2048)


def scaling_row(kernel, label, bh, nq, nk, d, causal, pss, reps):
    """One implementation's 1 and 2 threads timed interleaved, then the other's: SDPA's
    OpenMP threads spin for milliseconds after each of its regions (libgomp's wait
    policy), so timed between its calls ours would run beside one more busy thread than
    the row sets up."""
    q, k, v, do = tensors(bh, nq, nk, d)
    med, samples, foreign = {}, {}, 0.0
    for kind in ("ours", "sdpa"):
        impls = {f"{kind}@{t}": (t, runner(kind, kernel, q, k, v, do, causal, pss))
                 for t in (1, 2)}
        kind_med, kind_samples, kind_foreign = time_interleaved(impls, reps)
        med.update(kind_med)
        samples.update(kind_samples)
        foreign = max(foreign, kind_foreign)
    return {"row": label, "bh": bh, "nq": nq, "nk": nk, "d": d, "causal": causal, "pass": pss,
            "ms": {n: round(s * 1e3, 3) for n, s in med.items()},
            "samples_ms": {n: [round(x * 1e3, 3) for x in s] for n, s in samples.items()},
            "ours_speedup": round(med["ours@1"] / med["ours@2"], 3),
            "sdpa_speedup": round(med["sdpa@1"] / med["sdpa@2"], 3),
            "ours_vs_sdpa@2": round(med["sdpa@2"] / med["ours@2"], 3),
            "foreign_cpus": round(foreign, 3)}


def backward_rate_row(kernel, n, d, reps, sgemm):
    bh = peers.B * peers.H
    q, k, v, do = tensors(bh, n, n, d)
    impls = {f"{kind}-{pss}": (2, runner(kind, kernel, q, k, v, do, False, pss))
             for kind in ("ours", "sdpa") for pss in ("fwd", "fwd+bwd")}
    med, samples, foreign = time_interleaved(impls, reps)
    fwd_flops = 4.0 * n * n * d * bh
    out = {"row": f"backward rate N={n} d={d}", "bh": bh, "n": n, "d": d,
           "ms": {name: round(s * 1e3, 3) for name, s in med.items()},
           "sgemm_gflops": sgemm, "foreign_cpus": round(foreign, 3)}
    for kind in ("ours", "sdpa"):
        bwd_s = med[f"{kind}-fwd+bwd"] - med[f"{kind}-fwd"]
        out[f"{kind}_bwd_gflops"] = round(2.5 * fwd_flops / bwd_s / 1e9, 1)
        out[f"{kind}_bwd_vs_sgemm"] = round(2.5 * fwd_flops / bwd_s / 1e9 / sgemm, 3)
    out["ours_vs_sdpa_fwd+bwd"] = round(med["sdpa-fwd+bwd"] / med["ours-fwd+bwd"], 3)
    return out


def markdown(info, rows):
    lines = [f"{info['cpu_model']}, torch {info['torch_version']}, BLAS {info.get('blas', '?')}; "
             f"sgemm {rows['sgemm']} GFLOP/s on 2 threads", "",
             "| row | pass | ours 1 thr (ms) | ours 2 thr (ms) | ours 2÷1 speed-up | "
             "SDPA 1 thr (ms) | SDPA 2 thr (ms) | SDPA speed-up | ours vs SDPA (2 thr) | "
             "foreign CPUs |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    def cell(ms):  # the short decoder steps take tens of microseconds
        return f"{ms:.3f}" if ms < 1 else f"{ms:.1f}"
    for r in rows["scaling"]:
        ms = {name: cell(x) for name, x in r["ms"].items()}
        lines.append(f"| {r['row']} | {r['pass']} | {ms['ours@1']} | {ms['ours@2']} | "
                     f"**{r['ours_speedup']:.2f}×** | {ms['sdpa@1']} | {ms['sdpa@2']} | "
                     f"{r['sdpa_speedup']:.2f}× | {r['ours_vs_sdpa@2']:.2f}× | "
                     f"{r['foreign_cpus']:.2f} |")
    lines += ["", "| backward, B·H = 8, 2 threads | ours fwd / fwd+bwd (ms) | ours bwd GFLOP/s | "
              "÷ sgemm | SDPA fwd / fwd+bwd (ms) | SDPA bwd GFLOP/s | ours vs SDPA fwd+bwd |",
              "|---|---|---|---|---|---|---|"]
    for r in rows["backward"]:
        ms = r["ms"]
        lines.append(f"| N = {r['n']}, d = {r['d']} | {ms['ours-fwd']:.0f} / {ms['ours-fwd+bwd']:.0f} "
                     f"| {r['ours_bwd_gflops']} | **{r['ours_bwd_vs_sgemm']:.2f}×** | "
                     f"{ms['sdpa-fwd']:.0f} / {ms['sdpa-fwd+bwd']:.0f} | {r['sdpa_bwd_gflops']} | "
                     f"{r['ours_vs_sdpa_fwd+bwd']:.2f}× |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--long-n", type=int, default=16384)
    ap.add_argument("--decode-keys", type=int, default=65536)
    ap.add_argument("--backward-n", type=int, default=4096)
    args = ap.parse_args()

    kernel, _ = peers.compile_ours(peers.WORKLOADS["softmax"])
    info = bench.machine_info(2, vec_isa=None)
    torch.set_num_threads(2)
    sgemm, _ = bench.measure_sgemm()
    rows = {"machine": info, "sgemm": sgemm, "scaling": [], "backward": []}
    n = args.long_n
    for causal in (False, True):
        rows["scaling"].append(scaling_row(kernel, f"B·H = 1, N = {n}, d = 64"
                                           + (", causal" if causal else ""),
                                           1, n, n, 64, causal, "fwd+bwd", args.reps))
        print(json.dumps(rows["scaling"][-1]), file=sys.stderr)
    for pss in ("fwd", "fwd+bwd"):
        rows["scaling"].append(scaling_row(kernel,
                                           f"Nq = 1, Nk = {args.decode_keys}, B·H = 1, d = 64",
                                           1, 1, args.decode_keys, 64, False, pss, args.reps * 5))
        print(json.dumps(rows["scaling"][-1]), file=sys.stderr)
    for keys in SHORT_DECODE_KEYS:
        rows["scaling"].append(scaling_row(kernel, f"Nq = 1, Nk = {keys}, B·H = 8, d = 64",
                                           8, 1, keys, 64, False, "fwd", args.reps * 25))
        print(json.dumps(rows["scaling"][-1]), file=sys.stderr)
    for d in (64, 128):
        rows["backward"].append(backward_rate_row(kernel, args.backward_n, d, args.reps, sgemm))
        print(json.dumps(rows["backward"][-1]), file=sys.stderr)
    print(markdown(info, rows))
    if args.json:
        bench.write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
