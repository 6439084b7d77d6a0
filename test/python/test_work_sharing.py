"""The runtime's helper threads (runtime/work_sharing.cpp) seen from Python: a process
exits cleanly right after parallel calls made under Python thread-local state (CI once
aborted there: "terminate called without an active exception", 1 run in 75), a forked
child, whose parent's helpers did not survive the fork, still computes, and the least
work per thread (attn.min_thread_work_ns) is read and set as documented. The probes'
calls are small: they set that least work to 0 so that helpers run them."""
import subprocess
import sys

import pytest
import torch

import attn
from conftest import EXAMPLES

EXIT_AFTER_CALLS = """
import sys, torch, attn
torch.set_num_threads(2)
attn.set_min_thread_work_ns(0)
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
attn.set_min_thread_work_ns(0)
kernel = attn.compile(sys.argv[1])
q = torch.randn(2, 4, 256, 32)
expected = kernel(q, q, q)
pid = os.fork()
if pid == 0:
    result = kernel(q, q, q)
    # The parent's calls ran OpenMP regions (runtime/work_sharing.cpp), and libgomp's
    # threads do not survive a fork: the child's own ATen ops run on one thread, as
    # after any parallel ATen op in the parent.
    torch.set_num_threads(1)
    os._exit(0 if torch.equal(result, expected) else 3)
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


DEFAULT_IN_A_FRESH_PROCESS = """
import attn
print(attn.min_thread_work_ns())
"""


def test_min_thread_work_is_100_us_unless_set():
    r = subprocess.run([sys.executable, "-c", DEFAULT_IN_A_FRESH_PROCESS],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert float(r.stdout) == 100_000.0


def test_set_min_thread_work_returns_the_value_it_replaces():
    before = attn.set_min_thread_work_ns(250_000)
    try:
        assert attn.min_thread_work_ns() == 250_000.0
        assert attn.set_min_thread_work_ns(before) == 250_000.0
    finally:
        attn.set_min_thread_work_ns(before)


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan")])
def test_set_min_thread_work_refuses_what_is_no_duration(bad):
    before = attn.min_thread_work_ns()
    with pytest.raises(RuntimeError, match=r"expected a finite number of nanoseconds >= 0"):
        attn.set_min_thread_work_ns(bad)
    assert attn.min_thread_work_ns() == before


def test_cpu_pair_cost_is_the_manifest_entry_of_the_schedule_a_call_takes():
    """The thread estimate's cost of a multiply-add (torch.ops.attn.cpu_pair_cost): the
    tiled entry of the call's head dim, else its dtype's generic entry, else the element
    bytes over 4 (a dtype the manifest does not cost)."""
    kernel = attn.compile(EXAMPLES / "softmax.mlir")
    costs = [c for c in kernel.manifest["cpu_cost"] if c["dtype"] == "f64"]
    tiled = next(c for c in costs if c.get("head_dim") == 64)
    generic = next(c for c in costs if "head_dim" not in c)
    assert tiled["forward"] != generic["forward"]
    for backward, field in ((False, "forward"), (True, "backward")):
        assert torch.ops.attn.cpu_pair_cost(kernel.path, torch.float64, 64, 64,
                                            backward) == tiled[field]
        assert torch.ops.attn.cpu_pair_cost(kernel.path, torch.float64, 48, 48,
                                            backward) == generic[field]
    assert torch.ops.attn.cpu_pair_cost(kernel.path, torch.bfloat16, 64, 64, False) == 0.5
