"""The runtime's helper threads (runtime/work_sharing.cpp) seen from Python: a process
exits cleanly right after parallel calls made under Python thread-local state (CI once
aborted there: "terminate called without an active exception", 1 run in 75), and a
forked child, whose parent's helpers did not survive the fork, still computes."""
import subprocess
import sys

from conftest import EXAMPLES

EXIT_AFTER_CALLS = """
import sys, torch, attn
torch.set_num_threads(2)
kernel = attn.compile(sys.argv[1])
q = torch.randn(1, 4, 64, 16, requires_grad=True)
# Saved-tensor hooks put Python objects into the thread-local state a task carries.
with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
    for _ in range(20):
        kernel(q, q, q, is_causal=True).sum().backward()
"""

FORKED_CHILD = """
import os, sys, torch, attn
torch.set_num_threads(2)
kernel = attn.compile(sys.argv[1])
q = torch.randn(2, 4, 256, 32)
expected = kernel(q, q, q)
pid = os.fork()
if pid == 0:
    os._exit(0 if torch.equal(kernel(q, q, q), expected) else 3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_probe(probe):
    return subprocess.run([sys.executable, "-c", probe, str(EXAMPLES / "softmax.mlir")],
                          capture_output=True, text=True, timeout=300)


def test_exit_right_after_parallel_calls_is_clean():
    for attempt in range(3):
        r = run_probe(EXIT_AFTER_CALLS)
        assert r.returncode == 0, f"attempt {attempt}: {r.stderr[-2000:]}"


def test_a_forked_child_computes_with_fresh_helpers():
    r = run_probe(FORKED_CHILD)
    assert r.returncode == 0, r.stderr[-2000:]
