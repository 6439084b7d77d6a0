#!/usr/bin/env python3
"""attn GPU benchmark: the Triton kernels attn-compile emits vs PyTorch on one CUDA device.

    python bench/gpu_bench.py [--out results.md] [--json results.json] [--budget S]
                              [--deadline S] [--quick] [--only NAME,...] [--no-compiled]
    python bench/gpu_bench.py --prepare      # no GPU: emit every module into the cache

Runs the kernels through the Python launcher (attn.triton_backend: the emitted module,
compiled by this machine's Triton for its GPU with the schedule of its chip), so it needs
neither the compiler nor the C++ runtime on the GPU machine: `--prepare` (run by
scripts/gpu-artifacts.sh where attn-compile is) fills $ATTN_CACHE_DIR with the emitted
modules, which the GPU machine reads.

bfloat16, B·H = 16 (B = 2, H = 8), N in {1024, 4096, 16384}, d in {64, 128}, forward and
forward+backward (the backward of sum(O·dO) into q, k, v):
  softmax   ours vs SDPA (flash and cuDNN backends) and compiled FlexAttention, causal too
  every example normalizer: ours vs our softmax and vs its torch.compile'd composition
            (bench/eager.py: full N×N scores; skipped where they would not fit)
  ALiBi, softcap, sliding window, document mask: ours vs FlexAttention's score_mod /
            BlockMask versions of the same functions
Time: CUDA events, 3 warm-up calls (compilation happens there), then repetitions until
--budget seconds (at least 3, at most 30), median. Each cell records its error instead of
a time where it fails (out of memory, a compile error). Each of ours is first checked
against its eager composition in float64 at N = 256 (relative max error, MISMATCH above
5e-2). Writes a markdown table (--out) and JSON.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "runtime", "python"))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402

NORMALIZERS = ["softmax", "tanhmax", "multimax", "sigsoftmax", "sigmoid", "relu", "expressive"]
FAMILIES = ["alibi", "softcap", "sliding_window", "document_mask"]
NS, DS = (1024, 4096, 16384), (64, 128)
B, H = 2, 8
DTYPE = torch.bfloat16
SANITY_TOL = 5e-2
# What SCHEDULES covers: the device's chip is taken at run time; these are compiled in.
EMIT_OPTIONS = ["--cuda-targets=sm_80,sm_90", "--cuda-dtypes=bf16", "--cuda-head-dims=64,128"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def source_of(name):
    folder = "normalizers" if name in NORMALIZERS else "families"
    return os.path.join(REPO, "examples", folder, name + ".mlir")


def ours(name):
    from attn import triton_backend
    return triton_backend.compile_triton(source_of(name), options=EMIT_OPTIONS)


def prepare():
    for name in NORMALIZERS + FAMILIES:
        ours(name)
        log(f"gpu_bench --prepare: {name}")


def time_ms(fn, budget_s, warmup=3, min_reps=3, max_reps=30):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    while len(times) < min_reps or (sum(times) / 1e3 < budget_s and len(times) < max_reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def inputs(n, d, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(B, H, n, d, generator=g, device="cuda", dtype=DTYPE) for _ in range(4)]


def documents(n):
    """Document ids [B, n]: four documents of unequal length per row."""
    bounds = torch.tensor([0, n // 8, n // 2, (3 * n) // 4], device="cuda")
    return (torch.arange(n, device="cuda")[None, :, None] >= bounds).sum(-1).expand(B, n) - 1


def runner(fn, q, k, v, do, backward):
    """A call of fn (q, k, v -> O), forward only or with the backward of sum(O·dO)."""
    if not backward:
        return lambda: fn(q, k, v)
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]

    def step():
        for t in leaves:
            t.grad = None
        fn(*leaves).backward(do)
    return step


def cell(fn, q, k, v, do, backward, budget):
    try:
        return round(time_ms(runner(fn, q, k, v, do, backward), budget), 4)
    except Exception as e:  # noqa: BLE001 (recorded in the table)
        torch.cuda.empty_cache()
        return f"error: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"


def our_call(kernel, name, n, causal=False):
    params = kernel.initial_params(device="cuda")
    extra = {"inputs": {"doc": documents(n)}} if name == "document_mask" else {}
    return lambda q, k, v: kernel(q, k, v, params, is_causal=causal, **extra)


def flex_versions(n, causal):
    """name -> (score_mod, block mask) of FlexAttention for our families (the same
    functions as the .mlir files), or an error string."""
    from torch.nn.attention.flex_attention import create_block_mask
    doc = documents(n)

    def causal_keep(b, h, i, j):
        return i >= j
    mods = {
        "alibi": (lambda s, b, h, i, j: s - 0.25 * (i - j).abs(), causal_keep if causal else None),
        "softcap": (lambda s, b, h, i, j: 50.0 * torch.tanh(s / 50.0),
                    causal_keep if causal else None),
        "sliding_window": (None, (lambda b, h, i, j: ((j + 3) >= i) & ((i + 3) >= j)
                                  & (i >= j if causal else True))),
        "document_mask": (None, (lambda b, h, i, j: (doc[b, i] == doc[b, j])
                                 & (i >= j if causal else True))),
        "softmax": (None, causal_keep if causal else None),
    }
    out = {}
    for name, (mod, keep) in mods.items():
        mask = create_block_mask(keep, B, None, n, n, device="cuda") if keep else None
        out[name] = (mod, mask)
    return out


def sanity(name, kernel):
    """Our bf16 result vs the eager composition in float64 (N = 256): max rel error."""
    import eager
    if name not in eager.EAGER:
        return None
    q, k, v, do = inputs(256, 64, seed=1)
    params = kernel.initial_params(device="cuda")
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = kernel(*leaves, params)
    out.backward(do)
    ref = [t.double().requires_grad_() for t in (q, k, v)]
    r = eager.EAGER[name](*ref, params.double())
    r.backward(do.double())
    worst = 0.0
    for a, b in [(out, r)] + [(x.grad, y.grad) for x, y in zip(leaves, ref)]:
        worst = max(worst, (a.double() - b.detach()).abs().max().item()
                    / max(b.abs().max().item(), 1e-6))
    return worst


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepare", action="store_true")
    parser.add_argument("--out", default="gpu-bench.md")
    parser.add_argument("--json", default="gpu-bench.json")
    parser.add_argument("--budget", type=float, default=0.2, help="seconds per cell")
    parser.add_argument("--deadline", type=float, default=420, help="stop starting rows after")
    parser.add_argument("--quick", action="store_true", help="N = 4096, d = 128 only")
    parser.add_argument("--only", default=",".join(NORMALIZERS + FAMILIES),
                        help="our kernels to time (with their FlexAttention and compiled "
                             "peers), comma-separated; default every one")
    parser.add_argument("--no-compiled", action="store_true",
                        help="skip the torch.compile'd compositions (each compiles for tens "
                             "of seconds)")
    args = parser.parse_args()
    if args.prepare:
        prepare()
        return 0
    if not torch.cuda.is_available():
        log("gpu_bench: no CUDA device")
        return 2
    only = args.only.split(",")
    unknown = sorted(set(only) - set(NORMALIZERS + FAMILIES))
    if unknown:
        parser.error(f"--only: unknown kernels {', '.join(unknown)}; known: "
                     f"{', '.join(NORMALIZERS + FAMILIES)}")
    # One compilation of flex_attention per score_mod and block mask: past dynamo's default
    # limit (8) the later variants ran flex_attention's unfused eager fallback (seen on
    # an H200, 2026-11-28), so their times were not FlexAttention's.
    torch._dynamo.config.recompile_limit = 64
    torch._dynamo.config.accumulated_recompile_limit = 1024
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import flex_attention
    import eager
    began = time.time()
    flex = torch.compile(flex_attention)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    kernels = {name: ours(name) for name in NORMALIZERS + FAMILIES if name in only}
    checks = {name: sanity(name, kernels[name]) for name in NORMALIZERS if name in kernels}
    rows = []
    # The issue's targets' shape first, so a deadline leaves it measured.
    shapes = [(4096, 128)] + ([] if args.quick else
                              [(n, d) for n in NS for d in DS if (n, d) != (4096, 128)])
    composed = {(name, causal): torch.compile(
        lambda q, k, v, p, f=eager.EAGER[name], c=causal: f(q, k, v, p, c))
        for name in NORMALIZERS if name in kernels and not args.no_compiled
        for causal in (False, True)}
    for n, d in shapes:
        q, k, v, do = inputs(n, d)
        for causal in (False, True):
            if time.time() - began > args.deadline:
                log("gpu_bench: deadline reached, remaining rows skipped")
                break
            versions = flex_versions(n, causal)
            peers = {
                "SDPA flash": lambda q, k, v: _with(sdpa_kernel(SDPBackend.FLASH_ATTENTION),
                                                   lambda: sdpa(q, k, v, is_causal=causal)),
                "SDPA cuDNN": lambda q, k, v: _with(sdpa_kernel(SDPBackend.CUDNN_ATTENTION),
                                                   lambda: sdpa(q, k, v, is_causal=causal)),
                "flex": lambda q, k, v: flex(q, k, v, block_mask=versions["softmax"][1]),
            }
            for backward in (False, True):
                row = {"N": n, "d": d, "causal": causal, "pass": "fwd+bwd" if backward else "fwd"}
                for name, kernel in kernels.items():
                    row[name] = cell(our_call(kernel, name, n, causal), q, k, v, do, backward,
                                     args.budget)
                for peer, fn in peers.items():
                    row[peer] = cell(fn, q, k, v, do, backward, args.budget)
                for name in FAMILIES:
                    if name not in kernels:
                        continue
                    mod, mask = versions[name]
                    row[f"flex {name}"] = cell(
                        lambda q, k, v, mod=mod, mask=mask: flex(q, k, v, score_mod=mod,
                                                                 block_mask=mask),
                        q, k, v, do, backward, args.budget)
                # The compiled compositions materialise N×N scores: up to N = 4096.
                for name in NORMALIZERS:
                    if name in kernels and n <= 4096 and not args.no_compiled:
                        params = kernels[name].initial_params(device="cuda")
                        row[f"compiled {name}"] = cell(
                            lambda q, k, v, f=composed[(name, causal)], p=params: f(q, k, v, p),
                            q, k, v, do, backward, args.budget)
                rows.append(row)
                write(rows, checks, args, quiet=True)  # what a time-out leaves is kept
                log(f"gpu_bench: N={n} d={d} causal={causal} {row['pass']}: softmax "
                    f"{row.get('softmax', '-')} ms, flex {row['flex']} ms, "
                    f"SDPA flash {row['SDPA flash']}")
    write(rows, checks, args)
    return 0


def _with(context, fn):
    with context:
        return fn()


def write(rows, checks, args, quiet=False):
    device = torch.cuda.get_device_name()
    import triton
    lines = [f"GPU benchmark on {device} (torch {torch.__version__}, Triton {triton.__version__}), "
             f"bf16, B·H = {B * H}; median ms (`bench/gpu_bench.py`).", "",
             "Sanity (N = 256, d = 64, O and dq/dk/dv vs float64, max rel error): " + ", ".join(
                 f"{n} {e:.1e}{' MISMATCH' if e > SANITY_TOL else ''}"
                 for n, e in checks.items() if e is not None), ""]
    columns = sorted({key for row in rows for key in row} - {"N", "d", "causal", "pass"},
                     key=lambda c: (c.startswith("compiled"), c.startswith("flex "),
                                    c.startswith("SDPA"), c))
    lines.append("| N | d | causal | pass | " + " | ".join(columns) + " |")
    lines.append("|" + "---|" * (4 + len(columns)))
    for row in rows:
        values = [row.get(c, "") for c in columns]
        lines.append(f"| {row['N']} | {row['d']} | {'yes' if row['causal'] else 'no'} | "
                     f"{row['pass']} | " + " | ".join(
                         f"{v:.3f}" if isinstance(v, float) else str(v)[:40] for v in values)
                     + " |")
    text = "\n".join(lines) + "\n"
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump({"device": device, "rows": rows, "sanity": checks}, f, indent=1)
    if not quiet:
        print(text)


if __name__ == "__main__":
    sys.exit(main())
