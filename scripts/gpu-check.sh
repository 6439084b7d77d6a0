#!/usr/bin/env bash
# The GPU check, one command on a machine with an NVIDIA GPU, CUDA PyTorch and Triton but
# no MLIR and no attn-compile (the project's device machine: torch 2.11, Triton 3.6), run
# from a copy of the working tree plus what scripts/gpu-artifacts.sh prepared on a
# development machine:
#
#   bash scripts/gpu-check.sh OUTDIR [ARTIFACT_DIR]     # ARTIFACT_DIR default gpu-artifacts/
#
# The kernels run through the Python launcher (attn.triton_backend: the emitted Triton
# modules of ARTIFACT_DIR/cache, compiled by this machine's Triton for its GPU), which needs
# no C++ runtime: a libattn_runtime.so built elsewhere links another torch's C++ ABI and
# does not load here. Steps, each time-boxed, logged to OUTDIR/<step>.log, a failing one
# not stopping the next:
#   1. triton_native  the numerics cases of the interpreter suite, natively on CUDA tensors
#                     (f32, f16, bf16; forward and every gradient vs float64);
#   2. runtime        builds the C++ runtime against this torch (cmake -S runtime) and,
#                     where that works, runs one forward + backward of the artifacts'
#                     cubins through it (test/cuda/sanitize_kernels.py);
#   3. runtime_numerics  where step 2 built the runtime: a scan's and an implicit
#                     normalizer's cubins (stick_breaking.so, sparsemax.so) through it,
#                     forward and every gradient vs float64 (test/cuda/runtime_numerics.py);
#   4. sanitizer_*    compute-sanitizer memcheck on one forward and one backward (the
#                     Python launcher; the cubins too where step 2 built the runtime);
#   5. gpu_bench      bench/gpu_bench.py on the time left but ATTN_GPU_TILES_SECONDS, its
#                     table in OUTDIR/gpu-bench.md (ATTN_GPU_BENCH_ARGS: more of its
#                     options, e.g. "--quick --only softmax");
#   6. gpu_tiles      bench/gpu_tiles.py (softmax's candidate schedules, d = 128, N = 4096)
#                     on ATTN_GPU_TILES_SECONDS (default 120; 0: skipped), OUTDIR/gpu-tiles.md.
# Ends within ATTN_GPU_CHECK_SECONDS (default 560, under the device tool's 10 minutes per
# command); writes OUTDIR/summary.json; exits non-zero when a step failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="${1:?usage: scripts/gpu-check.sh OUTDIR [ARTIFACT_DIR]}"
artifacts=$(cd "${2:-$root/gpu-artifacts}" 2>/dev/null && pwd) ||
  { echo "gpu-check: artifact directory ${2:-$root/gpu-artifacts} not found: run scripts/gpu-artifacts.sh on a development machine and carry it" >&2; exit 2; }
python="${PYTHON:-python3}"
rt_build="${ATTN_GPU_RUNTIME_BUILD:-/tmp/attn-gpu-runtime}"
mkdir -p "$out"
out=$(cd "$out" && pwd)
start=$(date +%s)
total_seconds="${ATTN_GPU_CHECK_SECONDS:-560}"
declare -A status seconds

elapsed() { echo $(($(date +%s) - start)); }
# step NAME LIMIT_SECONDS COMMAND...: runs COMMAND with its output in OUTDIR/NAME.log
step() {
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s)
  echo "== $name (limit ${limit} s)"
  timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
  rc=$?
  seconds[$name]=$(($(date +%s) - t0))
  status[$name]=$rc
  tail -n 4 "$out/$name.log"
  echo "== $name: exit $rc after ${seconds[$name]} s"
}

nvidia-smi >"$out/nvidia-smi.log" 2>&1
"$python" - >"$out/environment.json" <<'PY'
import json, torch
try:
    import triton
    triton_version = triton.__version__
except ImportError:
    triton_version = None
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton_version,
                  "cuda_available": torch.cuda.is_available(),
                  "device": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
                  "capability": list(torch.cuda.get_device_capability()) if torch.cuda.is_available() else None}))
PY
cat "$out/environment.json"
if ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu-check: torch.cuda.is_available() is False on this machine: nothing to check" >&2
  echo '{"error": "no CUDA device"}' >"$out/summary.json"
  exit 2
fi

# The cached emitted modules stand in for attn-compile (absent here); Triton's own cache
# stays in OUTDIR's sibling, out of what comes back.
export ATTN_CACHE_DIR="$artifacts/cache" TRITON_CACHE_DIR=/tmp/attn-triton-cache
export PYTHONPATH="$root/runtime/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

# Triton compiles every case's kernels for the GPU, one process each: spread the cases over
# the machine's cores where pytest-xdist is installed (the device image has it).
parallel=()
if "$python" -c 'import xdist' 2>/dev/null; then
  parallel=(-n "$(($(nproc) > 12 ? 12 : $(nproc)))")
fi
# (The refused-kernel case checks attn-compile's diagnostic: no compiler here.)
step triton_native 200 env ATTN_TRITON_DEVICE=cuda "$python" -m pytest -q -p no:cacheprovider \
  -rfEs -W ignore::RuntimeWarning "$root/test/python/triton_interpreter_cases.py" \
  -k "not test_refused_kernel_names_the_feature" "${parallel[@]}" \
  --junitxml="$out/triton_native.xml"

torch_root=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
# The system's g++, whose libstdc++ is the one torch's process loads, where there is one:
# the device image's default (/opt/gcc/bin/g++) links libstdc++ statically, and that
# runtime crashed on loading an artifact (bench/RESULTS.md, 2026-11-28). ATTN_GPU_CXX
# chooses another.
cxx="${ATTN_GPU_CXX:-$(command -v /usr/bin/g++ || true)}"
step runtime 150 bash -c "echo 'C++ compiler: ${cxx:-cmake default}'; ${cxx:+CXX='$cxx'} \
  cmake -S '$root/runtime' -B '$rt_build' -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH='$torch_root' -DATTN_BUILD_TESTS=OFF && cmake --build '$rt_build' && \
  ATTN_RUNTIME_LIB='$rt_build/libattn_runtime.so' '$python' '$root/test/cuda/sanitize_kernels.py' '$artifacts'"

if [[ ${status[runtime]} -eq 0 ]]; then
  step runtime_numerics 60 env ATTN_RUNTIME_LIB="$rt_build/libattn_runtime.so" \
    "$python" "$root/test/cuda/runtime_numerics.py" "$artifacts"
fi

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step sanitizer_python 100 "$sanitizer" --tool memcheck --error-exitcode 3 \
  "$python" "$root/test/cuda/sanitize_kernels.py" --python
if [[ ${status[runtime]} -eq 0 ]]; then
  step sanitizer_cubins 100 env ATTN_RUNTIME_LIB="$rt_build/libattn_runtime.so" \
    "$sanitizer" --tool memcheck --error-exitcode 3 \
    "$python" "$root/test/cuda/sanitize_kernels.py" "$artifacts"
fi

tiles_seconds="${ATTN_GPU_TILES_SECONDS:-120}"
left=$((total_seconds - tiles_seconds - $(elapsed)))
if ((left > 60)); then
  step gpu_bench "$left" "$python" "$root/bench/gpu_bench.py" --out "$out/gpu-bench.md" \
    --json "$out/gpu-bench.json" --budget 0.15 --deadline $((left - 60)) ${ATTN_GPU_BENCH_ARGS:-}
fi
left=$((total_seconds - $(elapsed)))
if ((tiles_seconds > 0 && left > 60)); then
  step gpu_tiles "$left" "$python" "$root/bench/gpu_tiles.py" --out "$out/gpu-tiles.md" \
    --budget 0.15 --deadline $((left - 45))
fi

"$python" - "$out" >"$out/summary.json" <<PY
import json, re, sys, os
out = sys.argv[1]
steps = {}
for name, rc, secs in [$(for n in "${!status[@]}"; do printf '("%s", %s, %s), ' "$n" "${status[$n]}" "${seconds[$n]}"; done)]:
    steps[name] = {"exit": rc, "seconds": secs}
    log = open(os.path.join(out, name + ".log"), errors="replace").read()
    if name == "triton_native":
        tail = [l for l in log.splitlines() if " passed" in l or " failed" in l]
        counts = re.findall(r"(\d+) (passed|failed|skipped|error|errors)", tail[-1] if tail else "")
        steps[name].update({k: int(v) for v, k in counts})
    if name.startswith("sanitizer_"):
        m = re.search(r"ERROR SUMMARY: (\d+) error", log)
        steps[name]["errors"] = int(m.group(1)) if m else None
print(json.dumps({"environment": json.load(open(os.path.join(out, "environment.json"))),
                  "launcher": "python (attn.triton_backend)" + (
                      " and the C++ runtime built here" if steps.get("runtime", {}).get("exit") == 0
                      else "; the C++ runtime did not build or run here (runtime.log)"),
                  "seconds": $(elapsed), "steps": steps}, indent=1))
PY
cat "$out/summary.json"
for name in "${!status[@]}"; do
  [[ ${status[$name]} -eq 0 ]] || exit 1
done
