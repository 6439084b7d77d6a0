#!/usr/bin/env bash
# The main demo: compile the TanhMax normalizer from examples/ into an artifact and
# train a small transformer with it, from C++ (LibTorch) and from Python.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${ATTN_BUILD_DIR:-$root/build}"
python="${ATTN_VENV:-$root/.venv}/bin/python"
mkdir -p "$build/artifacts"

echo "== attn-compile examples/normalizers/tanhmax.mlir"
"$build/bin/attn-compile" "$root/examples/normalizers/tanhmax.mlir" -o "$build/artifacts/tanhmax.so"

echo "== C++: attn-train (NT delayed addition, TanhMax attention)"
"$build/bin/attn-train" "$build/artifacts/tanhmax.so" --steps 1000 --log-every 100 \
  --history "$build/artifacts/train-cpp.csv"

echo "== Python: examples/train/train.py (same task, same artifact)"
"$python" "$root/examples/train/train.py" \
  --artifact "$build/artifacts/tanhmax.so" --steps 1000 --log-every 100 \
  --history "$build/artifacts/train-python.csv"

echo "== training curves"
"$python" "$root/examples/plot_curves.py" --title "TanhMax, NT task N16T2" \
  "C++ attn-train=$build/artifacts/train-cpp.csv" \
  "Python train.py=$build/artifacts/train-python.csv" -o "$build/artifacts/curves.png"
