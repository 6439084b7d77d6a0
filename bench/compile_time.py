"""Compile time and memory against region size: attn-opt and attn-compile on normalizers of N region ops.

    .venv/bin/python bench/compile_time.py                      # the issue-39 rows (below)
    .venv/bin/python bench/compile_time.py --shapes chain --ops 300 --params 64 --compiler OLD/bin/attn-compile

The chain normalizer is x_{k+1} = tanh(a·x_k + s), the DAG one x_{k+1} = tanh(a·x_k +
x_{k-1}) (every value used twice: an analysis that recurses without memoising visits
2^N paths), each of `--ops` ops in both the numerator and the denominator, g = e^(c·x_n)
(online), plus `--params` extra params each added to one link (a "many-param"
normalizer). Each row runs `attn-opt` through attn-derive-backward (the analyses:
expand, verify, classify, derive; with the size limits lifted, to time them on every
size) and `attn-compile` as `attn.compile` does (f32 and
f64, --cpu=native, one process, no cache), and reports the wall time and peak RSS of
each, the artifact's size, and the diagnostic when the compiler refuses the kernel (a
region past max-region-ops, or its functions past max-function-ops, docs/architecture.md "Compile
time"). Default rows: chains and DAGs of 100, 1,000 and 3,000 ops, and 100-op chains
with 100 and 200 params. Prints markdown.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "runtime" / "python"))


def chain_normalizer(ops, extra_params=0, dag=False):
    """attn IR of the chain normalizer: at most `ops` region ops per region (links of 3
    or 4 ops and a tail of 2), `extra_params` more params added one per link, round robin; with
    `dag`, each link adds the link before the last instead of s."""
    names = ["a", "c"] + [f"w{n}" for n in range(extra_params)]
    header = ", ".join(f"{n} = {0.5 if n == 'a' else 1.0 if n == 'c' else 0.0}" for n in names)
    args = ", ".join(f"%{n}: f32" for n in names)

    def region(role):
        lines = [f"  {role} {{",
                 f"  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, {args}):"]
        x, before, link = "%s", "%s", 0
        emitted = 2   # the tail: c·x, e^
        while emitted + 3 + bool(extra_params) <= max(ops, 5 + bool(extra_params)):
            lines.append(f"    %m{link} = arith.mulf {x}, %a : f32")
            lines.append(f"    %p{link} = arith.addf %m{link}, {before if dag else '%s'} : f32")
            shifted = f"%p{link}"
            if extra_params:
                lines.append(f"    %q{link} = arith.addf %p{link}, %w{link % extra_params} : f32")
                shifted = f"%q{link}"
                emitted += 1
            lines.append(f"    %t{link} = math.tanh {shifted} : f32")
            x, before, link, emitted = f"%t{link}", x, link + 1, emitted + 3
        lines += [f"    %y = arith.mulf {x}, %c : f32", "    %e = math.exp %y : f32",
                  "    attn.yield %e : f32", "  }"]
        return lines

    return "\n".join([f"attn.normalizer @chain params({header}) {{", *region("numerator"),
                      *region("denominator"), "}", "",
                      "attn.kernel @chain_attention normalizer(@chain)", ""])


def measured(command):
    """(seconds, peak RSS in MiB, returncode, stderr) of `command`, run under GNU time
    (the peak of this process alone: getrusage's children maximum spans all of them)."""
    with tempfile.NamedTemporaryFile("r") as report:
        start = time.perf_counter()
        result = subprocess.run(["/usr/bin/time", "-q", "-f", "%M", "-o", report.name, *command],
                                capture_output=True, text=True)
        seconds = time.perf_counter() - start
        kib = report.read().strip().splitlines()
    peak = int(kib[-1]) / 1024 if kib and kib[-1].isdigit() else float("nan")
    return seconds, peak, result.returncode, result.stderr


def first_error(stderr, source):
    line = next((line for line in stderr.splitlines() if "error" in line), stderr.strip()[:200])
    return line.replace(str(source), "kernel.mlir")


# The analyses are timed past the size limits (attn-compile's column shows those).
UNLIMITED = "max-region-ops=1000000 max-function-ops=100000000"


def analyse_once(opt, text, scratch):
    """attn-opt through attn-derive-backward, size limits lifted: (seconds, peak MiB,
    error or None)."""
    source = scratch / "kernel.mlir"
    source.write_text(text)
    seconds, peak, code, stderr = measured(
        [opt, str(source), "--attn-expand-shared-regions", f"--attn-verify={UNLIMITED}",
         "--attn-classify-normalizer", f"--attn-derive-backward={UNLIMITED}", "-o", os.devnull])
    return seconds, peak, None if code == 0 else first_error(stderr, source)


def compile_once(compiler, text, scratch):
    """attn-compile: (seconds, peak MiB, artifact bytes or None, error or None)."""
    source, artifact = scratch / "kernel.mlir", scratch / "kernel.so"
    source.write_text(text)
    artifact.unlink(missing_ok=True)
    seconds, peak, code, stderr = measured(
        [compiler, str(source), "-o", str(artifact), "--dtypes=f32,f64", "--cpu=native"])
    if code != 0:
        return seconds, peak, None, first_error(stderr, source)
    return seconds, peak, artifact.stat().st_size, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", choices=["chain", "dag"])
    parser.add_argument("--ops", type=int, nargs="+")
    parser.add_argument("--params", type=int, nargs="+")
    parser.add_argument("--compiler", help="attn-compile to time (default: attn.compile's)")
    parser.add_argument("--opt", help="attn-opt to time (default: next to the compiler)")
    args = parser.parse_args()
    if args.compiler is None:
        from attn.paths import compiler_path
        args.compiler = compiler_path()
    if args.opt is None:
        args.opt = str(Path(args.compiler).with_name("attn-opt"))
    if args.shapes or args.ops or args.params:
        rows = [(shape, ops, params) for shape in args.shapes or ["chain"]
                for params in args.params or [0] for ops in args.ops or [30, 100, 300, 1000, 3000]]
    else:
        rows = [(shape, ops, 0) for shape in ("chain", "dag") for ops in (100, 1000, 3000)]
        rows += [("chain", 100, params) for params in (100, 200)]

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "unknown CPU")
    print(f"compiler: `{os.path.realpath(args.compiler)}`; host: {cpu}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f} at the start\n")
    print("| shape | region ops | extra params | analyses (s) | analyses (MiB) | compile (s) "
          "| compile (MiB) | artifact (MiB) | result |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)

        def row(name, ops, params, text):
            a_seconds, a_peak, _ = analyse_once(args.opt, text, scratch)
            seconds, peak, size, error = compile_once(args.compiler, text, scratch)
            shown = "compiled" if error is None else f"refused: {error}"
            mib = f"{size / 2**20:.2f}" if size else "-"
            print(f"| {name} | {ops} | {params} | {a_seconds:.2f} | {a_peak:.0f} | {seconds:.1f} "
                  f"| {peak:.0f} | {mib} | {shown} |", flush=True)

        row("softmax", 1, 0, (ROOT / "examples" / "normalizers" / "softmax.mlir").read_text())
        for shape, ops, params in rows:
            row(shape, ops, params, chain_normalizer(ops, params, dag=shape == "dag"))


if __name__ == "__main__":
    main()
