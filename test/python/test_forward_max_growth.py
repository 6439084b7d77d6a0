"""The tiled forward keeps a key block's weights relative to the row max they were
computed with and runs the block's W·V product once; where a row's max grows past
weights it has stored, those join O first (TiledLoops.cpp). These rows steer where the
max grows: at every tile (scores rising along the keys, as ALiBi's do towards the
diagonal), at a few keys inside a block, or only at the first keys (falling scores),
against a float64 softmax, for the head dims whose key blocks hold several tiles.
"""
import math

import pytest
import torch

N_KEYS = 1000  # several tiles per key block, the last one partial
N_QUERIES = N_KEYS


def _scores_along_keys(pattern):
    j = torch.arange(N_KEYS, dtype=torch.float64)
    if pattern == "rising":
        return j / N_KEYS * 30.0
    if pattern == "steps":  # jumps inside blocks, not at tile edges
        return sum(5.0 * (j >= at) for at in (70, 213, 401, 777)).double()
    return (N_KEYS - j) / N_KEYS * 30.0  # falling


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("pattern", ["rising", "steps", "falling"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_forward_rows_whose_max_grows_inside_key_blocks(artifacts, attn_mod, head_dim, dtype,
                                                        pattern, causal):
    kernel = attn_mod.load(artifacts("softmax"))
    g = torch.Generator().manual_seed(head_dim)
    direction = torch.randn(head_dim, generator=g, dtype=torch.float64)
    direction /= direction.norm()
    # q·k = scale⁻¹ · the pattern's score (plus noise), so s = pattern + noise.
    q = (direction * math.sqrt(head_dim)).expand(N_QUERIES, head_dim).clone()
    q += 0.1 * torch.randn(N_QUERIES, head_dim, generator=g, dtype=torch.float64)
    k = _scores_along_keys(pattern)[:, None] * direction / head_dim * math.sqrt(head_dim)
    k = k + 0.1 * torch.randn(N_KEYS, head_dim, generator=g, dtype=torch.float64)
    v = torch.randn(N_KEYS, head_dim, generator=g, dtype=torch.float64)

    s = q @ k.T / math.sqrt(head_dim)
    if causal:
        s = s.masked_fill(torch.arange(N_KEYS)[None, :] > torch.arange(N_QUERIES)[:, None],
                          float("-inf"))
    expected = torch.softmax(s, dim=-1) @ v

    with torch.no_grad():
        out = kernel(q.to(dtype)[None, None], k.to(dtype)[None, None], v.to(dtype)[None, None],
                     is_causal=causal)[0, 0]
    error = (out.double() - expected).abs().max().item()
    tolerance = 2e-5 if dtype == torch.float32 else 1e-12
    assert error < tolerance, f"{pattern}: max |O - O_ref| = {error:.3g}"
