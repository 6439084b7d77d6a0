#!/usr/bin/env bash
# Fuzzing on demand:
#   scripts/fuzz.sh [--time SECONDS] [--seed N] [--cases N]
#   scripts/fuzz.sh --brief          (what scripts/test.sh runs: fixed seed, a few seconds)
#
# 1. The parser fuzzer (fuzz/ParserFuzzer.cpp: the attn dialect's parser, verifier and
#    printer) under libFuzzer and AddressSanitizer, built with clang-22 (setup.sh installs
#    it) in $ATTN_FUZZ_BUILD_DIR (default <repo>/build-fuzz). It starts from fuzz/corpus,
#    test/Dialect and the examples; what it learns stays in <build-fuzz>/corpus, what it
#    finds is written to <build-fuzz>/findings/crash-* (replay one with
#    `<build-fuzz>/bin/attn-parser-fuzzer FILE`).
#    Then the pipeline fuzzer (fuzz/PipelineFuzzer.cpp: expand, verify, classify and
#    derive) from fuzz/pipeline-corpus and the examples, with a per-input time limit of
#    20 s (-timeout): an analysis superlinear in the region fails as a timeout-* finding.
#    It gets a fifth of the time (or of the runs) of the parser fuzzer.
# 2. The runtime fuzzer (test/python/runtime_fuzz.py: bad tensors and bad artifacts) in
#    the project's environment, --cases cases of each kind.
#
# Defaults: 600 s of parser fuzzing, a seed from the clock (printed), 2000 runtime cases.
# --brief: seed 1, 20000 parser runs from an empty scratch corpus, no runtime cases (the
# test suite runs runtime_fuzz.py itself, in test_fuzz.py).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${ATTN_FUZZ_BUILD_DIR:-$root/build-fuzz}"
venv="${ATTN_VENV:-$root/.venv}"

brief=0 time=600 seed=$(date +%s) cases=2000
while (($#)); do
  case "$1" in
    --brief) brief=1 seed=1 ;;
    --time) time="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    --cases) cases="$2"; shift ;;
    *) echo "usage: scripts/fuzz.sh [--brief] [--time SECONDS] [--seed N] [--cases N]" >&2; exit 2 ;;
  esac
  shift
done

for tool in clang-22 clang++-22; do
  command -v "$tool" >/dev/null ||
    { echo "scripts/fuzz.sh: $tool not found: run scripts/setup.sh (it installs clang-22 and libclang-rt-22-dev)" >&2; exit 1; }
done
if [[ ! -f "$build/build.ninja" ]]; then
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DATTN_LIBFUZZER=ON -DATTN_BUILD_RUNTIME=OFF >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; exit 1; }
fi
cmake --build "$build" --target attn-parser-fuzzer attn-pipeline-fuzzer

seeds=("$root/fuzz/corpus" "$root/test/Dialect" "$root/examples/normalizers" "$root/examples/families")
pipeline_seeds=("$root/fuzz/pipeline-corpus" "$root/examples/normalizers" "$root/examples/families")
# Long enough for the deep seeds (a 900-op region is about 30 KB).
pipeline_flags=(-timeout=20 -max_len=65536 -print_final_stats=1 -artifact_prefix="$build/findings/")
mkdir -p "$build/findings"
# MLIR's allocators poison and unpoison memory from code inlined into the instrumented
# target, but not from libMLIR (not instrumented): that user poisoning is ignored.
export ASAN_OPTIONS="allow_user_poisoning=0:${ASAN_OPTIONS:-}"
if ((brief)); then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  "$build/bin/attn-parser-fuzzer" -seed=1 -runs=20000 -max_len=4096 -print_final_stats=1 \
    -artifact_prefix="$build/findings/" "$scratch" "${seeds[@]}"
  mkdir "$scratch/pipeline"
  "$build/bin/attn-pipeline-fuzzer" -seed=1 -runs=2000 "${pipeline_flags[@]}" \
    "$scratch/pipeline" "${pipeline_seeds[@]}"
  exit
fi
echo "scripts/fuzz.sh: seed $seed"
mkdir -p "$build/corpus"
"$build/bin/attn-parser-fuzzer" -seed="$seed" -max_total_time="$time" -max_len=4096 \
  -print_final_stats=1 -artifact_prefix="$build/findings/" "$build/corpus" "${seeds[@]}"
mkdir -p "$build/pipeline-corpus"
"$build/bin/attn-pipeline-fuzzer" -seed="$seed" -max_total_time=$((time / 5 + 1)) \
  "${pipeline_flags[@]}" "$build/pipeline-corpus" "${pipeline_seeds[@]}"
"$venv/bin/python" "$root/test/python/runtime_fuzz.py" --seed "$seed" --cases "$cases"
