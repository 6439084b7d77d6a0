#!/usr/bin/python3
"""attn CPU benchmark: our compiled kernels vs the eager LibTorch composition.

    /usr/bin/python3 bench/bench.py [--quick] [--json out.json] [--normalizers ...]
                                    [--n ...] [--d ...] [--memory N]

See bench/README.md for what is measured and the conventions. Always runs to the end:
a missed target is a printed FAIL, a config that would take too long is skipped with
a note, and an error in one config is recorded in that row.
"""

import argparse
import datetime
import gc
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

import torch  # noqa: E402

import eager  # noqa: E402

ALL_NORMALIZERS = ["softmax", "tanhmax", "multimax", "expressive", "sigmoid"]
# Params used for timing and for the sanity check, in kernel order. MultiMax uses
# non-trivial temperatures (its initial values tb = td = 1 make it plain softmax).
BENCH_PARAMS = {
    "softmax": [],
    "tanhmax": [],
    "multimax": [0.8, 1.2, -1.0, 1.0, 0.9, 1.1, -2.0, 2.0],
    "expressive": [],
    "sigmoid": [-4.0],
}
B, H = 2, 4  # B*H = 8
TARGET_N, TARGET_D = 2048, 64
SGEMM_N = 2048
CONTENDED = 0.15  # CPUs used by other processes during a measurement

_t0 = time.perf_counter()


def log(msg):
    print(f"[{time.perf_counter() - _t0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- memory

def _status_kb(key):
    with open("/proc/self/status") as f:
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
        gc.collect()
        self.reset = reset_peak_rss()
        self.rss0 = _status_kb("VmRSS")
        self.hwm0 = _status_kb("VmHWM")
        return self

    def __exit__(self, *exc):
        hwm = _status_kb("VmHWM")
        base = self.rss0 if self.reset else self.hwm0
        self.extra_mib = max(0, hwm - base) / 1024.0
        return False


# ----------------------------------------------------------------------------- setup

def runtime_library_path():
    env = os.environ.get("ATTN_RUNTIME_LIB")
    return os.path.abspath(env) if env else os.path.join(REPO, "build", "runtime",
                                                         "libattn_runtime.so")


def load_runtime():
    """Load libattn_runtime.so; returns (ok, message)."""
    path = runtime_library_path()
    try:
        torch.ops.attn.manifest  # noqa: B018
        return True, "already registered"
    except (AttributeError, RuntimeError):
        pass
    if not os.path.exists(path):
        return False, f"runtime library not found at {path}"
    try:
        torch.ops.load_library(path)
        torch.ops.attn.manifest  # noqa: B018
        return True, path
    except Exception as e:  # noqa: BLE001
        return False, f"loading {path} failed: {e}"


def compile_artifact(name, out_dir):
    """Compile examples/normalizers/<name>.mlir once; reuse while newer than its inputs."""
    src = os.path.join(REPO, "examples", "normalizers", name + ".mlir")
    compiler = os.path.join(REPO, "build", "bin", "attn-compile")
    out = os.path.join(out_dir, name + ".so")
    if (os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(src)
            and (not os.path.exists(compiler)
                 or os.path.getmtime(out) >= os.path.getmtime(compiler))):
        return out, 0.0, "cached"
    os.makedirs(out_dir, exist_ok=True)
    err = ""
    for attempt in range(3):  # the compiler may be mid-relink (another build running)
        if attempt:
            time.sleep(5)
        t = time.perf_counter()
        try:
            r = subprocess.run([compiler, src, "-o", out], capture_output=True, text=True,
                               timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            err = f"attn-compile {name}: {e}"
            continue
        dt = time.perf_counter() - t
        if r.returncode == 0:
            return out, dt, "compiled"
        err = (f"attn-compile {name} failed (rc {r.returncode}): "
               f"{(r.stderr or r.stdout).strip()[:2000]}")
    raise RuntimeError(err)


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


def foreign_cpu(a, b):
    """Average number of CPUs other processes kept busy between two snapshots."""
    hz = os.sysconf("SC_CLK_TCK")
    wall = b[0] - a[0]
    if wall <= 0:
        return 0.0
    return max(0.0, ((b[1] - a[1]) - (b[2] - a[2])) / hz / wall)


def machine_info(threads):
    cpu = "unknown"
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and cpu == "unknown":
                    cpu = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    blas = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1] if len(line.split()) >= 6 else ""
                if any(s in p.lower() for s in ("blas", "mkl", "lapack")):
                    blas.add(p)
    except OSError:
        pass
    commit = ""
    try:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu_model": cpu,
        "logical_cpus": os.cpu_count(),
        "avx512f": "avx512f" in flags,
        "avx2": "avx2" in flags,
        "threads": threads,
        "torch_version": torch.__version__,
        "torch_parallel_backend": [l.strip() for l in torch.__config__.parallel_info().splitlines()
                                   if "backend" in l.lower()],
        "python": sys.executable + " " + platform.python_version(),
        "blas_libraries_mapped": sorted(blas),
        "openblas_loaded": any("openblas" in b.lower() for b in blas),
        "git_commit": commit,
        "loadavg_start": _loadavg(),
    }


def measure_sgemm(reps=7):
    a = torch.randn(SGEMM_N, SGEMM_N)
    b = torch.randn(SGEMM_N, SGEMM_N)
    c = torch.empty(SGEMM_N, SGEMM_N)
    torch.mm(a, b, out=c)
    best = 0.0
    runs = []
    for _ in range(reps):
        t = time.perf_counter()
        torch.mm(a, b, out=c)
        dt = time.perf_counter() - t
        g = 2.0 * SGEMM_N ** 3 / dt / 1e9
        runs.append(round(g, 2))
        best = max(best, g)
    return best, runs


# ----------------------------------------------------------------------------- kernels

def make_inputs(n, d, seed, dtype=torch.float32, b=B, h=H):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, n, d, generator=g, dtype=dtype)
    k = torch.randn(b, h, n, d, generator=g, dtype=dtype)
    v = torch.randn(b, h, n, d, generator=g, dtype=dtype)
    do = torch.randn(b, h, n, d, generator=g, dtype=dtype)
    return q, k, v, do


class Impl:
    """fwd(q,k,v,p,causal) -> O without autograd; fwdbwd(...) runs forward + backward."""

    def __init__(self, name, kind, artifact=None):
        self.name, self.kind, self.artifact = name, kind, artifact

    def fwd(self, q, k, v, p, causal):
        if self.kind == "ours":
            return torch.ops.attn.attention_forward(self.artifact, q, k, v, p, causal, None)[0]
        with torch.no_grad():
            return eager.EAGER[self.name](q, k, v, p, causal)

    def attention(self, q, k, v, p, causal):
        if self.kind == "ours":
            return torch.ops.attn.attention(self.artifact, q, k, v, p, causal, None)
        return eager.EAGER[self.name](q, k, v, p, causal)

    def fwdbwd(self, q, k, v, p, causal, do):
        for t in (q, k, v, p):
            t.grad = None
        o = self.attention(q, k, v, p, causal)
        (o * do).sum().backward()
        return o


def sanity_check(name, artifact, n=256, d=64, tol=1e-4):
    """Ours (f32) vs the eager composition in f64: forward and every gradient.
    Error = max|ours - ref| / max(max|ref|, 1e-6)."""
    out = {}
    for causal in (False, True):
        q, k, v, do = make_inputs(n, d, seed=1234)
        p = torch.tensor(BENCH_PARAMS[name], dtype=torch.float32)
        ours = Impl(name, "ours", artifact)
        ref = Impl(name, "eager")
        q32, k32, v32, p32 = [t.clone().requires_grad_() for t in (q, k, v, p)]
        q64, k64, v64, p64 = [t.double().requires_grad_() for t in (q, k, v, p)]
        o32 = ours.fwdbwd(q32, k32, v32, p32, causal, do)
        o64 = ref.fwdbwd(q64, k64, v64, p64, causal, do.double())
        of = ours.fwd(q, k, v, p, causal)  # attention_forward must agree with attention
        errs = {}
        pairs = [("O", o32, o64), ("O_fwd_op", of, o64), ("dq", q32.grad, q64.grad),
                 ("dk", k32.grad, k64.grad), ("dv", v32.grad, v64.grad)]
        if p.numel():
            pairs.append(("dparams", p32.grad, p64.grad))
        finite = True
        for key, a, r in pairs:
            if a is None:
                errs[key] = float("nan")
                continue
            finite = finite and bool(torch.isfinite(a).all())
            scale = max(r.abs().max().item(), 1e-6)
            errs[key] = (a.double() - r.detach()).abs().max().item() / scale
        worst = max(errs.values()) if errs else float("nan")
        out["causal" if causal else "noncausal"] = {
            "rel_err": {k_: float(f"{v_:.3e}") for k_, v_ in errs.items()},
            "worst": worst, "finite": finite,
            "ok": finite and worst <= tol,
        }
    return out


def flops(n, d, causal, pss):
    f = 4.0 * n * n * d * B * H
    if causal:
        f /= 2.0
    if pss == "fwd+bwd":
        f *= 2.5
    return f


def time_it(fn, budget_s, max_reps, min_reps=3):
    """First call is a warm-up unless it alone takes >= budget/2 (then it is the single
    sample). Then repeat until the budget is spent (at least min_reps, at most max_reps).
    Returns (median seconds, list of samples)."""
    t = time.perf_counter()
    fn()
    first = time.perf_counter() - t
    if first >= budget_s / 2:
        return first, [first]
    samples = []
    spent = 0.0
    while len(samples) < max_reps and (len(samples) < min_reps or spent < budget_s):
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        samples.append(dt)
        spent += dt
    return statistics.median(samples), samples


class Predictor:
    """Predict a run's time from a measured one of the same (impl, normalizer, causal,
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


# ----------------------------------------------------------------------------- memory mode

def memory_child(n, d, impl_kind, normalizer, threads):
    """Runs in a fresh process: forward+backward at B = H = 1; prints one JSON line."""
    torch.set_num_threads(threads)
    res = {"n": n, "d": d, "impl": impl_kind, "normalizer": normalizer, "B": 1, "H": 1}
    artifact = None
    if impl_kind == "ours":
        ok, msg = load_runtime()
        if not ok:
            res["error"] = msg
            print(json.dumps(res))
            return
        artifact = os.path.join(REPO, "build", "bench-artifacts", normalizer + ".so")
    impl = Impl(normalizer, impl_kind, artifact)
    p = torch.tensor(BENCH_PARAMS[normalizer])
    # warm-up at a small size: loads the artifact, starts the thread pool
    q, k, v, do = make_inputs(128, d, 7, b=1, h=1)
    q, k, v, pp = [t.requires_grad_() for t in (q, k, v, p.clone())]
    impl.fwdbwd(q, k, v, pp, False, do)
    del q, k, v, do, pp
    q, k, v, do = make_inputs(n, d, 8, b=1, h=1)
    q, k, v, pp = [t.requires_grad_() for t in (q, k, v, p.clone())]
    res["inputs_mib"] = 4 * n * d * 4 / 2 ** 20  # q, k, v, dO
    res["outputs_mib"] = 4 * n * d * 4 / 2 ** 20  # O, dq, dk, dv
    res["nxn_f32_mib"] = n * n * 4 / 2 ** 20
    res["rss_before_mib"] = _status_kb("VmRSS") / 1024.0
    t = time.perf_counter()
    with PeakRSS() as m:
        o = impl.fwdbwd(q, k, v, pp, False, do)
    res["seconds"] = time.perf_counter() - t
    res["extra_peak_rss_mib"] = m.extra_mib
    res["hwm_reset"] = m.reset
    res["finite"] = bool(torch.isfinite(o).all() and torch.isfinite(q.grad).all()
                         and torch.isfinite(k.grad).all() and torch.isfinite(v.grad).all())
    res["ok"] = True
    print(json.dumps(res))


def run_memory(n, d=64, impl_kind="ours", normalizer="softmax", threads=2, timeout=600):
    cmd = [sys.executable, os.path.abspath(__file__), "--memory-child", str(n),
           "--memory-impl", impl_kind, "--memory-normalizer", normalizer,
           "--d", str(d), "--threads", str(threads)]
    log(f"memory: {impl_kind} {normalizer} fwd+bwd B=H=1 N={n} d={d} (fresh process)")
    t = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"n": n, "d": d, "impl": impl_kind, "normalizer": normalizer, "ok": False,
                "error": f"timed out after {timeout} s"}
    wall = time.perf_counter() - t
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if r.returncode != 0 or not lines:
        return {"n": n, "d": d, "impl": impl_kind, "normalizer": normalizer, "ok": False,
                "error": f"rc {r.returncode}: {(r.stderr or r.stdout).strip()[-1500:]}"}
    res = json.loads(lines[-1])
    res["subprocess_wall_s"] = wall
    return res


def print_memory_scaling(memory):
    ours = sorted((m["n"], m["extra_peak_rss_mib"]) for m in memory
                  if m.get("ok") and m.get("impl") == "ours")
    if len(ours) >= 2 and ours[0][1] > 0:
        (n0, x0), (n1, x1) = ours[0], ours[-1]
        r = n1 / n0
        print(f"  ours: extra peak RSS grows {x1 / x0:.1f}x from N={n0} to N={n1} "
              f"(linear: {r:.0f}x, quadratic: {r * r:.0f}x)")


def memory_verdict(res):
    """O(N): extra peak RSS below a quarter of one N x N f32 buffer (+16 MiB allowance
    for allocator and thread-pool noise)."""
    if not res.get("ok"):
        return False, f"did not complete: {res.get('error')}"
    limit = 0.25 * res["nxn_f32_mib"] + 16.0
    ok = res["extra_peak_rss_mib"] < limit and res.get("finite", False)
    return ok, (f"{res['impl']} {res['normalizer']} fwd+bwd N={res['n']} d={res['d']} B=H=1: "
                f"completed in {res['seconds']:.1f} s, extra peak RSS "
                f"{res['extra_peak_rss_mib']:.1f} MiB (O(N) tensors O,dq,dk,dv = "
                f"{res['outputs_mib']:.1f} MiB; one NxN f32 = {res['nxn_f32_mib']:.0f} MiB; "
                f"limit 1/4 of that + 16 = {limit:.0f} MiB)"
                + ("" if res.get("finite", True) else "; NON-FINITE output/gradients"))


# ----------------------------------------------------------------------------- report

def fmt(x, spec, none="-"):
    return none if x is None else format(x, spec)


def print_table(rows, sgemm):
    hdr = (f"{'normalizer':<11}{'N':>6}{'d':>5} {'causal':<7}{'pass':<8}{'ours ms':>10}"
           f"{'GFLOP/s':>9}{'eager ms':>10}{'GFLOP/s':>9}{'speedup':>9}{'/sgemm':>8}"
           f"{'RSS+ MiB':>10}{'eager':>7}  note")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        o, e = r["ours"], r["eager"]
        print(f"{r['normalizer']:<11}{r['n']:>6}{r['d']:>5} {('yes' if r['causal'] else 'no'):<7}"
              f"{r['pass']:<8}{fmt(o.get('ms'), '.1f'):>10}"
              f"{fmt(o.get('gflops'), '.2f'):>9}{fmt(e.get('ms'), '.1f'):>10}{fmt(e.get('gflops'), '.2f'):>9}"
              f"{fmt(r.get('speedup'), '.2f'):>9}{fmt(r.get('ours_over_sgemm'), '.3f'):>8}"
              f"{fmt(o.get('peak_extra_rss_mib'), '.0f'):>10}{fmt(e.get('peak_extra_rss_mib'), '.0f'):>7}"
              f"  {r.get('note', '')}")
    print(f"(GFLOP/s: fwd 4*N^2*d*B*H non-causal, 2*N^2*d*B*H causal; fwd+bwd = 2.5x fwd. "
          f"B*H = 8, f32. speedup = eager ms / ours ms; /sgemm = ours GFLOP/s / "
          f"{sgemm:.1f} (sgemm {SGEMM_N}^3 this run). RSS+ = extra peak RSS during the pass.)")


def find(rows, name, n, d, causal, pss):
    for r in rows:
        if (r["normalizer"], r["n"], r["d"], r["causal"], r["pass"]) == (name, n, d, causal, pss):
            return r
    return None


def check_targets(rows, sgemm, memory, normalizers, ns, ds, causals):
    lines = []
    swept = TARGET_N in ns and TARGET_D in ds

    def not_selected(name, causal_needed=(False,)):
        if name not in normalizers:
            return "normalizer not selected"
        if not swept or any(c not in causals for c in causal_needed):
            return f"N={TARGET_N}, d={TARGET_D} ({'/'.join('causal' if c else 'non-causal' for c in causal_needed)}) not in this sweep"
        return None

    def add(ok, text, *rs):
        status = "PASS" if ok is True else ("FAIL" if ok is False else ok)
        if any(r is not None and "CONTENDED" in r.get("note", "") for r in rs):
            text += " [measured while other processes competed for the CPUs]"
        lines.append({"status": status, "text": text})

    # 1. forward >= 0.5 x sgemm, softmax and tanhmax
    for name in ("softmax", "tanhmax"):
        r = find(rows, name, TARGET_N, TARGET_D, False, "fwd")
        label = f"[fwd >= 0.5 x sgemm] {name} N={TARGET_N} d={TARGET_D} non-causal"
        if not_selected(name):
            add("NOT RUN", f"{label}: {not_selected(name)}")
        elif r is None or r["ours"].get("gflops") is None:
            add(False, f"{label}: not measured ({(r or {}).get('note', 'config not run')})")
        else:
            g = r["ours"]["gflops"]
            add(g >= 0.5 * sgemm, f"{label}: ours {g:.2f} GFLOP/s = {g / sgemm:.3f} x sgemm "
                f"{sgemm:.1f} (need >= 0.5 x = {0.5 * sgemm:.1f}); eager "
                f"{fmt(r['eager'].get('gflops'), '.2f')} GFLOP/s", r)
    # 2. forward+backward >= 2 x eager, every normalizer
    for name in ALL_NORMALIZERS:
        r = find(rows, name, TARGET_N, TARGET_D, False, "fwd+bwd")
        label = f"[fwd+bwd >= 2 x eager] {name} N={TARGET_N} d={TARGET_D} non-causal"
        if not_selected(name):
            add("NOT RUN", f"{label}: {not_selected(name)}")
        elif r is None or r.get("speedup") is None:
            add(False, f"{label}: not measured ({(r or {}).get('note', 'config not run')})")
        else:
            add(r["speedup"] >= 2.0, f"{label}: ours {r['ours']['ms']:.0f} ms vs eager "
                f"{r['eager']['ms']:.0f} ms = {r['speedup']:.2f}x (need >= 2x)", r)
    # 3. causal forward >= 1.7 x faster than non-causal
    for name in ALL_NORMALIZERS:
        rn = find(rows, name, TARGET_N, TARGET_D, False, "fwd")
        rc = find(rows, name, TARGET_N, TARGET_D, True, "fwd")
        label = f"[causal fwd >= 1.7 x faster] {name} N={TARGET_N} d={TARGET_D}"
        if not_selected(name, (False, True)):
            add("NOT RUN", f"{label}: {not_selected(name, (False, True))}")
        elif (rn is None or rc is None or rn["ours"].get("ms") is None
              or rc["ours"].get("ms") is None):
            add(False, f"{label}: not measured")
        else:
            ratio = rn["ours"]["ms"] / rc["ours"]["ms"]
            add(ratio >= 1.7, f"{label}: non-causal {rn['ours']['ms']:.0f} ms / causal "
                f"{rc['ours']['ms']:.0f} ms = {ratio:.2f}x (need >= 1.7x)", rn, rc)
    # 4. N = 16384 forward+backward with O(N) extra memory
    m16 = [m for m in memory if m.get("n") == 16384 and m.get("impl") == "ours"]
    label = "[N=16384 fwd+bwd, O(N) extra memory]"
    if not m16:
        add("NOT RUN", f"{label}: not measured in this run (use --memory 16384 or the full run)")
    else:
        ok, text = memory_verdict(m16[0])
        add(ok, f"{label} {text}")
    return lines


# ----------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="N in {512, 2048}, d = 64, shorter timing budget, no N=16384 memory run")
    ap.add_argument("--json", default=None, help="write all results here (default: "
                    "build/bench/results.json, build/bench/results-quick.json with --quick)")
    ap.add_argument("--normalizers", nargs="+", default=None, choices=ALL_NORMALIZERS)
    ap.add_argument("--n", nargs="+", type=int, default=None)
    ap.add_argument("--d", nargs="+", type=int, default=None)
    ap.add_argument("--causal", choices=["both", "no", "yes"], default="both")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-over", type=float, default=20.0,
                    help="skip a config whose single run is predicted to take longer (s)")
    ap.add_argument("--budget", type=float, default=None,
                    help="timing budget per measurement in seconds (reps until spent)")
    ap.add_argument("--deadline", type=float, default=None,
                    help="after this many seconds skip remaining configs (targets excepted)")
    ap.add_argument("--memory", type=int, nargs="*", default=None, metavar="N",
                    help="only run the peak-RSS mode at these N (fresh subprocess each)")
    ap.add_argument("--memory-impl", choices=["ours", "eager"], default="ours")
    ap.add_argument("--memory-normalizer", choices=ALL_NORMALIZERS, default="softmax")
    ap.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--no-memory", action="store_true", help="full run without the memory runs")
    ap.add_argument("--retries", type=int, default=2,
                    help="repeat a contended measurement up to this many times")
    ap.add_argument("--retry-pause", type=float, default=5.0, help=argparse.SUPPRESS)
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                    help="first wait up to S seconds for a 10 s window in which other "
                         "processes use < 0.05 CPUs")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)

    if args.memory_child is not None:
        memory_child(args.memory_child, (args.d or [64])[0], args.memory_impl,
                     args.memory_normalizer, args.threads)
        return 0

    normalizers = args.normalizers or ALL_NORMALIZERS
    ns = args.n or ([512, 2048] if args.quick else [512, 1024, 2048, 4096])
    ds = args.d or ([64] if args.quick else [64, 128])
    causals = {"both": [False, True], "no": [False], "yes": [True]}[args.causal]
    budget = args.budget or (0.8 if args.quick else 1.5)
    deadline = args.deadline or (170.0 if args.quick else 780.0)
    json_path = args.json or os.path.join(REPO, "build", "bench",
                                          "results-quick.json" if args.quick else "results.json")
    os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)

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
    info = machine_info(args.threads)
    snap0 = cpu_snapshot()
    ok_rt, rt_msg = load_runtime()
    info["runtime"] = rt_msg
    info["command"] = " ".join([sys.executable] + sys.argv)
    log(f"{info['cpu_model']}, {args.threads} threads, torch {info['torch_version']}, "
        f"OpenBLAS loaded: {info['openblas_loaded']}; runtime: {rt_msg}")

    results = {"meta": info, "config": {
        "normalizers": normalizers, "n": ns, "d": ds, "causal": causals, "B": B, "H": H,
        "dtype": "f32", "budget_s": budget, "skip_over_s": args.skip_over,
        "deadline_s": deadline, "params": {k: BENCH_PARAMS[k] for k in normalizers},
        "flops": "fwd: 4*N^2*d*B*H (non-causal), 2*N^2*d*B*H (causal); fwd+bwd: 2.5 x fwd"},
        "rows": [], "memory": [], "sanity": {}, "artifacts": {}}

    def save():
        with open(json_path, "w") as f:
            json.dump(results, f, indent=1)

    # ---- memory-only mode
    if args.memory is not None:
        mem_ns = args.memory or [16384]
        for n in mem_ns:
            if args.memory_impl == "ours" and ok_rt:
                try:
                    compile_artifact(args.memory_normalizer,
                                     os.path.join(REPO, "build", "bench-artifacts"))
                except RuntimeError as e:
                    log(f"memory: {e}")
            res = run_memory(n, (args.d or [64])[0], args.memory_impl, args.memory_normalizer,
                             args.threads)
            results["memory"].append(res)
            ok, text = memory_verdict(res)
            print(f"{'PASS' if ok else 'FAIL'} {text}")
        print_memory_scaling(results["memory"])
        save()
        return 0

    # ---- sgemm reference
    sgemm, sgemm_runs = measure_sgemm()
    log(f"sgemm {SGEMM_N}x{SGEMM_N}x{SGEMM_N} f32: best {sgemm:.1f} GFLOP/s  {sgemm_runs}")
    results["sgemm"] = {"start_best_gflops": sgemm, "start_runs": sgemm_runs}

    # ---- compile + sanity
    art_dir = os.path.join(REPO, "build", "bench-artifacts")
    artifacts = {}
    for name in normalizers:
        if not ok_rt:
            break
        try:
            path, dt, how = compile_artifact(name, art_dir)
            artifacts[name] = path
            results["artifacts"][name] = {"path": path, "how": how, "compile_s": dt,
                                          "manifest": torch.ops.attn.manifest(path)}
            log(f"{name}: artifact {how} ({dt:.1f} s)")
        except Exception as e:  # noqa: BLE001
            results["artifacts"][name] = {"error": str(e)}
            log(f"{name}: COMPILE/LOAD ERROR {e}")
            continue
        try:
            s = sanity_check(name, path)
            results["sanity"][name] = s
            for c, v in s.items():
                log(f"{name} sanity {c}: {'ok' if v['ok'] else 'MISMATCH'} "
                    f"(rel err vs eager f64: {v['rel_err']})")
        except Exception as e:  # noqa: BLE001
            results["sanity"][name] = {"error": str(e)}
            log(f"{name}: SANITY ERROR {e}")

    # ---- memory run (full mode): first, it is a target
    if not args.quick and not args.no_memory and ok_rt and "softmax" in artifacts:
        for n, impl_kind in ((4096, "ours"), (16384, "ours"), (16384, "eager")):
            res = run_memory(n, 64, impl_kind, "softmax", args.threads)
            results["memory"].append(res)
            ok, text = memory_verdict(res)
            log(f"memory {'ok' if ok else 'NOT O(N)'}: {text}")
            save()

    # ---- sweep
    pred = Predictor()
    sweep_t0 = time.perf_counter()
    order = [(d, name, causal, n) for d in ds for name in normalizers
             for causal in causals for n in sorted(ns)]
    for d, name, causal, n in order:
        q, k, v, do = make_inputs(n, d, seed=n * 7 + d)
        p = torch.tensor(BENCH_PARAMS[name], dtype=torch.float32)
        is_target = (n == TARGET_N and d == TARGET_D)
        for pss in ("fwd", "fwd+bwd"):
            row = {"normalizer": name, "n": n, "d": d, "causal": causal, "pass": pss,
                   "flops": flops(n, d, causal, pss), "ours": {}, "eager": {}}
            notes = []
            for kind in ("ours", "eager"):
                if kind == "ours" and name not in artifacts:
                    notes.append("ours: no artifact/runtime")
                    continue
                key = (kind, name, causal, pss)
                guess = pred.predict(key, n, d)
                if guess is not None and guess > args.skip_over:
                    notes.append(f"{kind} skipped: predicted {guess:.0f} s/run > "
                                 f"{args.skip_over:.0f} s")
                    row[kind]["skipped_predicted_s"] = guess
                    continue
                if not is_target and time.perf_counter() - sweep_t0 > deadline:
                    notes.append(f"{kind} skipped: run deadline {deadline:.0f} s")
                    continue
                impl = Impl(name, kind, artifacts.get(name))
                try:
                    last = {}
                    if pss == "fwd":
                        def fn():
                            last["o"] = None  # free the previous output first
                            last["o"] = impl.fwd(q, k, v, p, causal)
                        grads = ()
                    else:
                        qg, kg, vg, pg = [t.clone().requires_grad_() for t in (q, k, v, p)]

                        def fn():
                            last["o"] = None
                            last["o"] = impl.fwdbwd(qg, kg, vg, pg, causal, do).detach()
                        grads = (qg, kg, vg)
                    # A measurement during which other processes used the CPUs is
                    # repeated (after a pause) up to --retries times; the least
                    # contended one is kept and flagged if still contended.
                    best = None
                    for attempt in range(args.retries + 1):
                        if attempt:
                            time.sleep(args.retry_pause)
                        c0 = cpu_snapshot()
                        with PeakRSS() as m:
                            med_, samples_ = time_it(fn, budget, max_reps=9)
                        busy_ = foreign_cpu(c0, cpu_snapshot())
                        if best is None or busy_ < best[0]:
                            best = (busy_, med_, samples_, m.extra_mib)
                        if busy_ <= CONTENDED:
                            break
                        log(f"  {kind} {name} N={n} d={d} {pss}: contended "
                            f"({busy_:.2f} CPUs used by others), attempt {attempt + 1}")
                    busy, med, samples, rss_extra = best
                    if busy > CONTENDED:
                        notes.append(f"{kind}: CONTENDED ({busy:.1f} CPUs used by others)")
                    # finiteness of the last result (output and, for fwd+bwd, gradients)
                    finite = bool(torch.isfinite(last["o"]).all()) and all(
                        bool(torch.isfinite(t.grad).all()) for t in grads)
                    if not finite:
                        notes.append(f"{kind}: NON-FINITE values")
                    del last, grads
                    row[kind] = {"ms": med * 1e3, "gflops": row["flops"] / med / 1e9,
                                 "samples_ms": [round(s * 1e3, 2) for s in samples],
                                 "reps": len(samples), "peak_extra_rss_mib": rss_extra,
                                 "finite": finite, "foreign_cpus": round(busy, 3)}
                    pred.add(key, n, d, med)
                except Exception as e:  # noqa: BLE001
                    notes.append(f"{kind} ERROR: {str(e).splitlines()[0][:200]}")
                    row[kind]["error"] = traceback.format_exc()[-2000:]
            o_ms, e_ms = row["ours"].get("ms"), row["eager"].get("ms")
            row["speedup"] = e_ms / o_ms if (o_ms and e_ms) else None
            row["ours_over_sgemm"] = (row["ours"]["gflops"] / sgemm
                                      if row["ours"].get("gflops") else None)
            if row["ours"].get("reps") == 1:
                notes.append("1 sample")
            row["note"] = "; ".join(notes)
            results["rows"].append(row)
            log(f"{name:<10} N={n:<5} d={d:<3} causal={'yes' if causal else 'no ':<3} {pss:<7} "
                f"ours {fmt(o_ms, '.1f')} ms ({fmt(row['ours'].get('gflops'), '.2f')} GFLOP/s)  "
                f"eager {fmt(e_ms, '.1f')} ms  speedup {fmt(row['speedup'], '.2f')}  {row['note']}")
            save()
        del q, k, v, do
        gc.collect()

    sgemm_end, sgemm_end_runs = measure_sgemm()
    results["sgemm"].update({"end_best_gflops": sgemm_end, "end_runs": sgemm_end_runs})
    log(f"sgemm at end: best {sgemm_end:.1f} GFLOP/s")
    # The reference is the better of the start and end measurements (the conservative
    # choice for "ours / sgemm"); a large start/end gap means the machine was busy.
    sgemm_start = sgemm
    sgemm = max(sgemm_start, sgemm_end)
    results["sgemm"]["reference_gflops"] = sgemm
    for r in results["rows"]:
        g = r["ours"].get("gflops")
        r["ours_over_sgemm"] = g / sgemm if g else None
    info["loadavg_end"] = _loadavg()
    info["foreign_cpus_avg"] = foreign_cpu(snap0, cpu_snapshot())
    warnings = []
    if info["foreign_cpus_avg"] > 0.1:
        warnings.append(f"other processes used {info['foreign_cpus_avg']:.2f} CPUs on average "
                        f"during the run (retry pauses included); the measurements they "
                        f"disturbed are retried, and flagged CONTENDED if still disturbed")
    if abs(sgemm_end - sgemm_start) > 0.15 * sgemm:
        warnings.append(f"sgemm moved {sgemm_start:.0f} -> {sgemm_end:.0f} GFLOP/s during the run")
    results["warnings"] = warnings

    # ---- report
    rows = sorted(results["rows"], key=lambda r: (normalizers.index(r["normalizer"]), r["d"],
                                                   r["n"], r["causal"], r["pass"]))
    print()
    print(f"attn CPU benchmark — {info['date']} — {info['cpu_model']}, {args.threads} threads, "
          f"torch {info['torch_version']}, BLAS: "
          f"{'OpenBLAS' if info['openblas_loaded'] else 'NOT OpenBLAS: ' + str(info['blas_libraries_mapped'])}")
    print(f"sgemm {SGEMM_N}^3 f32: {sgemm_start:.1f} GFLOP/s (start), {sgemm_end:.1f} GFLOP/s "
          f"(end); reference {sgemm:.1f}. CPUs used by other processes during the run: "
          f"{info['foreign_cpus_avg']:.2f} on average")
    for w in warnings:
        print(f"WARNING: {w}")
    print()
    print("sanity (ours f32 vs eager f64, N=256, B*H=8, d=64; max|err|/max|ref| for O, dq, dk, dv, dparams):")
    for name in normalizers:
        s = results["sanity"].get(name)
        art = results["artifacts"].get(name, {})
        if s is None and "error" in art:
            print(f"  {name:<11} NO ARTIFACT: {art['error'].splitlines()[0][:300]}")
        elif s is None:
            print(f"  {name:<11} not run ({rt_msg if not ok_rt else 'no artifact'})")
        elif "error" in s:
            print(f"  {name:<11} ERROR {s['error']}")
        else:
            for c, v in s.items():
                print(f"  {name:<11} {c:<10} {'ok      ' if v['ok'] else 'MISMATCH'} worst "
                      f"{v['worst']:.1e}  {v['rel_err']}")
    print()
    print_table(rows, sgemm)
    if results["memory"]:
        print()
        print("peak RSS (fresh process, softmax fwd+bwd, B=H=1, d=64):")
        for m in results["memory"]:
            ok, text = memory_verdict(m)
            print(f"  {text}")
        print_memory_scaling(results["memory"])
    print()
    print("targets (DESIGN.md section 7; CPU, f32, 2 threads, B*H=8, d=64, N=2048):")
    tl = check_targets(results["rows"], sgemm, results["memory"], normalizers, ns, ds, causals)
    results["targets"] = tl
    for t in tl:
        print(f"  {t['status']:<7} {t['text']}")
    results["wall_s"] = time.perf_counter() - _t0
    save()
    print(f"\nJSON: {json_path}   (wall {results['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
