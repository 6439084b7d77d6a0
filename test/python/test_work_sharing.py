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


def run_probe(probe, env=None):
    return subprocess.run([sys.executable, "-c", probe, str(EXAMPLES / "softmax.mlir")],
                          capture_output=True, text=True, timeout=300, env=env)


def test_exit_right_after_parallel_calls_is_clean():
    import os
    # The last attempt stalls the helpers 300 ms on each item they take, so that one is
    # likely still running, and then drops its tensors, while the interpreter shuts down
    # (work_sharing.cpp: Graveyard).
    for attempt, delay in enumerate(("0", "0", "300")):
        r = run_probe(EXIT_AFTER_CALLS, dict(os.environ, ATTN_TEST_HELPER_DELAY_MS=delay))
        assert r.returncode == 0, f"attempt {attempt}: {r.stderr[-2000:]}"


def test_a_forked_child_computes_with_fresh_helpers():
    r = run_probe(FORKED_CHILD)
    assert r.returncode == 0, r.stderr[-2000:]


# A decoder step's key chunks (split-K forward and backward) and a long head's backward
# query splits on 2 threads, the helper stalled 600 ms on every item it takes
# (ATTN_TEST_HELPER_DELAY_MS, as a helper descheduled on a busy core): the caller runs
# those items again into their second copy and takes the copies that finished first.
# Softmax (causal, bottom-right, GQA, key padding), ALiBi with a learnable slope (its
# dparams), a learnable bias table (its gradient per set), and stick-breaking (a scan's
# forward key chunks).
BACKED_UP_CHUNKS = """
import sys, time, torch, attn
torch.set_num_threads(2)
torch.manual_seed(0)
results, slowest = {}, 0.0

def timed(f):
    # Once the stalled helper is free again, so that it takes an item of this call.
    time.sleep(float(sys.argv[3]))
    global slowest
    start = time.perf_counter()
    value = f()
    slowest = max(slowest, time.perf_counter() - start)
    return value

for name in ("softmax", "stick_breaking"):
    kernel = attn.compile(sys.argv[1] + "/normalizers/" + name + ".mlir")
    # B·H = 4 calls of 3 rows: 2 key chunks each on 2 threads (work_split.h).
    q = torch.randn(2, 2, 3, 32, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(2, 1, 4096, 32, dtype=torch.float64, requires_grad=True) for _ in range(2))
    # Loads the forward and backward, warms the helpers and autograd's threads.
    kernel(q, k, v, is_causal=True).sum().backward()
    out = timed(lambda: kernel(q, k, v, is_causal=True, query_start=torch.tensor([4093, 3000]),
                               key_lengths=torch.tensor([4096, 3003])))
    grads = timed(lambda: torch.autograd.grad(out, (q, k, v), torch.ones_like(out)))
    results[name] = (out.detach(), *grads)
# Two heads of 512 rows: the backward's query splits; a learnable slope, a learnable
# [H, 32] table.
for name in ("alibi", "t5_bias"):
    kernel = attn.compile(sys.argv[1] + "/families/" + name + ".mlir")
    q, k, v = (torch.randn(1, 2, 512, 32, dtype=torch.float64, requires_grad=True) for _ in range(3))
    params = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
    table = torch.randn(2, 32, dtype=torch.float64, requires_grad=True)
    extra = dict(params=params) if name == "alibi" else dict(inputs={"bias": table})
    kernel(q, k, v, **extra).sum().backward()
    out = timed(lambda: kernel(q, k, v, **extra))
    leaves = (q, k, v, params if name == "alibi" else table)
    results[name] = (out.detach(), *timed(lambda: torch.autograd.grad(out, leaves, torch.ones_like(out))))
torch.save({"results": results, "slowest": slowest}, sys.argv[2])
"""


def test_backed_up_chunks_equal_the_unstalled_ones(tmp_path):
    import os
    import torch
    runs = {}
    for label, delay in (("stalled", 0.6), ("plain", 0.0)):
        out = tmp_path / f"{label}.pt"
        env = dict(os.environ, ATTN_TEST_HELPER_DELAY_MS=str(int(delay * 1000)))
        r = subprocess.run([sys.executable, "-c", BACKED_UP_CHUNKS, str(EXAMPLES.parent), str(out),
                            str(delay + 0.05)],
                           capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        runs[label] = torch.load(out)
    for name, expected in runs["plain"]["results"].items():
        for index, (got, want) in enumerate(zip(runs["stalled"]["results"][name], expected)):
            assert torch.equal(got, want), (name, index)
    # No call waited out the stalled helper's 600 ms.
    assert runs["stalled"]["slowest"] < 0.5, runs["stalled"]["slowest"]
