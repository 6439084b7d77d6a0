"""The runtime fuzzer (runtime_fuzz.py), briefly and from a fixed seed: bad tensors and
bad artifacts each get an error with a message, never a crash. It runs in a process of
its own, so that a crash is reported as such, with the case that caused it (the last one
it printed). scripts/fuzz.sh runs it longer."""
import subprocess
import sys

from conftest import REPO

CASES = 150


def test_runtime_fuzz_fixed_seed(attn_mod):
    result = subprocess.run([sys.executable, str(REPO / "test" / "python" / "runtime_fuzz.py"),
                             "--seed", "1", "--cases", str(CASES)],
                            capture_output=True, text=True, timeout=900)
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-25:])
    assert result.returncode == 0, f"runtime_fuzz.py exited with {result.returncode}:\n{tail}"
    summary = result.stdout.splitlines()[-1]
    assert summary.startswith(f"runtime_fuzz: seed 1, {CASES} cases of each kind:"), tail
    # Both kinds ran, and both had calls that worked and calls that were refused.
    for kind in ("tensors", "artifacts"):
        assert f"{kind} ok:" in summary and f"{kind} RuntimeError:" in summary, summary
