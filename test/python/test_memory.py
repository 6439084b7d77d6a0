"""No N×N buffer: forward+backward at B=H=1, N=16384, d=64, float32 softmax must use
less than 128 MiB of memory beyond its inputs (an N×N float32 matrix is 1 GiB). Linear
scratch fits under it: the backward splits one slice's queries into kItemsPerThread
(4) fixed call sets per thread, each adding to dK and dV buffers of its own (8 MiB
here), so that threads take sets as they finish and the sum stays in a fixed order
(runtime/work_split.h, backward_call_sets): 64 MiB of the ~88 measured on 2 threads.

Runs in a fresh subprocess. The peak RSS is measured from a point after the inputs are
allocated and the kernel has been warmed up: the kernel's peak (VmHWM) is reset through
/proc/self/clear_refs ("5") where the kernel allows it; otherwise ru_maxrss before/after
is used (valid as long as the earlier peak was below the current RSS + inputs)."""
import json
import os
import subprocess
import sys
import textwrap

from conftest import BUILD, RUNTIME_LIB

LIMIT_MIB = 128
N, D = 16384, 64

SCRIPT = textwrap.dedent(r"""
    import json, os, resource, sys, time
    import torch
    import attn
    attn.load(sys.argv[1])  # registers torch.ops.attn
    path = sys.argv[1]
    N, D = int(sys.argv[2]), int(sys.argv[3])
    causal = len(sys.argv) > 4 and sys.argv[4] == "causal"
    torch.set_num_threads(max(1, min(2, len(os.sched_getaffinity(0)))))

    def status(key):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        return None

    def run(n):
        g = torch.Generator().manual_seed(0)
        q = torch.randn(1, 1, n, D, generator=g).requires_grad_(True)
        k = torch.randn(1, 1, n, D, generator=g).requires_grad_(True)
        v = torch.randn(1, 1, n, D, generator=g).requires_grad_(True)
        dout = torch.randn(1, 1, n, D, generator=g)
        return q, k, v, dout

    p = torch.zeros(0)
    # warm up: load every code path, spin up the thread pool
    q, k, v, dout = run(256)
    torch.ops.attn.attention(path, q, k, v, p, causal, None).backward(dout)
    del q, k, v, dout

    q, k, v, dout = run(N)
    inputs = sum(t.numel() * t.element_size() for t in (q, k, v, dout))
    rss0 = status("VmRSS")
    maxrss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    reset = False
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        reset = status("VmHWM") <= rss0 + (1 << 20)
    except OSError:
        pass
    hwm0 = status("VmHWM")
    t0 = time.time()
    out = torch.ops.attn.attention(path, q, k, v, p, causal, None)
    out.backward(dout)
    secs = time.time() - t0
    assert torch.isfinite(out).all() and torch.isfinite(q.grad).all()
    hwm1 = status("VmHWM")
    maxrss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(dict(reset=reset, rss0=rss0, hwm0=hwm0, hwm1=hwm1,
                          maxrss0=maxrss0, maxrss1=maxrss1, inputs=inputs, secs=secs,
                          threads=torch.get_num_threads())))
""")


def extra_peak_mib(path, tmp_path, n, d, causal=False):
    """Runs SCRIPT in a fresh process: (peak RSS beyond the inputs in MiB, its raw report)."""
    script = tmp_path / "mem.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, ATTN_BUILD_DIR=str(BUILD), ATTN_RUNTIME_LIB=str(RUNTIME_LIB))
    r = subprocess.run([sys.executable, str(script), path, str(n), str(d),
                        "causal" if causal else "full"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, f"subprocess failed:\n{r.stdout}\n{r.stderr}"
    m = json.loads(r.stdout.strip().splitlines()[-1])
    extra = m["hwm1"] - m["rss0"] if m["reset"] else m["maxrss1"] - max(m["maxrss0"], m["rss0"])
    return extra / 2**20, m


def test_no_quadratic_memory(artifacts, tmp_path):
    extra_mib, m = extra_peak_mib(artifacts("softmax"), tmp_path, N, D)
    print(f"\nN={N} d={D} f32 softmax fwd+bwd: extra peak RSS {extra_mib:.1f} MiB "
          f"over inputs ({m['inputs'] / 2**20:.0f} MiB), {m['secs']:.1f} s on "
          f"{m['threads']} thread(s), "
          f"method={'VmHWM reset' if m['reset'] else 'ru_maxrss'}")
    assert extra_mib < LIMIT_MIB, (
        f"forward+backward used {extra_mib:.1f} MiB beyond the inputs (limit {LIMIT_MIB}); "
        f"an N×N float32 buffer would be {N * N * 4 / 2**30:.0f} GiB. raw: {m}")
