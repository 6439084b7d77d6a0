#!/usr/bin/env python3
"""Schedules of one kernel on one CUDA GPU: its forward and its forward+backward timed
with each (BLOCK_M, BLOCK_N, num_warps, num_stages) given, next to the module's own
schedule for that GPU, so that `defaultGpuSchedule`'s entries can come from measurements.

    python bench/gpu_tiles.py [--source examples/normalizers/softmax.mlir] [--n 4096]
        [--d 128] [--causal] [--forward 128,64,8,3 128,128,8,3 ...]
        [--backward 64,64,8,2 ...] [--budget S] [--deadline S] [--out tiles.md]

bf16, B·H = 16 (bench/gpu_bench.py's inputs and timing: CUDA events, median). Forward
schedules are timed on the forward alone; backward schedules on the forward (the
module's own) and backward together. Each schedule's O, dq, dk and dv are first compared
with the module's own schedule's (max relative error; MISMATCH above 2e-2: the
accumulation order differs, the function must not); a schedule Triton cannot compile or
launch (shared memory, registers) records its error. Like gpu_bench.py it needs only
the emitted module (from $ATTN_CACHE_DIR where attn-compile is absent). Kernels without
tensor inputs.
"""

import argparse
import os
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)

import torch  # noqa: E402

import gpu_bench  # noqa: E402
from attn import triton_backend  # noqa: E402

FORWARD = ["128,64,8,3", "128,128,8,3", "128,64,4,3", "128,32,8,3", "64,64,4,3", "128,64,8,2"]
BACKWARD = ["64,64,8,2", "64,64,4,2", "64,32,8,2", "32,64,8,2", "128,64,8,2", "64,128,8,2"]
AGREEMENT_TOL = 2e-2


def tiles(text):
    values = tuple(int(x) for x in text.split(","))
    if len(values) != 4:
        raise argparse.ArgumentTypeError(
            f"a schedule is BLOCK_M,BLOCK_N,num_warps,num_stages, got {text!r}")
    return values


def results(kernel, q, k, v, do, causal):
    """O, dq, dk, dv of one call (float64 copies)."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = kernel(*leaves, kernel.initial_params(device=q.device), is_causal=causal)
    out.backward(do)
    return [out.detach().double()] + [t.grad.double() for t in leaves]


def disagreement(got, want):
    return max(((g - w).abs().max() / w.abs().max().clamp_min(1e-6)).item()
               for g, w in zip(got, want))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", default=gpu_bench.source_of("softmax"))
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--d", type=int, default=128, choices=(64, 128))
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--forward", nargs="*", type=tiles, default=[tiles(t) for t in FORWARD])
    parser.add_argument("--backward", nargs="*", type=tiles,
                        default=[tiles(t) for t in BACKWARD])
    parser.add_argument("--budget", type=float, default=0.2, help="seconds per cell")
    parser.add_argument("--deadline", type=float, default=400,
                        help="stop starting schedules after this many seconds")
    parser.add_argument("--out", default="gpu-tiles.md")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        gpu_bench.log("gpu_tiles: no CUDA device")
        return 2
    began = time.time()
    q, k, v, do = gpu_bench.inputs(args.n, args.d)

    def compiled(direction=None, schedule=None):
        return triton_backend.compile_triton(
            args.source, options=gpu_bench.EMIT_OPTIONS,
            schedule={direction: schedule} if direction else None)

    own = compiled()
    if own.inputs:
        parser.error(f"{args.source}: a kernel with tensor inputs "
                     f"({', '.join(name for name, *_ in own.inputs)}); gpu_tiles times "
                     "kernels without")
    own_schedule = own.schedule(q.device, q.dtype, args.d)
    want = results(own, q, k, v, do, args.causal)
    rows = []
    for direction, candidates in (("forward", args.forward), ("backward", args.backward)):
        for schedule in [None] + [s for s in candidates if s != own_schedule[direction]]:
            if time.time() - began > args.deadline:
                gpu_bench.log("gpu_tiles: deadline reached, remaining schedules skipped")
                break
            kernel = own if schedule is None else compiled(direction, schedule)
            label = own_schedule[direction] if schedule is None else schedule
            row = {"direction": direction, "schedule": label, "own": schedule is None}
            try:
                row["error"] = disagreement(results(kernel, q, k, v, do, args.causal), want)
            except Exception as e:  # noqa: BLE001 (recorded in the table)
                torch.cuda.empty_cache()
                row["ms"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:100]}"
                rows.append(row)
                continue
            params = kernel.initial_params(device=q.device)
            row["ms"] = gpu_bench.cell(
                lambda q, k, v, kernel=kernel, params=params: kernel(q, k, v, params,
                                                                     is_causal=args.causal),
                q, k, v, do, direction == "backward", args.budget)
            rows.append(row)
            gpu_bench.log(f"gpu_tiles: {direction} {label}: {row['ms']} ms")
    write(rows, args)
    return 0


def write(rows, args):
    import triton
    lines = [f"Schedules of {os.path.relpath(args.source)} on {torch.cuda.get_device_name()} "
             f"(torch {torch.__version__}, Triton {triton.__version__}), bf16, B·H = "
             f"{gpu_bench.B * gpu_bench.H}, N = {args.n}, d = {args.d}"
             f"{', causal' if args.causal else ''}; median ms (`bench/gpu_tiles.py`).", "",
             "| timed | BLOCK_M, BLOCK_N, warps, stages | ms | vs the module's own | "
             "max rel. difference |", "|---|---|---|---|---|"]
    for direction in ("forward", "backward"):
        own = [r for r in rows if r["direction"] == direction and r["own"]]
        base = own[0]["ms"] if own and isinstance(own[0]["ms"], float) else None
        for r in (r for r in rows if r["direction"] == direction):
            ms = r["ms"]
            ratio = f"{ms / base:.2f}×" if base and isinstance(ms, float) else ""
            err = r.get("error")
            note = "" if err is None else f"{err:.1e}" + (" MISMATCH" if err > AGREEMENT_TOL
                                                            else "")
            timed = "fwd" if direction == "forward" else "fwd+bwd"
            lines.append(f"| {timed} | {', '.join(map(str, r['schedule']))}"
                         f"{' (own)' if r['own'] else ''} | "
                         f"{ms if isinstance(ms, str) else f'{ms:.3f}'} | {ratio} | {note} |")
    text = "\n".join(lines) + "\n"
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
