"""Sanity of the eager reference itself (needs no build): it agrees with independent
formulations -- torch.softmax attention, the unstabilised formulas, and DESIGN.md's
hand-written backward formulas."""
import math

import pytest
import torch

import reference as ref
from conftest import NORMALIZER_NAMES
from helpers import case_params, make_inputs, seed_of

MASKS = [(False, False), (True, False), (False, True), (True, True)]


def _grads(fn, q, k, v, p, dout):
    ins = [t.detach().clone().requires_grad_(True) for t in (q, k, v, p)]
    O = fn(*ins)
    gr = torch.autograd.grad(O, ins, dout, allow_unused=True)
    return [O.detach()] + [torch.zeros_like(x) if g is None else g for x, g in zip(ins, gr)]


@pytest.mark.parametrize("causal,pad", MASKS)
def test_softmax_matches_torch_softmax(causal, pad):
    q, k, v, dout, lens = make_inputs("softmax", 2, 2, 9, 12, 5, 3, seed_of("sm"), pad)
    keep = ref.keep_mask(2, 9, 12, causal, lens)

    def torch_sm(q, k, v, p):
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        s = s.masked_fill(~keep, -math.inf)
        return torch.softmax(s, -1) @ v

    p = torch.zeros(0, dtype=torch.float64)
    a = _grads(lambda q, k, v, p: ref.attention("softmax", q, k, v, p, causal, lens),
               q, k, v, p, dout)
    b = _grads(torch_sm, q, k, v, p, dout)
    for x, y in zip(a, b):
        assert torch.allclose(x, y, atol=1e-12, rtol=0)


def test_multimax_at_unit_temperatures_is_softmax():
    q, k, v, dout, _ = make_inputs("multimax", 1, 2, 7, 7, 8, 8, seed_of("mm1"))
    p = torch.tensor(ref.NORMALIZERS["multimax"].param_defaults, dtype=torch.float64)
    a = ref.attention("multimax", q, k, v, p, True)
    b = ref.attention("softmax", q, k, v, None, True)
    assert torch.allclose(a, b, atol=1e-14, rtol=0)


def test_multimax_test_params_cross_every_kink():
    q, k, v, _, _ = make_inputs("multimax", 2, 3, 17, 17, 16, 16, seed_of("kinks"))
    s = ref.scaled_dot(q, k)
    tb1, td1, b1, d1, tb2, td2, b2, d2 = case_params("multimax").tolist()
    for kink in (b1, d1, b2, d2):
        assert (s < kink).any() and (s > kink).any()


@pytest.mark.parametrize("name", ["tanhmax", "sigsoftmax", "multimax"])
def test_stabilised_equals_plain_formula(name):
    """At moderate scores the shifted computation equals the literal formula."""
    q, k, v, _, _ = make_inputs(name, 1, 2, 6, 8, 4, 4, seed_of("plain", name))
    p = case_params(name)
    s = ref.scaled_dot(q, k)
    nz = ref.NORMALIZERS[name]
    g = nz.g(s, p, torch.zeros(()))
    h = nz.h(s, p, torch.zeros(()))
    literal = (g @ v) / h.sum(-1, keepdim=True)
    assert torch.allclose(ref.attention(name, q, k, v, p), literal, atol=1e-13, rtol=0)


def test_tanhmax_literal():
    q, k, v, _, _ = make_inputs("tanhmax", 1, 1, 5, 6, 4, 4, seed_of("tm"))
    s = ref.scaled_dot(q, k)
    literal = ((torch.exp(s) - torch.exp(-s)) @ v) / (torch.exp(s) + torch.exp(-s)).sum(-1, True)
    assert torch.allclose(ref.attention("tanhmax", q, k, v), literal, atol=1e-13, rtol=0)


@pytest.mark.parametrize("name", ["softmax", "tanhmax", "multimax", "sigsoftmax"])
def test_reference_large_scores_finite(name):
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, 9, 16, generator=gen, dtype=torch.float64) * 1e4
    k = torch.randn(1, 1, 9, 16, generator=gen, dtype=torch.float64)
    v = torch.randn(1, 1, 9, 4, generator=gen, dtype=torch.float64)
    out = ref.attention_and_grads(name, q, k, v, case_params(name), torch.ones(1, 1, 9, 4),
                                  True)
    for n, t in out.items():
        assert torch.isfinite(t).all(), n


@pytest.mark.parametrize("causal,pad", MASKS)
@pytest.mark.parametrize("name", NORMALIZER_NAMES)
def test_autograd_reference_matches_design_backward_formulas(name, causal, pad):
    q, k, v, dout, lens = make_inputs(name, 2, 2, 7, 9, 5, 3, seed_of("bwd", name), pad)
    if pad:
        lens[1] = 0                                      # and a fully masked batch
    p = case_params(name)
    a = ref.attention_and_grads(name, q, k, v, p, dout, causal, lens)
    b = ref.design_backward(name, q, k, v, p, dout, causal, lens)
    for n in a:
        assert torch.allclose(a[n], b[n], atol=1e-11, rtol=0), (n, (a[n] - b[n]).abs().max())


def test_fully_masked_rows_reference():
    for name in NORMALIZER_NAMES:
        q, k, v, dout, _ = make_inputs(name, 2, 1, 4, 4, 8, 8, seed_of("fm", name))
        lens = torch.tensor([0, 3])
        out = ref.attention_and_grads(name, q, k, v, case_params(name), dout, True, lens)
        for n in ["O", "dq", "dk", "dv"]:
            assert (out[n][0] == 0).all() and not torch.isnan(out[n]).any(), (name, n)
        assert torch.isfinite(out["dparams"]).all()


@pytest.mark.parametrize("name", ["softmax", "tanhmax", "multimax", "sigsoftmax"])
def test_design_backward_stabilised_at_large_scores(name):
    gen = torch.Generator().manual_seed(1)
    q = torch.randint(-8, 9, (1, 2, 9, 16), generator=gen).double() * 512
    k = torch.randint(-8, 9, (1, 2, 9, 16), generator=gen).double()
    v = torch.randn(1, 2, 9, 4, generator=gen, dtype=torch.float64)
    dout = torch.randn(1, 2, 9, 4, generator=gen, dtype=torch.float64)
    p = case_params(name)
    a = ref.attention_and_grads(name, q, k, v, p, dout, True)
    b = ref.design_backward(name, q, k, v, p, dout, True)
    t = ref.design_backward(name, q, k, v, p, dout, True, absolute=True)
    for n in a:
        assert torch.isfinite(b[n]).all() and torch.isfinite(t[n]).all()
        scale = max(1.0, t[n].abs().max().item()) if t[n].numel() else 1.0
        assert (a[n] - b[n]).abs().max().item() <= 1e-13 * scale if a[n].numel() else True, n
