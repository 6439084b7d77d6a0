"""Kernelised (linear) attention at N = 65536, d = 64, float32, B = H = 1: forward +
backward on the CPU in memory linear in N. Beyond the inputs only O(N·d) tensors
(O, row statistics, dq, dk, dv) and the kernels' O(d² + N) scratch may appear: an
N×N float32 matrix would be 16 GiB. Measured as in test_memory.py (fresh subprocess,
peak RSS after warm-up), at N/4 and N: the extra memory must grow at most linearly."""
import pytest

from test_memory import extra_peak_mib

D = 64
BYTES_PER_ROW = 4 * D * 4          # float32 O, dq, dk, dv per row
SLACK_MIB = 48                     # allocator, thread pool, autograd bookkeeping


def _extra_mib(path, tmp_path, n, causal):
    extra, m = extra_peak_mib(path, tmp_path, n, D, causal)
    print(f"\nN={n} d={D} f32 linear {'causal' if causal else 'full'} fwd+bwd: extra peak RSS "
          f"{extra:.1f} MiB over inputs ({m['inputs'] / 2**20:.0f} MiB), "
          f"{m['secs']:.2f} s on {m['threads']} thread(s)")
    return extra


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
