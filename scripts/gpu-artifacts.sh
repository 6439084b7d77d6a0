#!/usr/bin/env bash
# Compiles the artifacts scripts/gpu-check.sh needs on a GPU machine (which has no
# MLIR, hence no attn-compile): every example normalizer with CUDA code for the given
# targets (f32, f16, bf16; head dims 32, 64, 128) as <dir>/<name>.so, and CPU-only
# as <dir>/<name>-cpu.so.
#
#   bash scripts/gpu-artifacts.sh [DIR] [TARGETS]     # default gpu-artifacts/ and sm_90
#
# Run after scripts/setup.sh. DIR is ignored by git; the device tool carries it
# (carry: ["gpu-artifacts"]). Compiles two artifacts at a time.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${ATTN_BUILD_DIR:-$root/build}"
out="${1:-$root/gpu-artifacts}"
targets="${2:-sm_90}"
compiler="$build/bin/attn-compile"
[[ -x "$compiler" ]] || { echo "gpu-artifacts: $compiler not found: run scripts/setup.sh first" >&2; exit 1; }
mkdir -p "$out"

compile_one() {
  local src=$1 name
  name=$(basename "$src" .mlir)
  "$compiler" "$src" -o "$out/$name.so" --cuda-targets="$targets"
  "$compiler" "$src" -o "$out/$name-cpu.so"
  echo "gpu-artifacts: $name"
}
export -f compile_one
export compiler out targets
printf '%s\n' "$root"/examples/normalizers/*.mlir | xargs -P 2 -I{} bash -c 'compile_one "$@"' _ {}
du -sh "$out"
