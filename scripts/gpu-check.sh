#!/usr/bin/env bash
# The GPU check, one command on a machine with an NVIDIA GPU, CUDA PyTorch, CMake and
# ninja but no MLIR (the project's device machine), run from a copy of the working tree
# plus the artifacts scripts/gpu-artifacts.sh compiled beforehand on a development
# machine:
#
#   bash scripts/gpu-check.sh OUTDIR [ARTIFACT_DIR]     # ARTIFACT_DIR default gpu-artifacts/
#
# 1. builds the runtime against that machine's own torch (cmake -S runtime);
# 2. runs test/python/test_cuda.py (every GPU numerics test vs the float64 reference);
# 3. runs compute-sanitizer memcheck and racecheck on one forward and one backward of
#    each GPU kernel kind (test/cuda/sanitize_kernels.py);
# 4. runs the GPU benchmark (bench/gpu_bench.py) on what time is left;
# and writes every log plus summary.json into OUTDIR. Each step has a time limit so the
# whole script ends within 10 minutes; it exits non-zero when a step failed.
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
  tail -n 5 "$out/$name.log"
  echo "== $name: exit $rc after ${seconds[$name]} s"
}

nvidia-smi >"$out/nvidia-smi.log" 2>&1
"$python" - >"$out/environment.json" <<'EOF'
import json, torch
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                  "cuda_available": torch.cuda.is_available(),
                  "device": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
                  "capability": list(torch.cuda.get_device_capability()) if torch.cuda.is_available() else None}))
EOF
if ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu-check: torch.cuda.is_available() is False on this machine: nothing to check" >&2
  echo '{"error": "no CUDA device"}' >"$out/summary.json"
  exit 2
fi

torch_root=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
step build 180 bash -c "cmake -S '$root/runtime' -B '$rt_build' -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH='$torch_root' -DATTN_BUILD_TESTS=OFF && cmake --build '$rt_build'"

export ATTN_RUNTIME_LIB="$rt_build/libattn_runtime.so" ATTN_PREBUILT_ARTIFACTS="$artifacts"
export PYTHONPATH="$root/runtime/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export ATTN_CACHE_DIR="$out/cache"
if [[ ${status[build]} -eq 0 ]]; then
  step test_cuda 240 "$python" -m pytest -q -p no:cacheprovider -rfEs "$root/test/python/test_cuda.py" \
    --junitxml="$out/test_cuda.xml"
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck; do
    step "sanitizer_$tool" 90 "$sanitizer" --tool "$tool" --error-exitcode 3 \
      "$python" "$root/test/cuda/sanitize_kernels.py" "$artifacts"
  done
  left=$((540 - $(elapsed)))
  if ((left > 60)); then
    step gpu_bench "$left" "$python" "$root/bench/gpu_bench.py" --artifacts "$artifacts" \
      --json "$out/gpu-bench.json" --budget 0.3 --deadline $((left - 45))
  fi
fi

"$python" - "$out" >"$out/summary.json" <<EOF
import json, re, sys, os
out = sys.argv[1]
steps = {}
for name, rc, secs in [$(for n in "${!status[@]}"; do printf '("%s", %s, %s), ' "$n" "${status[$n]}" "${seconds[$n]}"; done)]:
    steps[name] = {"exit": rc, "seconds": secs}
    log = open(os.path.join(out, name + ".log"), errors="replace").read()
    if name == "test_cuda":
        counts = re.findall(r"(\d+) (passed|failed|skipped|error|errors)", log.splitlines()[-1] if log else "")
        steps[name].update({k: int(v) for v, k in counts})
    if name.startswith("sanitizer_"):
        m = re.search(r"ERROR SUMMARY: (\d+) error", log)
        steps[name]["errors"] = int(m.group(1)) if m else None
print(json.dumps({"environment": json.load(open(os.path.join(out, "environment.json"))),
                  "seconds": $(elapsed), "steps": steps}, indent=1))
EOF
cat "$out/summary.json"
for name in "${!status[@]}"; do
  [[ ${status[$name]} -eq 0 ]] || exit 1
done
[[ -n "${status[test_cuda]:-}" ]] || exit 1
