"""examples/models/ldn.py: the LDN diffusion layer on the compiled kernel matches the
eager float64 formula h + W h − (W 1) h (forward and the gradients of h, Δt, σ), and
the tiny model trains (loss falls, Δt and σ move)."""
import importlib.util

import pytest
import torch

import reference as ref
from conftest import REPO


@pytest.fixture(scope="module")
def ldn(attn_mod):
    spec = importlib.util.spec_from_file_location("ldn_model", REPO / "examples" / "models" / "ldn.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def eager_diffusion(h, dt, sigma, lens=None):
    """h + Σ_j w_ij h_j − (Σ_j w_ij) h_i with w from the float64 reference kernel."""
    B, N, D = h.shape
    keep = ref.keep_mask(B, N, N, True, lens)[:, 0]
    i = torch.arange(N, dtype=h.dtype).view(-1, 1)
    d = i - i.view(1, -1)
    w = dt * torch.exp(-(d * d) / (2 * sigma * sigma)) * keep
    return h + torch.matmul(w, h) - w.sum(-1, keepdim=True) * h


def test_layer_matches_eager_formula(ldn):
    layer = ldn.DiffusionLayer().double()
    with torch.no_grad():   # exact float64 values (the constructor rounds to float32)
        layer.dt.fill_(0.3)
        layer.sigma.fill_(1.7)
    gen = torch.Generator().manual_seed(3)
    h = torch.randn(2, 37, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    lens = torch.tensor([37, 20])
    gout = torch.randn(2, 37, 5, generator=gen, dtype=torch.float64)
    out = layer(h, key_lengths=lens)
    grads = torch.autograd.grad(out, [h, layer.dt, layer.sigma], gout)

    h2 = h.detach().clone().requires_grad_(True)
    dt = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    sigma = torch.tensor(1.7, dtype=torch.float64, requires_grad=True)
    want = eager_diffusion(h2, dt, sigma, lens)
    want_grads = torch.autograd.grad(want, [h2, dt, sigma], gout)
    assert (out - want).abs().max().item() <= 1e-9
    for name, got, exp in zip(["dh", "d dt", "d sigma"], grads, want_grads):
        err = (got.to(torch.float64) - exp).abs().max().item()
        assert err <= 1e-9 * max(1.0, exp.abs().max().item()), f"{name}: error {err:.2e}"


def test_tiny_model_trains(ldn):
    model, losses = ldn.train(steps=12, n=24, log=None)
    assert losses[-1] < 0.5 * losses[0], losses
    for layer in model.diffusion:
        assert layer.dt.item() != pytest.approx(0.1, abs=1e-4)
        assert layer.sigma.item() != pytest.approx(2.0, abs=1e-4)
