"""Tensor inputs that papers define: tables to pass as a kernel's `inputs=`."""

import math

import torch

__all__ = ["alibi_slopes", "CALL_DIMS"]

# The dimensions of a call a tensor input's extent may name (attn.input ... dims(B, H, Nq)):
# q [B, H, Nq, d], k and v [B, Hkv, Nk, d]; the runtime checks them at every call.
CALL_DIMS = ("B", "H", "Hkv", "Nq", "Nk")


def alibi_slopes(heads, dtype=torch.float32, device=None):
    """ALiBi's per-head slopes m_h (Press et al., 2022), a [heads] tensor: for a power of two
    n the geometric sequence 2^(-8/n), 2^(-16/n), ..., 2^(-8); otherwise those of the
    largest power of two n < heads, then every other slope of 2n, as in the paper's code."""
    if heads < 1:
        raise ValueError(f"alibi_slopes: heads must be >= 1, got {heads}")

    def geometric(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (k + 1) for k in range(n)]

    n = 2 ** math.floor(math.log2(heads))
    slopes = geometric(n) + geometric(2 * n)[0::2][:heads - n]
    return torch.tensor(slopes, dtype=dtype, device=device)
