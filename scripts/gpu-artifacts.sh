#!/usr/bin/env bash
# Prepares, on a development machine (attn-compile, no GPU needed), everything
# scripts/gpu-check.sh needs on a GPU machine that has torch and Triton but no MLIR and
# no compiler:
#   DIR/cache/triton/   the emitted Triton modules (attn.triton_backend's cache, by
#                       content) of the numerics cases (test/python/
#                       triton_interpreter_cases.py, run here under the interpreter,
#                       which checks them too) and of bench/gpu_bench.py;
#   DIR/<name>.so       softmax, tanhmax and sigmoid with cubins for TARGETS (bf16 and f16,
#                       d = 64), for the C++ runtime path and compute-sanitizer; a scan
#                       (stick_breaking) and an implicit normalizer (sparsemax) with bf16
#                       d = 64 cubins, for test/cuda/runtime_numerics.py.
#
#   bash scripts/gpu-artifacts.sh [DIR] [TARGETS]     # default gpu-artifacts/ and sm_90
#
# DIR is ignored by git; the device tool carries it (carry: ["gpu-artifacts"]).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${ATTN_BUILD_DIR:-$root/build}"
out="${1:-$root/gpu-artifacts}"
targets="${2:-sm_90}"
python="${ATTN_PYTHON:-$root/.venv/bin/python}"
compiler="$build/bin/attn-compile"
[[ -x "$compiler" ]] || { echo "gpu-artifacts: $compiler not found: run scripts/setup.sh first" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
export ATTN_BUILD_DIR="$build" ATTN_CACHE_DIR="$out/cache" ATTN_PYTHON="$python"
export PYTHONPATH="$root/runtime/python${PYTHONPATH:+:$PYTHONPATH}"

(cd "$root/test/python" && TRITON_INTERPRET=1 "$python" -m pytest -q -p no:cacheprovider \
  -W ignore::RuntimeWarning triton_interpreter_cases.py)
"$python" "$root/bench/gpu_bench.py" --prepare
for name in softmax tanhmax sigmoid; do
  "$compiler" "$root/examples/normalizers/$name.mlir" -o "$out/$name.so" --dtypes=f32,f64 \
    --cuda-targets="$targets" --cuda-dtypes=bf16,f16 --cuda-head-dims=64
  echo "gpu-artifacts: $name.so"
done
for name in stick_breaking sparsemax; do
  "$compiler" "$root/examples/normalizers/$name.mlir" -o "$out/$name.so" --dtypes=f32 \
    --cuda-targets="$targets" --cuda-dtypes=bf16 --cuda-head-dims=64
  echo "gpu-artifacts: $name.so"
done
du -sh "$out"
