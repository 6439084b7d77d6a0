"""Compile time against region size: attn-compile on normalizers of N region ops.

    .venv/bin/python bench/compile_time.py                      # N = 30, 100, 300, 1000, 3000
    .venv/bin/python bench/compile_time.py --ops 300 --params 64 --compiler OLD/bin/attn-compile

The normalizer is a chain x_{k+1} = tanh(a·x_k + s) of `--ops` ops in both the numerator
and the denominator, g = e^(c·x_n) (online), plus `--params` extra params each added to
one link (a "many-param" normalizer). Each row runs `attn-compile` as `attn.compile`
does (f32 and f64, --cpu=native, one process, no cache) and reports the wall time, the
artifact's size, and the diagnostic when the compiler refuses the kernel (its functions
past attn-derive-backward's max-function-ops, README "Compile time"). Prints markdown.
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


def chain_normalizer(ops, extra_params=0):
    """attn IR of the chain normalizer: `ops` region ops per region (rounded up to a
    multiple of 3), `extra_params` more params added one per link, round robin."""
    names = ["a", "c"] + [f"w{n}" for n in range(extra_params)]
    header = ", ".join(f"{n} = {0.5 if n == 'a' else 1.0 if n == 'c' else 0.0}" for n in names)
    args = ", ".join(f"%{n}: f32" for n in names)

    def region(role):
        lines = [f"  {role} {{",
                 f"  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, {args}):"]
        x, link, emitted = "%s", 0, 0
        while emitted < ops:
            lines.append(f"    %m{link} = arith.mulf {x}, %a : f32")
            lines.append(f"    %p{link} = arith.addf %m{link}, %s : f32")
            shifted = f"%p{link}"
            if extra_params:
                lines.append(f"    %q{link} = arith.addf %p{link}, %w{link % extra_params} : f32")
                shifted = f"%q{link}"
                emitted += 1
            lines.append(f"    %t{link} = math.tanh {shifted} : f32")
            x, link, emitted = f"%t{link}", link + 1, emitted + 3
        lines += [f"    %y = arith.mulf {x}, %c : f32", "    %e = math.exp %y : f32",
                  "    attn.yield %e : f32", "  }"]
        return lines

    return "\n".join([f"attn.normalizer @chain params({header}) {{", *region("numerator"),
                      *region("denominator"), "}", "",
                      "attn.kernel @chain_attention normalizer(@chain)", ""])


def compile_once(compiler, text, scratch):
    source, artifact = scratch / "kernel.mlir", scratch / "kernel.so"
    source.write_text(text)
    artifact.unlink(missing_ok=True)
    start = time.perf_counter()
    result = subprocess.run([compiler, str(source), "-o", str(artifact), "--dtypes=f32,f64",
                             "--cpu=native"], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        first = next((line for line in result.stderr.splitlines() if "error" in line),
                     result.stderr.strip()[:200])
        return seconds, None, first.replace(str(source), "kernel.mlir")
    return seconds, artifact.stat().st_size, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, nargs="+", default=[30, 100, 300, 1000, 3000])
    parser.add_argument("--params", type=int, nargs="+", default=[0])
    parser.add_argument("--compiler", help="attn-compile to time (default: attn.compile's)")
    args = parser.parse_args()
    if args.compiler is None:
        from attn.paths import compiler_path
        args.compiler = compiler_path()

    print(f"compiler: `{os.path.realpath(args.compiler)}`; host: {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f} at the start\n")
    print("| region ops | extra params | compile (s) | artifact (MiB) | result |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        baseline = (ROOT / "examples" / "normalizers" / "softmax.mlir").read_text()
        seconds, size, error = compile_once(args.compiler, baseline, scratch)
        print(f"| softmax (1) | 0 | {seconds:.1f} | {size / 2**20:.2f} | compiled |", flush=True)
        for params in args.params:
            for ops in args.ops:
                seconds, size, error = compile_once(args.compiler, chain_normalizer(ops, params),
                                                    scratch)
                shown = "compiled" if error is None else f"refused: {error}"
                mib = f"{size / 2**20:.2f}" if size else "-"
                print(f"| {ops} | {params} | {seconds:.1f} | {mib} | {shown} |", flush=True)


if __name__ == "__main__":
    main()
