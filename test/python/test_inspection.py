"""Attention weights for inspection (Kernel.attention_weights / attn::attention_weights):
the N×N weights the compiled kernel applies, against the float64 reference."""
import pytest
import torch

import reference as ref

NAMES = ["softmax", "tanhmax", "multimax", "sigsoftmax", "sigmoid", "relu", "expressive", "linear"]


def _inputs(B=2, H=3, Nq=11, Nk=13, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, Nq, d, generator=g, dtype=torch.float64)
    k = torch.randn(B, H, Nk, d, generator=g, dtype=torch.float64)
    return q, k


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("is_causal", [False, True])
def test_weights_match_reference(attn_mod, artifacts, name, is_causal):
    kernel = attn_mod.load(artifacts(name))
    q, k = _inputs(Nq=13)
    lengths = torch.tensor([13, 6])
    params = kernel.initial_params(torch.float64)
    got = kernel.attention_weights(q, k, params, is_causal, lengths)
    identity = torch.eye(k.shape[2], dtype=torch.float64).expand(2, 3, 13, 13)
    want = ref.attention(name, q, k, identity, params, is_causal, lengths)
    assert got.shape == (2, 3, 13, 13)
    assert (got - want).abs().max().item() <= 1e-12 * max(1.0, want.abs().max().item())
    # masked pairs are exactly 0
    keep = ref.keep_mask(2, 13, 13, is_causal, lengths).expand_as(got)
    assert torch.count_nonzero(got[~keep]) == 0


def test_weights_are_what_the_kernel_applies(attn_mod, artifacts):
    kernel = attn_mod.load(artifacts("tanhmax"))
    q, k = _inputs()
    v = torch.randn(2, 3, 13, 5, dtype=torch.float64)
    weights = kernel.attention_weights(q, k, is_causal=True)
    assert (weights @ v - kernel(q, k, v, is_causal=True)).abs().max().item() < 1e-12
    # TanhMax is bidirectional: some weights are negative (softmax's never are).
    assert (weights < -1e-3).any()
    assert (attn_mod.load(artifacts("softmax")).attention_weights(q, k) >= 0).all()


def test_weights_refuse_large_inputs(attn_mod, artifacts):
    kernel = attn_mod.load(artifacts("softmax"))
    q = torch.zeros(1, 1, 8193, 4)
    with pytest.raises(RuntimeError, match="allowed for inspection"):
        kernel.attention_weights(q, q)
    with pytest.raises(RuntimeError, match=r"q must be a 4-D tensor"):
        kernel.attention_weights(q[0], q)
