#!/usr/bin/env python3
"""attn GPU benchmark: compiled attn kernels vs PyTorch on one CUDA device.

    python bench/gpu_bench.py [--json out.json] [--normalizers ...] [--n ...] [--d ...]
                              [--causal no|yes|both] [--budget S] [--artifacts DIR]

Needs a CUDA-enabled PyTorch (>= 2.3; FlexAttention needs >= 2.5), a build of attn
(build/bin/attn-compile with --cuda-targets support, build/runtime/libattn_runtime.so;
$ATTN_BUILD_DIR overrides build/) and ptxas, or artifacts compiled beforehand
(--artifacts, as scripts/gpu-check.sh runs it on a GPU machine without the compiler). Exits with a message (status 2) where no
CUDA device is available.

For each N in {1024, 4096, 16384}, d in {64, 128}, B·H = 16 (B = 2, H = 8), bfloat16,
forward (no autograd) and forward+backward (backward of sum(O·dO) into q, k, v, params):
  softmax:  ours vs torch.nn.functional.scaled_dot_product_attention and vs FlexAttention
            (torch.compile(flex_attention), block mask for causal)
  every example normalizer: ours vs its eager PyTorch composition (bench/eager.py: full
            N×N scores) and vs torch.compile of that composition.
Time: CUDA events around each call, 3 warm-up calls (torch.compile's compilation happens
there), then repetitions until --budget seconds (at least 5, at most 50); the median is
reported. An out-of-memory or other error is recorded in its cell. Before timing, each
artifact is checked against the eager composition in float64 (N = 256, d = 64, O and every
gradient; relative error reported, MISMATCH above 5e-2 for bfloat16).
Prints a markdown table and writes JSON (default build/bench/gpu-results.json).
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
import traceback

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
BUILD = os.path.abspath(os.environ.get("ATTN_BUILD_DIR", os.path.join(REPO, "build")))
sys.path.insert(0, BENCH_DIR)

import torch  # noqa: E402

import eager  # noqa: E402

NORMALIZERS = ["softmax", "tanhmax", "multimax", "sigsoftmax", "sigmoid", "relu", "expressive",
               "linear"]
# Timing params in kernel order; the others use the artifact's initial values.
PARAMS = {"multimax": [0.8, 1.2, -1.0, 1.0, 0.9, 1.1, -2.0, 2.0], "sigmoid": [-4.0]}
B, H = 2, 8
DTYPE = torch.bfloat16
SANITY_TOL = 5e-2


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def load_runtime():
    path = os.environ.get("ATTN_RUNTIME_LIB") or os.path.join(BUILD, "runtime", "libattn_runtime.so")
    if not os.path.exists(path):
        sys.exit(f"gpu_bench: attn runtime not found at {path} (build it, or set ATTN_BUILD_DIR)")
    torch.ops.load_library(path)


def compile_artifact(name, target, out_dir):
    src = os.path.join(REPO, "examples", "normalizers", name + ".mlir")
    out = os.path.join(out_dir, f"{name}-{target}.so")
    cmd = [os.path.join(BUILD, "bin", "attn-compile"), src, "-o", out,
           f"--cuda-targets={target}", "--cuda-dtypes=bf16", "--dtypes=f32,f64"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{(r.stderr or r.stdout)[-3000:]}")
    return out


def params_for(name, artifact, device, dtype=torch.float32):
    if name in PARAMS:
        return torch.tensor(PARAMS[name], dtype=dtype, device=device)
    text = torch.ops.attn.manifest(artifact)
    line = next(ln for ln in text.splitlines() if ln.split()[:1] == ["params"])
    values = [float(t.split("=", 1)[1]) for t in line.split()[1:]]
    return torch.tensor(values, dtype=dtype, device=device)


def inputs(n, d, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    make = lambda: torch.randn(B, H, n, d, generator=g, device="cuda", dtype=DTYPE)
    return make(), make(), make(), make()


def time_ms(fn, budget_s, warmup=3, min_reps=5, max_reps=50):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times, spent = [], 0.0
    while len(times) < min_reps or (spent < budget_s and len(times) < max_reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
        spent += times[-1] / 1000.0
    return statistics.median(times)


def sanity(name, artifact):
    """ours (bf16, GPU) vs the eager composition in float64: max|err| / max|ref|."""
    q, k, v, do = inputs(256, 64, seed=1)
    p = params_for(name, artifact, "cuda")
    errs = {}
    for causal in (False, True):
        ours = [t.clone().requires_grad_() for t in (q, k, v, p)]
        ref = [t.double().requires_grad_() for t in (q, k, v, p)]
        o = torch.ops.attn.attention(artifact, *ours, causal, None)
        o.backward(do)
        r = eager.EAGER[name](*ref, causal)
        r.backward(do.double())
        pairs = [("O", o, r)] + [(n, a.grad, b.grad) for n, a, b in zip(("dq", "dk", "dv", "dparams"), ours, ref)
                                 if b.grad is not None and b.grad.numel()]
        for n, a, b in pairs:
            scale = max(b.abs().max().item(), 1e-6)
            err = (a.double() - b.detach()).abs().max().item() / scale
            errs[n] = max(errs.get(n, 0.0), err)
    return errs


def flex_impl():
    """make(n, causal) -> fn(q, k, v): compiled FlexAttention, its block mask built once
    outside the timed calls; or (None, why not)."""
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError as e:
        return None, f"FlexAttention unavailable (torch {torch.__version__}): {e}"
    compiled = torch.compile(flex_attention)

    def make(n, causal):
        mask = (create_block_mask(lambda b, h, i, j: i >= j, None, None, n, n, device="cuda")
                if causal else None)
        return lambda q, k, v: compiled(q, k, v, block_mask=mask)
    return make, ""


def measure(fn_fwd, q, k, v, p, do, budget):
    """(forward ms, forward+backward ms) of fn(q, k, v, p); errors become strings."""
    out = {}
    try:
        with torch.no_grad():
            out["fwd"] = time_ms(lambda: fn_fwd(q, k, v, p), budget)
    except Exception as e:  # noqa: BLE001  (recorded per cell: OOM, unsupported shape, ...)
        out["fwd"] = _error(e)
    leaves = [t.detach().clone().requires_grad_(t.is_floating_point() and t.numel() > 0) for t in (q, k, v, p)]

    def step():
        for t in leaves:
            t.grad = None
        fn_fwd(*leaves).backward(do)
    try:
        out["fwd+bwd"] = time_ms(step, budget)
    except Exception as e:  # noqa: BLE001
        out["fwd+bwd"] = _error(e)
    torch.cuda.empty_cache()
    return out


def _error(e):
    if isinstance(e, torch.cuda.OutOfMemoryError):
        return "OOM"
    return f"error: {str(e).splitlines()[0][:120]}"


def fmt(x):
    return f"{x:.3f}" if isinstance(x, float) else ("-" if x is None else str(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=os.path.join(BUILD, "bench", "gpu-results.json"))
    ap.add_argument("--normalizers", nargs="+", default=NORMALIZERS, choices=NORMALIZERS)
    ap.add_argument("--n", nargs="+", type=int, default=[1024, 4096, 16384])
    ap.add_argument("--d", nargs="+", type=int, default=[64, 128])
    ap.add_argument("--causal", choices=["no", "yes", "both"], default="no")
    ap.add_argument("--budget", type=float, default=1.0, help="seconds per measurement")
    ap.add_argument("--deadline", type=float, default=None,
                    help="seconds for the whole run: rows not started by then are listed as skipped")
    ap.add_argument("--artifacts", help="use <dir>/<normalizer>.so compiled beforehand "
                    "(scripts/gpu-artifacts.sh) instead of compiling here")
    args = ap.parse_args()

    if not torch.cuda.is_available():
        print("gpu_bench: no CUDA device (torch.cuda.is_available() is False): nothing to "
              "measure; run it on a machine with an NVIDIA GPU and a CUDA-enabled PyTorch")
        return 2
    load_runtime()
    torch._dynamo.config.cache_size_limit = 256  # one compiled graph per shape and pass
    major, minor = torch.cuda.get_device_capability()
    target = f"sm_{major}{minor}"
    art_dir = os.path.join(BUILD, "bench-artifacts-gpu")
    os.makedirs(art_dir, exist_ok=True)
    causals = {"no": [False], "yes": [True], "both": [False, True]}[args.causal]
    info = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(), "target": target, "torch": torch.__version__,
            "cuda": torch.version.cuda, "B": B, "H": H, "dtype": "bf16", "budget_s": args.budget}
    log(f"gpu_bench on {info['device']} ({target}), torch {torch.__version__}")

    artifacts, checks = {}, {}
    for name in args.normalizers:
        try:
            artifacts[name] = (os.path.join(args.artifacts, f"{name}.so") if args.artifacts
                               else compile_artifact(name, target, art_dir))
            checks[name] = sanity(name, artifacts[name])
            log(f"{name}: sanity vs eager f64 {checks[name]}")
        except Exception as e:  # noqa: BLE001
            checks[name] = {"error": str(e)[:2000]}
            log(f"{name}: {traceback.format_exc()}")
    flex, flex_note = flex_impl()

    rows, skipped = [], []
    started = time.monotonic()
    for name in args.normalizers:
        if name not in artifacts:
            continue
        artifact = artifacts[name]
        ours = lambda q, k, v, p, c, a=artifact: torch.ops.attn.attention(a, q, k, v, p, c, None)
        composition = eager.EAGER[name]
        compiled = torch.compile(composition)
        for n in args.n:
            for d in args.d:
                for causal in causals:
                    if args.deadline is not None and time.monotonic() - started > args.deadline:
                        skipped.append(f"{name} N={n} d={d} causal={causal}")
                        continue
                    q, k, v, do = inputs(n, d)
                    p = params_for(name, artifact, "cuda")
                    impls = {"ours": lambda q, k, v, p: ours(q, k, v, p, causal),
                             "eager": lambda q, k, v, p: composition(q, k, v, p, causal),
                             "compiled": lambda q, k, v, p: compiled(q, k, v, p, causal)}
                    if name == "softmax":
                        impls["sdpa"] = lambda q, k, v, p: torch.nn.functional.scaled_dot_product_attention(
                            q, k, v, is_causal=causal)
                    row = {"normalizer": name, "N": n, "d": d, "causal": causal}
                    if name == "softmax" and flex is not None:
                        try:
                            flex_fn = flex(n, causal)
                            impls["flex"] = lambda q, k, v, p: flex_fn(q, k, v)
                        except Exception as e:  # noqa: BLE001
                            row["flex"] = {"fwd": _error(e), "fwd+bwd": _error(e)}
                    for impl, fn in impls.items():
                        log(f"{name} N={n} d={d} causal={causal}: {impl}")
                        row[impl] = measure(fn, q, k, v, p, do, args.budget)
                    rows.append(row)
                    del q, k, v, do
                    torch.cuda.empty_cache()

    print(f"\n# attn GPU benchmark: {info['device']} ({target}), torch {info['torch']}, "
          f"bf16, B={B} H={H}\n")
    if flex_note:
        print(f"{flex_note}\n")
    print("Sanity (max|err|/max|ref| vs eager float64, N=256 d=64, causal and not):\n")
    for name, errs in checks.items():
        if "error" in errs:
            print(f"- {name}: ERROR {errs['error'].splitlines()[0]}")
        else:
            worst = max(errs.values())
            flag = "ok" if worst <= SANITY_TOL else "MISMATCH"
            print(f"- {name}: {flag} " + ", ".join(f"{k} {v:.1e}" for k, v in errs.items()))
    if skipped:
        print(f"\nNot run (past --deadline {args.deadline:.0f} s): {', '.join(skipped)}")
    print()
    for pass_ in ("fwd", "fwd+bwd"):
        print(f"\n## {pass_} (ms, median; speedup = other / ours)\n")
        print("| normalizer | N | d | causal | ours | eager | compiled | sdpa | flex | "
              "vs eager | vs compiled | vs sdpa | vs flex |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            t = {impl: r.get(impl, {}).get(pass_) for impl in ("ours", "eager", "compiled", "sdpa", "flex")}
            ratio = lambda other: (f"{t[other] / t['ours']:.2f}x"
                                   if isinstance(t[other], float) and isinstance(t["ours"], float) else "-")
            print(f"| {r['normalizer']} | {r['N']} | {r['d']} | {'yes' if r['causal'] else 'no'} | "
                  + " | ".join(fmt(t[i]) for i in ("ours", "eager", "compiled", "sdpa", "flex")) + " | "
                  + " | ".join(ratio(i) for i in ("eager", "compiled", "sdpa", "flex")) + " |")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"info": info, "sanity": checks, "rows": rows, "skipped": skipped}, f, indent=1)
    print(f"\nJSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
