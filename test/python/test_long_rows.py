"""f32 rows over 2^24 keys keep their sums accurate (1e-6 relative).

An f32 sum of one term per key stops growing once its terms fall below half an ulp of
it: with 2^24 + 7 keys of weight about 1 and values about 2.5, the row's accumulated
output passes 2^23 (ulp 1) after three million keys, and every later addition rounds.
Summed as written, the output was off by up to ~20% (3.667 for 2^24 equal keys of value
3). The CPU schedules carry the rounding error of the running sums l and O across keys
(AttentionMath::accumulate, Kahan), in the generic loops (head dim 8) and the tiled
schedule (head dim 32), for an online (softmax) and a plain (sigmoid, C = 1)
normalizer. The tiled forward sums a key block's W·V plainly and folds that total into O
with its error (once per block, or where a row's max grows): measured 1e-7 to 2e-7
relative here, and 2.6e-6 with the fold left plain, so the bound checks the fold too. The float64 reference is computed
in chunks of keys.
"""
import math

import pytest
import torch

N_KEYS = 2**24 + 7  # not a multiple of any tile
N_QUERIES = 3
CHUNK = 2**20


def _reference(name, q, k, v):
    """O for each query row in float64, one chunk of keys at a time."""
    q = q.double()
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = [q @ k[j:j + CHUNK].double().T * scale for j in range(0, k.shape[0], CHUNK)]
    if name == "softmax":
        m = torch.stack([s.max(dim=1).values for s in scores]).max(dim=0).values[:, None]
        weights = [torch.exp(s - m) for s in scores]
        denominator = sum(w.sum(dim=1) for w in weights)[:, None]
    else:  # sigmoid, its bias at the initial value -4 and C = 1
        weights = [torch.sigmoid(s - 4.0) for s in scores]
        denominator = 1.0
    numerator = sum(w @ v[j:j + CHUNK].double() for w, j in zip(weights, range(0, k.shape[0], CHUNK)))
    return numerator / denominator


@pytest.mark.parametrize("name,head_dim", [("softmax", 8), ("softmax", 32), ("sigmoid", 32)],
                         ids=["softmax-generic", "softmax-tiled", "sigmoid-tiled"])
def test_f32_rows_over_two_to_the_24_keys(artifacts, attn_mod, name, head_dim):
    kernel = attn_mod.load(artifacts(name))
    g = torch.Generator().manual_seed(0)
    q = torch.randn(N_QUERIES, head_dim, generator=g) * 0.1
    k = torch.randn(N_KEYS, head_dim, generator=g) * 0.1
    v = torch.rand(N_KEYS, head_dim, generator=g) + 2.0
    with torch.no_grad():
        out = kernel(q[None, None], k[None, None], v[None, None])[0, 0]
    expected = _reference(name, q, k, v)
    relative = ((out.double() - expected).abs() / expected.abs()).max().item()
    assert relative < 1e-6, f"{name} d={head_dim}: relative error {relative:.3g} over {N_KEYS} keys"
