#!/usr/bin/env python3
"""attn CPU benchmark: our compiled kernels and their peers, timed in the same run.

    .venv/bin/python bench/bench.py [--quick] [--only softmax,alibi] [--peers sdpa,flex]
                                    [--n ...] [--d ...] [--causal no|yes|both]
                                    [--baseline-compiler OLD/attn-compile] [--resume]
    .venv/bin/python bench/bench.py --sparsity [--n 16384] [--d 64]

See bench/README.md for what is measured and the conventions. Always runs to the end: a
missed target is a printed FAIL, a config that would take too long is skipped with a
note, and an error in one config is recorded in that row.
"""

import argparse
import datetime
import gc
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
# torch.compile's kernels: a cache of the bench's own (inductor reads this when it compiles)
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(REPO, "build", "bench", "inductor-cache"))

import torch  # noqa: E402

import peers  # noqa: E402
import report  # noqa: E402

SGEMM_N = 2048
CONTENDED = 0.15  # CPUs used by other processes during a row's timed calls
PEER_FAMILIES = ["sdpa", "flex", "iree", "compiled", "eager", "gemms", "iree-default"]
DEFAULT_PEERS = PEER_FAMILIES[:-1]  # iree-default: IREE's own tiling, 15-20x slower, on request

_t0 = time.perf_counter()


def write_json(path, obj):
    """`obj` as indented JSON at `path`, its directory made if missing."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)


def log(msg):
    print(f"[{time.perf_counter() - _t0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- machine

def _status_kb(key, path="/proc/self/status"):
    with open(path) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def reset_peak_rss():
    """Reset VmHWM to the current RSS (Linux >= 4.0). Returns False if not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class PeakRSS:
    """Extra peak RSS (MiB) of a block: VmHWM after minus VmRSS before (VmHWM reset)."""

    def __enter__(self):
        self.reset = reset_peak_rss()
        self.rss0 = _status_kb("VmRSS")
        self.hwm0 = _status_kb("VmHWM")
        return self

    def __exit__(self, *exc):
        hwm = _status_kb("VmHWM")
        base = self.rss0 if self.reset else self.hwm0
        self.extra_mib = max(0, hwm - base) / 1024.0
        return False


def _loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return [-1.0, -1.0, -1.0]


def cpu_snapshot():
    """(wall s, busy jiffies of the whole machine, jiffies of this process + waited-for
    children). busy - own = CPU time other processes took."""
    try:
        with open("/proc/stat") as f:
            vals = [int(x) for x in f.readline().split()[1:]]
        busy = sum(vals) - vals[3] - (vals[4] if len(vals) > 4 else 0)  # minus idle, iowait
        with open("/proc/self/stat") as f:
            st = f.read().rsplit(")", 1)[1].split()
        own = sum(int(x) for x in st[11:15])  # utime stime cutime cstime
        return time.perf_counter(), busy, own
    except (OSError, ValueError, IndexError):
        return time.perf_counter(), 0, 0


def foreign_cpu_seconds(a, b):
    """CPU seconds other processes took between two snapshots."""
    return max(0.0, ((b[1] - a[1]) - (b[2] - a[2])) / os.sysconf("SC_CLK_TCK"))


def foreign_cpu(a, b):
    """Average number of CPUs other processes kept busy between two snapshots."""
    wall = b[0] - a[0]
    return foreign_cpu_seconds(a, b) / wall if wall > 0 else 0.0


def machine_info(threads, vec_isa):
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), cpu)
    except OSError:
        pass
    config = torch.__config__.show()
    blas = next((part.split("=", 1)[1] for line in config.splitlines()
                 for part in line.replace(",", " ").split() if part.startswith("BLAS_INFO=")), "?")
    blas_line = next((line.strip(" -") for line in config.splitlines()
                      if "Math Kernel Library" in line or "OpenBLAS" in line), blas)
    try:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = ""
    versions = {}
    for package in ("torch", "iree-base-compiler", "iree-base-runtime"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu_model": cpu,
        "logical_cpus": os.cpu_count(),
        "mem_total_gib": round(_status_kb("MemTotal", "/proc/meminfo") / 2 ** 20, 1),
        "avx512f": peers.host_has_avx512(),
        "threads": threads,
        "torch_version": torch.__version__,
        "versions": versions,
        "torch_parallel_backend": [line.strip() for line in torch.__config__.parallel_info().splitlines()
                                   if "backend" in line.lower()],
        "blas": blas,
        "blas_detail": blas_line,
        "inductor_vec_isa": vec_isa,
        "python": sys.executable + " " + platform.python_version(),
        "git_commit": commit,
        "loadavg_start": _loadavg(),
    }


def measure_sgemm(reps=7):
    a, b = torch.randn(SGEMM_N, SGEMM_N), torch.randn(SGEMM_N, SGEMM_N)
    c = torch.empty(SGEMM_N, SGEMM_N)
    torch.mm(a, b, out=c)
    runs = []
    for _ in range(reps):
        t = time.perf_counter()
        torch.mm(a, b, out=c)
        runs.append(round(2.0 * SGEMM_N ** 3 / (time.perf_counter() - t) / 1e9, 2))
    return max(runs), runs


# ----------------------------------------------------------------------------- timing

def flops(workload, n, d, causal, pss):
    """Useful FLOPs: 4·d per (query, key) pair a query sees (forward), x2.5 for fwd+bwd.
    Pairs: N² (full), N²/2 (causal), the exact count inside a sliding window."""
    if workload == "sliding_window":
        w = min(peers.WINDOW, n - 1)
        pairs = n * (w + 1) - w * (w + 1) / 2 if causal else n * (2 * w + 1) - w * (w + 1)
    else:
        pairs = n * n / (2.0 if causal else 1.0)
    f = 4.0 * pairs * d * peers.B * peers.H
    return f * 2.5 if pss == "fwd+bwd" else f


class Timed:
    """One implementation in a row: its bound runner and every call's measurements."""

    def __init__(self, peer, run, setup_s):
        self.peer, self.name, self.run, self.setup_s = peer, peer.name, run, setup_s
        self.first_call_s, self.verify, self.cache = None, None, None
        self.reset()

    def reset(self):
        """Forget the measurements of an attempt (a contended row is measured again)."""
        self.samples, self.busy_s, self.wall_s, self.rss = [], 0.0, 0.0, 0.0

    def call(self):
        """One call: (output, seconds); its wall time, the foreign CPU time during it and
        the peak RSS accumulated."""
        c0 = cpu_snapshot()
        with PeakRSS() as m:
            t = time.perf_counter()
            out = self.run()
            dt = time.perf_counter() - t
        self.busy_s += foreign_cpu_seconds(c0, cpu_snapshot())
        self.wall_s += dt
        self.rss = max(self.rss, m.extra_mib)
        return out, dt

    def wants(self, budget, min_reps, max_reps):
        spent = sum(self.samples)
        return len(self.samples) < min_reps or (spent < budget and len(self.samples) < max_reps)


def inductor_cache_counts():
    from torch._dynamo.utils import counters
    return counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"]


def measure_row(timed, budget, min_reps, max_reps):
    """Warm-up calls in order (ours first): each peer's first output is checked against
    ours and a peer that disagrees is not timed (the very first call, where torch.compile
    compiles, is kept as first_call_s). Then repetitions interleaved round-robin,
    the order rotating every round (A B, B A, ...), until each has at least min_reps
    samples and has spent its budget (at most max_reps). Returns the implementations that
    were timed; the others carry their verification or error."""
    ref, live = None, []
    for t in timed:
        hits0 = inductor_cache_counts()
        try:
            out, dt = t.call()
        except Exception as e:  # noqa: BLE001
            t.error = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            t.trace = traceback.format_exc()[-2000:]
            if ref is None:
                return []  # ours failed: nothing to compare with
            continue
        if t.first_call_s is None:
            t.first_call_s = dt
            hits1 = inductor_cache_counts()
            if hits1 != hits0:
                t.cache = "hit" if hits1[1] == hits0[1] else "miss"
        if ref is None:
            ref = out
            t.verify = peers.compare(out, out, 0.0)  # finiteness of ours
        elif not t.peer.verifiable:
            t.verify = {"ok": True, "rel_err": {}, "tol": None, "compared": False}
        else:
            t.verify = peers.compare(out, ref, peers.TOLERANCE[t.peer.dtype])
        del out
        if t.verify["ok"]:
            live.append(t)
        elif not live:
            return []  # ours is not finite
    del ref
    gc.collect()
    rounds = 0
    while any(t.wants(budget, min_reps, max_reps) for t in live):
        shift = rounds % len(live)
        for t in live[shift:] + live[:shift]:
            if t.wants(budget, min_reps, max_reps):
                out, dt = t.call()
                del out
                t.samples.append(dt)
        rounds += 1
    return live


class Predictor:
    """Predict a call's time from a measured one of the same (impl, workload, causal,
    pass) scaled by N^2*d (the work of the quadratic algorithms)."""

    def __init__(self):
        self.seen = {}

    def add(self, key, n, d, seconds):
        self.seen.setdefault(key, []).append((n * n * d, seconds))

    def predict(self, key, n, d):
        w = n * n * d
        cand = [x for x in self.seen.get(key, []) if x[0] <= w]
        if not cand:
            return None
        w0, s0 = max(cand)
        return s0 * w / w0


# ----------------------------------------------------------------------------- block sparsity

# A causal sliding window of 256 keys (j <= i < j + 256), as an attn.mask.
WINDOW_256 = """
attn.mask @window {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %causal = arith.cmpi ule, %j, %i : index
  %width = arith.constant 256 : index
  %reach = arith.addi %j, %width : index
  %recent = arith.cmpi ugt, %reach, %i : index
  %keep = arith.andi %causal, %recent : i1
  attn.yield %keep : i1
}
"""
DOCUMENTS = 8
# (row, IR source: a file of examples/ or mask text joined to softmax.mlir, is_causal,
# target speed-up over the unmasked kernel: issue 14's must-show)
SPARSITY_ROWS = [
    ("unmasked", "examples/normalizers/softmax.mlir", False, None),
    ("causal (attn.mask j <= i)", "examples/families/causal.mlir", False, 1.8),
    ("causal (is_causal=True)", "examples/normalizers/softmax.mlir", True, None),
    ("sliding window 256", WINDOW_256, False, 10.0),
    (f"document mask, {DOCUMENTS} equal documents", "examples/families/document_mask.mlir",
     False, 4.0),
]


def run_sparsity(args):
    """Block-sparse masks (issue 14, part 6), forward+backward at B = H = 1, f32: each
    masked kernel's median time against the unmasked softmax kernel's, same run,
    interleaved round-robin after one warm-up call each."""
    import attn

    n, d = (args.n or [16384])[0], (args.d or [64])[0]
    torch.set_num_threads(args.threads)
    info = machine_info(args.threads, vec_isa=None)
    info["command"] = " ".join([os.path.relpath(sys.executable, REPO)] + sys.argv)
    snap0 = cpu_snapshot()
    softmax = open(os.path.join(REPO, "examples/normalizers/softmax.mlir")).read()
    gen = torch.Generator().manual_seed(0)
    q, k, v, dout = (torch.randn(1, 1, n, d, generator=gen) for _ in range(4))
    doc = (torch.arange(n) * DOCUMENTS // n).view(1, n)
    rows = []
    for name, source, is_causal, target in SPARSITY_ROWS:
        text = (open(os.path.join(REPO, source)).read() if source.endswith(".mlir")
                else source + softmax.replace("attn.kernel @softmax_attention normalizer(@softmax)",
                                              "attn.kernel @masked normalizer(@softmax) mask(@window)"))
        kernel = attn.compile(text, dtypes=("f32",))
        inputs = {"doc": doc} if any(i["name"] == "doc" for i in kernel.inputs) else None
        rows.append({"row": name, "kernel": kernel, "is_causal": is_causal, "inputs": inputs,
                     "target": target, "samples": []})
        log(f"sparsity: {name} compiled")

    def call(row):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        t0 = time.perf_counter()
        out = row["kernel"](*leaves, None, row["is_causal"], None, inputs=row["inputs"])
        out.backward(dout)
        return time.perf_counter() - t0

    for row in rows:
        call(row)
    for rep in range(args.min_reps):
        for row in rows[rep % len(rows):] + rows[:rep % len(rows)]:
            row["samples"].append(call(row))
    dense = statistics.median(rows[0]["samples"])
    report_rows, failed = [], []
    for row in rows:
        median = statistics.median(row["samples"])
        speedup = dense / median
        ok = row["target"] is None or speedup >= row["target"]
        if not ok:
            failed.append(row["row"])
        report_rows.append({"row": row["row"], "ms": round(median * 1e3, 1),
                            "samples_ms": [round(x * 1e3, 1) for x in row["samples"]],
                            "speedup": round(speedup, 2), "target": row["target"], "ok": ok})
    info["foreign_cpus_avg"] = round(foreign_cpu(snap0, cpu_snapshot()), 3)
    info["loadavg_end"] = _loadavg()
    print(f"\nBlock sparsity, fwd+bwd, N = {n}, d = {d}, B = H = 1, f32, {args.threads} threads "
          f"(loadavg start {info['loadavg_start']}, end {info['loadavg_end']}, other processes "
          f"{info['foreign_cpus_avg']} CPUs)\n")
    print("| mask | median ms | speed-up vs unmasked | target |")
    print("|---|---:|---:|---|")
    for r in report_rows:
        target = "" if r["target"] is None else \
            f">= {r['target']}x: {'ok' if r['ok'] else 'FAIL'}"
        print(f"| {r['row']} | {r['ms']:.1f} | {r['speedup']:.2f}x | {target} |")
    json_path = args.json or os.path.join(REPO, "build", "bench", "sparsity.json")
    write_json(json_path, {"meta": info, "n": n, "d": d, "rows": report_rows})
    print(f"\nJSON: {json_path}")
    return 1 if failed else 0


# ----------------------------------------------------------------------------- memory mode

def memory_child(n, d, impl_kind, threads):
    """Runs in a fresh process: softmax forward+backward at B = H = 1; prints one JSON line."""
    torch.set_num_threads(threads)
    res = {"n": n, "d": d, "impl": impl_kind, "normalizer": "softmax", "B": 1, "H": 1}
    workload = peers.WORKLOADS["softmax"]
    peer = peers.Ours(peers.compile_ours(workload)[0]) if impl_kind == "ours" else peers.Eager()
    run, _ = peer.bind(peers.Inputs(workload, 128, d, False, seed=7, b=1, h=1), "fwd+bwd")
    run()  # warm-up at a small size: loads the artifact, starts the thread pool
    run, _ = peer.bind(peers.Inputs(workload, n, d, False, seed=8, b=1, h=1), "fwd+bwd")
    res["inputs_mib"] = 4 * n * d * 4 / 2 ** 20  # q, k, v, dO
    res["outputs_mib"] = 4 * n * d * 4 / 2 ** 20  # O, dq, dk, dv
    res["nxn_f32_mib"] = n * n * 4 / 2 ** 20
    res["rss_before_mib"] = _status_kb("VmRSS") / 1024.0
    gc.collect()
    t = time.perf_counter()
    with PeakRSS() as m:
        out = run()
    res["seconds"] = time.perf_counter() - t
    res["extra_peak_rss_mib"] = m.extra_mib
    res["hwm_reset"] = m.reset
    res["finite"] = all(bool(torch.isfinite(x).all()) for x in out.values())
    res["ok"] = True
    print(json.dumps(res))


def run_memory(n, d=64, impl_kind="ours", threads=2, timeout=600):
    cmd = [sys.executable, os.path.abspath(__file__), "--memory-child", str(n),
           "--memory-impl", impl_kind, "--d", str(d), "--threads", str(threads)]
    log(f"memory: {impl_kind} softmax fwd+bwd B=H=1 N={n} d={d} (fresh process)")
    t = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"n": n, "d": d, "impl": impl_kind, "normalizer": "softmax", "ok": False,
                "error": f"timed out after {timeout} s"}
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode != 0 or not lines:
        return {"n": n, "d": d, "impl": impl_kind, "normalizer": "softmax", "ok": False,
                "error": f"rc {r.returncode}: {(r.stderr or r.stdout).strip()[-1500:]}"}
    res = json.loads(lines[-1])
    res["subprocess_wall_s"] = time.perf_counter() - t
    return res


# ----------------------------------------------------------------------------- sanity

SANITY_TOL = 1e-4


def sanity_check(workload, kernel, n=256, d=64):
    """Ours (f32) vs the eager composition in f64: O (both ops) and every gradient."""
    out = {}
    for causal in workload.causal_modes:
        x = peers.Inputs(workload, n, d, causal, seed=1234)
        ours = peers.Ours(kernel)
        got = ours.bind(x, "fwd+bwd")[0]()
        got["O_fwd_op"] = ours.bind(x, "fwd")[0]()["O"]  # attention_forward agrees too
        ref = peers.Eager(dtype=torch.float64).bind(x, "fwd+bwd")[0]()
        ref["O_fwd_op"] = ref["O"]
        out["causal" if causal else "noncausal"] = peers.compare(got, ref, SANITY_TOL)
    return out


# ----------------------------------------------------------------------------- sweep

def make_peers(args, threads):
    """The peer objects of this run, by family (each with its f32 and bf16 variants)."""
    made = {}
    dtypes = [torch.float32] + ([torch.bfloat16] if "bf16" in args.dtypes else [])
    for family in args.peers:
        try:
            if family == "sdpa":
                made[family] = [peers.Sdpa(dt) for dt in dtypes]
            elif family == "flex":
                made[family] = [peers.Flex(dt) for dt in dtypes]
            elif family in ("iree", "iree-default"):
                made[family] = [peers.Iree(threads, os.path.join(REPO, "build", "bench", "iree"),
                                           tuned=family == "iree")]
            elif family == "compiled":
                made[family] = [peers.Eager(compiled=True)]
            elif family == "eager":
                made[family] = [peers.Eager()]
            elif family == "gemms":
                made[family] = [peers.GemmFloor()]
        except Exception as e:  # noqa: BLE001  (a missing package: say so, run the rest)
            log(f"peer {family} unavailable: {e}")
            made[family] = str(e)
    return made


def row_key(r):
    return (r["workload"], r["n"], r["d"], r["causal"], r["pass"])


def run_row(workload, n, d, causal, pss, impls, args, pred, mem_bytes):
    """Measure one row; returns its JSON dict."""
    row = {"workload": workload.name, "n": n, "d": d, "causal": causal, "pass": pss,
           "flops": flops(workload.name, n, d, causal, pss), "impls": {}}
    x = peers.Inputs(workload, n, d, causal, seed=n * 7 + d)
    timed = []
    for peer in impls:
        entry = row["impls"].setdefault(peer.name, {})
        scores_bytes = peers.B * peers.H * n * n * 4
        guess = pred.predict((peer.name, workload.name, causal, pss), n, d)
        if peer.family in ("eager", "compiled", "gemms") and scores_bytes > mem_bytes / 4:
            entry["skipped"] = (f"materialises N×N f32 scores: {scores_bytes / 2 ** 30:.1f} GiB "
                                f"per tensor (> 1/4 of RAM)")
        elif guess is not None and guess > args.skip_over:
            entry["skipped"] = f"predicted {guess:.0f} s per call (> {args.skip_over:.0f} s)"
        if "skipped" in entry:
            if peer.family == "ours":
                return row  # nothing to compare with
            continue
        try:
            run, setup_s = peer.bind(x, pss)
        except peers.Unsupported as e:
            entry["unsupported"] = str(e)
            continue
        except Exception as e:  # noqa: BLE001
            entry["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            continue
        timed.append(Timed(peer, run, setup_s))
        if isinstance(peer, peers.Iree):
            timed[-1].compile_s = peer.compile_s
    if not timed or timed[0].peer.family != "ours":
        return row
    if len(timed) == 1:  # ours alone: no ratio to take
        row["impls"]["ours"]["skipped"] = "no peer can run this config"
        return row
    best = None
    for attempt in range(args.retries + 1):
        if attempt:
            time.sleep(args.retry_pause)
            for t in timed:
                t.reset()
        c0 = cpu_snapshot()
        live = measure_row(timed, args.budget, args.min_reps, args.max_reps)
        busy = foreign_cpu(c0, cpu_snapshot())
        snapshot = {t.name: row_entry(t, row["flops"]) for t in timed}
        if best is None or busy < best[0]:
            best = (busy, snapshot)
        if busy <= CONTENDED or not live:
            break
        log(f"  {workload.name} N={n} d={d} {pss}: contended ({busy:.2f} CPUs used by others), "
            f"attempt {attempt + 1}")
    row["foreign_cpus"], snapshot = round(best[0], 3), best[1]
    row["attempts"] = attempt + 1
    for name, entry in snapshot.items():
        row["impls"][name].update(entry)
        if "ms" in entry:
            pred.add((name, workload.name, causal, pss), n, d, entry["ms"] / 1e3)
    return row


def row_entry(t, row_flops):
    e = {"setup_s": round(t.setup_s, 3)}
    if getattr(t, "error", None):
        e["error"] = t.error
        e["traceback"] = t.trace
        return e
    e["first_call_s"] = round(t.first_call_s, 3)
    e["verify"] = t.verify
    if isinstance(t.peer, peers.Sdpa):
        e["backend"] = t.peer.backend
    if t.cache:
        e["inductor_cache"] = t.cache
    if hasattr(t, "compile_s"):
        e["compile_s"] = t.compile_s
    if not t.samples:
        return e
    med = statistics.median(t.samples)
    e.update({"ms": med * 1e3, "gflops": row_flops / med / 1e9,
              "samples_ms": [round(s * 1e3, 3) for s in t.samples], "reps": len(t.samples),
              "foreign_cpus": round(t.busy_s / max(t.wall_s, 1e-9), 3),
              "peak_extra_rss_mib": round(t.rss, 1)})
    if t.peer.family in ("compiled", "flex"):  # torch.compile's JIT runs in the first call
        e["compile_s"] = round(max(0.0, t.first_call_s - med), 3)
    return e


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="N = 4096, d = 64, non-causal (ALiBi causal), no eager peer, shorter "
                         "budget, no retries, no memory run")
    ap.add_argument("--json", default=None, help="results file (default build/bench/results.json, "
                    "results-quick.json with --quick)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the rows already in --json and measure only the missing ones")
    ap.add_argument("--stop-after", type=float, default=None, metavar="S",
                    help="start no row that is predicted to end after S seconds (rerun with --resume)")
    ap.add_argument("--only", default=",".join(peers.WORKLOADS),
                    help=f"workloads, comma-separated (default all: {','.join(peers.WORKLOADS)})")
    ap.add_argument("--peers", default=None,
                    help=f"peers, comma-separated, or 'none' (default {','.join(DEFAULT_PEERS)}, "
                         f"quick: without eager; known: {','.join(PEER_FAMILIES)})")
    ap.add_argument("--dtypes", default="f32,bf16", help="peer dtypes: f32 and/or bf16 (ours is f32)")
    ap.add_argument("--pass", dest="passes", choices=["fwd", "fwd+bwd", "both"], default="both")
    ap.add_argument("--n", nargs="+", type=int, default=None)
    ap.add_argument("--d", nargs="+", type=int, default=None)
    ap.add_argument("--causal", choices=["both", "no", "yes"], default=None)
    ap.add_argument("--baseline-compiler", default=None, metavar="ATTN_COMPILE",
                    help="also time our kernels compiled by this attn-compile ('ours@base'), "
                         "interleaved with ours, and flag rows more than 3%% slower")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-over", type=float, default=20.0,
                    help="skip an implementation whose single call is predicted to take longer (s)")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds of timed calls per implementation and row (default 1.5, quick 0.5)")
    ap.add_argument("--min-reps", type=int, default=3)
    ap.add_argument("--max-reps", type=int, default=15)
    ap.add_argument("--memory", type=int, nargs="*", default=None, metavar="N",
                    help="only run the peak-RSS mode at these N (fresh subprocess each)")
    ap.add_argument("--sparsity", action="store_true",
                    help="only the block-sparse masks against the unmasked kernel (fwd+bwd)")
    ap.add_argument("--memory-impl", choices=["ours", "eager"], default="ours")
    ap.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--no-memory", action="store_true", help="full run without the memory runs")
    ap.add_argument("--retries", type=int, default=None,
                    help="measure a contended row again up to this many times (default 1, quick 0)")
    ap.add_argument("--retry-pause", type=float, default=5.0, help=argparse.SUPPRESS)
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                    help="first wait up to S seconds for a 10 s window in which other "
                         "processes use < 0.05 CPUs")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    if args.memory_child is not None:
        memory_child(args.memory_child, (args.d or [64])[0], args.memory_impl, args.threads)
        return 0
    if args.sparsity:
        return run_sparsity(args)

    for w in args.only.split(","):
        if w not in peers.WORKLOADS:
            ap.error(f"--only: unknown workload {w!r} (known: {', '.join(peers.WORKLOADS)})")
    workloads = [peers.WORKLOADS[w] for w in args.only.split(",")]
    args.peers = args.peers or ",".join(p for p in DEFAULT_PEERS if not (args.quick and p == "eager"))
    args.peers = [] if args.peers == "none" else [p for p in args.peers.split(",") if p]
    args.retries = (0 if args.quick else 1) if args.retries is None else args.retries
    for p in args.peers:
        if p not in PEER_FAMILIES:
            ap.error(f"--peers: unknown peer {p!r} (known: {', '.join(PEER_FAMILIES)})")
    ns = args.n or ([4096] if args.quick else [1024, 4096, 16384])
    ds = args.d or ([64] if args.quick else [64, 128])
    causals = {"both": [False, True], "no": [False], "yes": [True]}[
        args.causal or ("no" if args.quick else "both")]
    passes = ["fwd", "fwd+bwd"] if args.passes == "both" else [args.passes]
    args.budget = args.budget or (0.5 if args.quick else 1.5)
    json_path = args.json or os.path.join(REPO, "build", "bench",
                                          "results-quick.json" if args.quick else "results.json")
    os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)

    results = {"format": 2, "chunks": [], "rows": [], "memory": [], "sanity": {}, "artifacts": {}}
    if args.resume and os.path.exists(json_path):
        with open(json_path) as f:
            results = json.load(f)
        if results.get("format") != 2:
            ap.error(f"--resume: {json_path} was written by an older bench.py; use another --json")

    def save():
        with open(json_path + ".tmp", "w") as f:
            json.dump(results, f, indent=1)
        os.replace(json_path + ".tmp", json_path)

    if args.memory is not None:  # memory-only mode
        for n in args.memory or [16384]:
            res = run_memory(n, (args.d or [64])[0], args.memory_impl, args.threads)
            results["memory"].append(res)
            print(report.memory_line(res))
        save()
        return 0

    if args.wait_quiet > 0:
        t_end = time.perf_counter() + args.wait_quiet
        while True:
            a = cpu_snapshot()
            time.sleep(10)
            busy = foreign_cpu(a, cpu_snapshot())
            if busy < 0.05 or time.perf_counter() > t_end:
                log(f"wait-quiet: other processes use {busy:.2f} CPUs; starting")
                break
            log(f"wait-quiet: other processes use {busy:.2f} CPUs; waiting")

    vec_isa = peers.prepare_torch_compile()
    info = machine_info(args.threads, vec_isa)
    info["command"] = " ".join([os.path.relpath(sys.executable, REPO)] + sys.argv)
    info["baseline_compiler"] = args.baseline_compiler
    chunk = {"index": len(results["chunks"]), "meta": info}
    results["chunks"].append(chunk)
    snap0 = cpu_snapshot()
    log(f"{info['cpu_model']}, {args.threads} threads, torch {info['torch_version']}, BLAS "
        f"{info['blas']}, inductor vector ISA {vec_isa}")
    chunk["sgemm_start"] = measure_sgemm()
    log(f"sgemm {SGEMM_N}^3 f32: best {chunk['sgemm_start'][0]:.1f} GFLOP/s {chunk['sgemm_start'][1]}")

    # ---- our artifacts (and the baseline's), sanity vs float64
    kernels = {}
    compilers = [("ours", None)] + ([("ours@base", args.baseline_compiler)]
                                     if args.baseline_compiler else [])
    for w in workloads:
        for name, compiler in compilers:
            try:
                kernel, dt = peers.compile_ours(w, compiler)
                kernels[(w.name, name)] = kernel
                results["artifacts"][f"{w.name}:{name}"] = {
                    "path": kernel.path, "compile_s": round(dt, 2),
                    "compiler": compiler or "build/bin/attn-compile"}
                log(f"{w.name}: {name} artifact in {dt:.1f} s")
            except Exception as e:  # noqa: BLE001
                results["artifacts"][f"{w.name}:{name}"] = {"error": str(e)}
                log(f"{w.name}: {name} COMPILE/LOAD ERROR {e}")
        if w.composition and (w.name, "ours") in kernels and w.name not in results["sanity"]:
            results["sanity"][w.name] = sanity_check(w, kernels[(w.name, "ours")])
            for c, v in results["sanity"][w.name].items():
                log(f"{w.name} sanity {c}: {'ok' if v['ok'] else 'MISMATCH'} {v['rel_err']}")
    save()

    # ---- memory (full mode), first: it is a target
    if not (args.quick or args.no_memory or results["memory"]) and "softmax" in args.only.split(","):
        for n, impl_kind in ((4096, "ours"), (16384, "ours"), (16384, "eager")):
            results["memory"].append(run_memory(n, 64, impl_kind, args.threads))
            log(report.memory_line(results["memory"][-1]))
            save()

    # ---- the sweep
    made = make_peers(args, args.threads)
    chunk["peers_unavailable"] = {k: v for k, v in made.items() if isinstance(v, str)}
    pred = Predictor()
    for r in results["rows"]:  # resumed rows feed the predictions
        for name, e in r["impls"].items():
            if "ms" in e:
                pred.add((name, r["workload"], r["causal"], r["pass"]), r["n"], r["d"], e["ms"] / 1e3)
    done = {row_key(r): r for r in results["rows"]}
    mem_bytes = info["mem_total_gib"] * 2 ** 30
    incomplete, ran = [], False
    for w in workloads:
        modes = [c for c in w.causal_modes if c in causals] or list(w.causal_modes)
        for d in ds:
            for causal in modes:
                for n in sorted(ns):
                    for pss in passes:
                        impls = [peers.Ours(kernels[(w.name, name)], name)
                                 for name, _ in compilers if (w.name, name) in kernels]
                        impls += [p for family in args.peers if not isinstance(made[family], str)
                                  for p in made[family] if p.applies(w)]
                        key = (w.name, n, d, causal, pss)
                        old = done.get(key)
                        if old and all(p.name in old["impls"] for p in impls):
                            continue
                        guess = sum((pred.predict((p.name, w.name, causal, pss), n, d) or 0.0)
                                    * (1 + args.min_reps) for p in impls)
                        if args.stop_after and ran and \
                                time.perf_counter() - _t0 + guess > args.stop_after:
                            incomplete.append(key)
                            continue
                        row = run_row(w, n, d, causal, pss, impls, args, pred, mem_bytes)
                        ran = True
                        row["chunk"] = chunk["index"]
                        if old:
                            results["rows"].remove(old)
                        results["rows"].append(row)
                        done[key] = row
                        log(report.row_line(row))
                        save()
                        gc.collect()

    chunk["sgemm_end"] = measure_sgemm()
    chunk["foreign_cpus_avg"] = round(foreign_cpu(snap0, cpu_snapshot()), 3)
    chunk["loadavg_end"] = _loadavg()
    chunk["wall_s"] = round(time.perf_counter() - _t0, 1)
    chunk["incomplete"] = [list(k) for k in incomplete]
    results["targets"] = report.check_targets(results)
    save()
    print(report.markdown(results))
    if incomplete:
        print(f"\nINCOMPLETE: {len(incomplete)} rows left (--stop-after); run the same command "
              f"with --resume to continue")
    print(f"\nJSON: {json_path}   (wall {chunk['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
