"""TanhMax, sigsoftmax, expressive, sigmoid, sparsemax and 1.5-entmax written with the Python front-end
(examples/frontend/normalizers.py) are the kernels of their IR files: the same IR in
attn-opt's printed form once the short forms are written out (tanhmax.mlir has a shared
region), the same manifest, and bit-identical outputs and gradients
(torch.equal) in float32 and float64."""
import importlib.util

import pytest
import torch

import attn
from conftest import EXAMPLES, REPO

_spec = importlib.util.spec_from_file_location("frontend_normalizers",
                                               REPO / "examples" / "frontend" / "normalizers.py")
frontend_normalizers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(frontend_normalizers)

NAMES = ["tanhmax", "sigsoftmax", "expressive", "sigmoid", "sparsemax", "entmax15"]


@pytest.fixture(scope="module")
def compiled(attn_mod):
    """name -> (kernel traced from Python, kernel of the .mlir file), compiled once."""
    return {name: (frontend_normalizers.KERNELS[name].compile(),
                   attn.compile(str(EXAMPLES / f"{name}.mlir"))) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_same_ir_as_the_file(name, attn_mod):
    traced = frontend_normalizers.KERNELS[name]
    expand = "--attn-expand-shared-regions"
    assert attn.opt(traced, expand) == attn.opt(str(EXAMPLES / f"{name}.mlir"), expand)


@pytest.mark.parametrize("name", NAMES)
def test_same_manifest(name, compiled):
    traced, written = compiled[name]
    assert traced.path != written.path
    assert traced.manifest_text == written.manifest_text


def _run(kernel, q, k, v, params, dout, is_causal, key_lengths):
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v, params)]
    out = kernel(*leaves[:3], leaves[3], is_causal=is_causal, key_lengths=key_lengths)
    return [out.detach(), *torch.autograd.grad(out, leaves, dout)]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("d,is_causal,padded", [(64, False, False), (24, True, True)],
                         ids=["d64", "d24-causal-padded"])
def test_bit_identical_forward_and_backward(name, dtype, d, is_causal, padded, compiled):
    traced, written = compiled[name]
    g = torch.Generator().manual_seed(7)
    B, H, Nq, Nk = 2, 3, 37, 41
    scale = 0.4 if name == "expressive" else 1.0   # (q·k)² stays O(1)
    q, k = (scale * torch.randn(B, H, n, d, generator=g, dtype=dtype) for n in (Nq, Nk))
    v = torch.randn(B, H, Nk, d, generator=g, dtype=dtype)
    dout = torch.randn(B, H, Nq, d, generator=g, dtype=dtype)
    params = written.initial_params(dtype) + 0.25   # away from the initial values
    key_lengths = torch.tensor([Nk, Nk - 9]) if padded else None
    got = _run(traced, q, k, v, params, dout, is_causal, key_lengths)
    want = _run(written, q, k, v, params, dout, is_causal, key_lengths)
    for label, a, b in zip(["out", "dq", "dk", "dv", "dparams"], got, want):
        if b.numel():   # (a normalizer without params has an empty dparams)
            assert torch.isfinite(b).all() and b.abs().sum() > 0, f"{name} {label} is degenerate"
        assert torch.equal(a, b), f"{name} {label}: max difference {(a - b).abs().max().item()}"
