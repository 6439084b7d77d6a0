"""The generated Triton kernels under Triton's interpreter, on CPU tensors, against the
float64 references (the cases: triton_interpreter_cases.py). Triton reads
TRITON_INTERPRET when it is imported, and other tests of this session import it for
torch.compile, so the cases run in a fresh process that sets it first. Cases named
*native_only* need a GPU (scripts/gpu-check.sh runs them): deselected here, so that any
skip left is a failure. The interpreter runs a kernel on one core, so the cases are
spread over every core this process may use (pytest-xdist): the suite's slowest file,
about 5 minutes on one core of a 2-vCPU EPYC."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

CASES = Path(__file__).with_name("triton_interpreter_cases.py")


def test_generated_kernels_under_the_interpreter():
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    workers = str(len(os.sched_getaffinity(0)))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-n", workers, "-W", "ignore::RuntimeWarning",
                             "-k", "not native_only", str(CASES)],
                            env=env, capture_output=True, text=True, cwd=CASES.parent)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0 and " passed" in summary and "skipped" not in summary, (
        f"interpreter cases failed ({summary}):\n{result.stdout[-8000:]}\n{result.stderr[-2000:]}")
    print(f"\ntriton interpreter cases: {summary}")
