#!/usr/bin/env bash
# The whole test suite: sets up and builds (via setup.sh) then runs lit (dialect and
# pass tests), ctest (runtime C++ tests), pytest in the project's environment
# (numerics against the float64 reference, errors, memory, torch.compile, distributed,
# demos, the runtime fuzzer) and a brief fixed-seed run of the parser and pipeline fuzzers
# (scripts/fuzz.sh --brief, counted as one test). Ends with one "N passed, M failed" line.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${ATTN_BUILD_DIR:-$root/build}"
venv="${ATTN_VENV:-$root/.venv}"
export ATTN_BUILD_DIR="$build"

bash "$root/scripts/setup.sh" || { echo "0 passed, 1 failed (build)"; exit 1; }

passed=0 failed=0
tally() { passed=$((passed + $1)); failed=$((failed + $2)); }
logdir=$(mktemp -d)

echo "== lit"
/usr/lib/llvm-22/bin/lit -sv "$build/test" | tee "$logdir/lit"
lit_status=${PIPESTATUS[0]}
lit_passed=$(grep -Eo '^ *(Passed|Expectedly Failed) *: *[0-9]+' "$logdir/lit" | grep -Eo '[0-9]+$' | awk '{s += $1} END {print s + 0}')
lit_failed=$(grep -Eo '^ *(Failed|Unexpectedly Passed|Unresolved|Timed Out) *: *[0-9]+' "$logdir/lit" | grep -Eo '[0-9]+$' | awk '{s += $1} END {print s + 0}')
tally "${lit_passed:-0}" "${lit_failed:-0}"
((lit_status == 0 || ${lit_failed:-0} > 0)) || tally 0 1

echo "== ctest"
ctest --test-dir "$build" --output-on-failure | tee "$logdir/ctest"
ctest_status=${PIPESTATUS[0]}
if line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$logdir/ctest"); then
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
  bad=$(sed -E 's/.* ([0-9]+) tests failed.*/\1/' <<<"$line")
  tally $((total - bad)) "$bad"
fi
((ctest_status == 0)) || ((failed > 0)) || tally 0 1

echo "== pytest"
(cd "$root" && "$venv/bin/python" -m pytest -q -p no:cacheprovider --durations=20 test/python) | tee "$logdir/pytest"
pytest_status=${PIPESTATUS[0]}
summary=$(tail -n 1 "$logdir/pytest")
py_passed=$(grep -Eo '[0-9]+ passed' <<<"$summary" | grep -Eo '[0-9]+')
py_failed=$(grep -Eo '[0-9]+ (failed|error|errors)' <<<"$summary" | grep -Eo '[0-9]+' | awk '{s += $1} END {print s + 0}')
tally "${py_passed:-0}" "${py_failed:-0}"
((pytest_status == 0 || ${py_failed:-0} > 0)) || tally 0 1

echo "== fuzz"
# The parser and pipeline fuzzers under libFuzzer, briefly, from a fixed seed (scripts/fuzz.sh --brief);
# the runtime fuzzer runs in pytest (test_fuzz.py).
bash "$root/scripts/fuzz.sh" --brief >"$logdir/fuzz" 2>&1
fuzz_status=$?
grep -E "^Done [0-9]+ runs" "$logdir/fuzz"
if ((fuzz_status == 0)); then tally 1 0; else tail -n 40 "$logdir/fuzz"; tally 0 1; fi

rm -rf "$logdir"
echo "${passed} passed, ${failed} failed"
((failed == 0))
