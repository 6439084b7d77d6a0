"""Kernelised (linear) attention at N = 65536, d = 64, float32, B = H = 1: forward +
backward on the CPU in memory linear in N. Beyond the inputs only O(N·d) tensors
(O, row statistics, dq, dk, dv) and the kernels' O(d² + N) scratch may appear: an
N×N float32 matrix would be 16 GiB. Measured as in test_memory.py (fresh subprocess,
peak RSS after warm-up), at N/4 and N: the extra memory must grow at most linearly."""
import json
import os
import subprocess
import sys

import pytest

from conftest import BUILD, REPO, RUNTIME_LIB
from test_memory import SCRIPT

D = 64
BYTES_PER_ROW = 4 * D * 4          # float32 O, dq, dk, dv per row
SLACK_MIB = 48                     # allocator, thread pool, autograd bookkeeping


def _extra_mib(path, tmp_path, n, causal):
    script = tmp_path / "mem.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, ATTN_BUILD_DIR=str(BUILD), ATTN_RUNTIME_LIB=str(RUNTIME_LIB))
    r = subprocess.run([sys.executable, str(script), path, str(RUNTIME_LIB),
                        str(REPO / "runtime" / "python"), str(n), str(D),
                        "causal" if causal else "full"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, f"subprocess failed:\n{r.stdout}\n{r.stderr}"
    m = json.loads(r.stdout.strip().splitlines()[-1])
    extra = m["hwm1"] - m["rss0"] if m["reset"] else m["maxrss1"] - max(m["maxrss0"], m["rss0"])
    print(f"\nN={n} d={D} f32 linear {'causal' if causal else 'full'} fwd+bwd: extra peak RSS "
          f"{extra / 2**20:.1f} MiB over inputs ({m['inputs'] / 2**20:.0f} MiB), "
          f"{m['secs']:.2f} s on {m['threads']} thread(s)")
    return extra / 2**20


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_linear_attention_memory_is_linear(artifacts, tmp_path, causal):
    path = artifacts("linear")
    small, large = 16384, 65536
    extra_small = _extra_mib(path, tmp_path, small, causal)
    extra_large = _extra_mib(path, tmp_path, large, causal)
    limit = 2 * large * BYTES_PER_ROW / 2**20 + SLACK_MIB
    assert extra_large < limit, (
        f"N={large}: {extra_large:.1f} MiB beyond the inputs, more than twice the O(N·d) "
        f"outputs and gradients plus {SLACK_MIB} MiB ({limit:.0f} MiB); an N×N float32 "
        f"buffer would be {large * large * 4 / 2**30:.0f} GiB")
    growth = (large / small) * extra_small + SLACK_MIB
    assert extra_large < growth, (
        f"extra memory grew faster than N: {extra_small:.1f} MiB at N={small}, "
        f"{extra_large:.1f} MiB at N={large}")
