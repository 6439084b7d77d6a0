#!/bin/sh
# Register and spill report of the CUDA kernels (no GPU needed): compiles a
# normalizer's kernels to PTX with attn-compile and assembles them with
# `ptxas -v` for one target, printing one line per kernel.
#   sh bench/ptxas_report.sh [normalizer.mlir] [sm_90] [f16,bf16]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ATTN_BUILD_DIR:-$root/build}
src=${1:-$root/examples/normalizers/softmax.mlir}
target=${2:-sm_90}
dtypes=${3:-f16,bf16}
toolkit=${CUDA_HOME:-/usr/local/cuda}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/bin/attn-compile" "$src" -o "$tmp/kernels.ptx" --emit=ptx --cuda-targets="$target" \
  --cuda-dtypes="$dtypes" --dtypes=f32
"$toolkit/bin/ptxas" -arch="$target" -v "$tmp/kernels.ptx" -o "$tmp/kernels.cubin" 2>"$tmp/ptxas.txt"
echo "$(basename "$src") $target, $("$toolkit/bin/ptxas" --version | tail -1)"
printf '%-32s %5s %12s %12s %10s\n' kernel regs "spill-st(B)" "spill-ld(B)" "smem(B)"
awk '
  /Compiling entry function/ { name = $0; sub(/.*function .?/, "", name); sub(/.? for.*/, "", name) }
  /spill stores/ { st = $5; ld = $9 }
  /Used [0-9]+ registers/ {
    regs = $0; sub(/.*Used /, "", regs); sub(/ registers.*/, "", regs)
    smem = 0; if (match($0, /[0-9]+ bytes smem/)) { smem = substr($0, RSTART, RLENGTH); sub(/ bytes smem/, "", smem) }
    printf "%-32s %5s %12s %12s %10s\n", name, regs, st, ld, smem
  }' "$tmp/ptxas.txt" | grep -E "_d(64|128) " | sort
