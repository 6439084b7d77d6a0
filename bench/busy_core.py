"""More threads are never slower: 1 thread against 2 while a busy loop holds one core.

    .venv/bin/python bench/busy_core.py                  # markdown on stdout
    .venv/bin/python bench/busy_core.py --reps 15 --json build/bench/busy_core.json
    .venv/bin/python bench/busy_core.py --no-busy        # the same rows, no busy loop

A child process spins on CPU 0 (sched_setaffinity) for the whole run, as a host that
contends one vCPU does. Rows (softmax, f32, non-causal, SDPA's CPU kernel beside it): a
decoder step (Nq = 1 against 65536 keys, B·H = 1; and 8 heads against 8192 keys), forward
and fwd+bwd, and one long head (B·H = 1, N = 8192, d = 64) fwd+bwd. Work split into
halves, one per thread, waits for the thread that shares the busy core; the runtime's
items (query blocks, key chunks, backward calls) are several per thread, taken as threads
finish (runtime.h: kItemsPerThread), so 2 threads should not be slower than 1. Each
implementation's 1 and 2 threads are timed interleaved (thread_scaling.scaling_row:
rotating order, median), ours then SDPA's: SDPA's OpenMP threads spin after each of its
regions, which would put a second busy thread beside ours. The load average is printed
before and after, since other processes on the machine move these numbers.
"""
import argparse
import json
import os
import subprocess
import sys

import torch

import thread_scaling  # noqa: E402  (sys.path holds bench/: runner, tensors, timing)
from thread_scaling import bench, peers  # noqa: E402

# (label, B·H, Nq, Nk, d, passes)
ROWS = [("decode, B·H = 1", 1, 1, 65536, 64, ("fwd", "fwd+bwd")),
        ("decode, B·H = 8", 8, 1, 8192, 64, ("fwd", "fwd+bwd")),
        ("one head, N = 8192", 1, 8192, 8192, 64, ("fwd+bwd",))]

BUSY_LOOP = "import os; os.sched_setaffinity(0, {0})\nwhile True: pass"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-busy", action="store_true", help="no busy loop (the reference)")
    args = ap.parse_args()

    kernel, _ = peers.compile_ours(peers.WORKLOADS["softmax"])
    info = bench.machine_info(2, vec_isa=None)
    busy = None if args.no_busy else subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
    load_before = os.getloadavg()
    rows = []
    try:
        for label, bh, nq, nk, d, passes in ROWS:
            for pss in passes:
                reps = args.reps if nq == 1 else max(3, args.reps // 5)
                row = thread_scaling.scaling_row(kernel, label, bh, nq, nk, d, False, pss, reps)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
    finally:
        if busy:
            busy.kill()
            busy.wait()
    load_after = os.getloadavg()

    print(f"{info['cpu_model']}, torch {info['torch_version']}, "
          f"{'no busy loop' if args.no_busy else 'a busy loop pinned to CPU 0'}, median of "
          f"{args.reps} (3 for the long head); load average (1 min) {load_before[0]:.1f} before, "
          f"{load_after[0]:.1f} after\n")
    print("| row | pass | ours 1 thr (ms) | ours 2 thr (ms) | ours 1÷2 | SDPA 1 thr (ms) | "
          "SDPA 2 thr (ms) | SDPA 1÷2 | foreign CPUs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ms = r["ms"]
        print(f"| {r['row']}, Nq = {r['nq']}, Nk = {r['nk']}, d = {r['d']} | {r['pass']} | "
              f"{ms['ours@1']:.2f} | {ms['ours@2']:.2f} | **{r['ours_speedup']:.2f}×** | "
              f"{ms['sdpa@1']:.2f} | {ms['sdpa@2']:.2f} | {r['sdpa_speedup']:.2f}× | "
              f"{r['foreign_cpus']:.2f} |")
    if args.json:
        bench.write_json(args.json, {"machine": info, "busy": not args.no_busy,
                                     "load": [load_before, load_after], "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
