"""attn.attention against F.scaled_dot_product_attention with the softmax example: every
supported argument combination (shapes with 0, 1 or 2 batch dims, is_causal, scale,
enable_gqa with equal and grouped heads, Nq != Nk, Ev != E, key_lengths as SDPA's boolean mask),
forward and gradients, float32 and float64; and the errors for what kernels cannot take."""
import itertools
import re

import pytest
import torch
import torch.nn.functional as F

from conftest import EXAMPLES, REPO

TOL = {torch.float64: 1e-12, torch.float32: 2e-5}


@pytest.fixture(scope="module")
def softmax(attn_mod):
    return attn_mod.compile(EXAMPLES / "softmax.mlir")


def _qkv(batch, heads, L, S, E, Ev, dtype, seed, kv_heads=None):
    g = torch.Generator().manual_seed(seed)
    make = lambda heads, *shape: torch.randn(*batch, *heads, *shape, generator=g,
                                             dtype=dtype).requires_grad_()
    kv_heads = heads if kv_heads is None else kv_heads
    return make(heads, L, E), make(kv_heads, S, E), make(kv_heads, S, Ev)


def _grads(out, inputs, seed):
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=out.dtype)
    return torch.autograd.grad(out, inputs, dout)


SHAPES = {"[B,H,L,E]": ((2,), (3,)), "[H,L,E]": ((), (2,)), "[B1,B2,H,L,E]": ((2, 2), (2,)),
          "[L,E]": ((), ())}


# SDPA's enable_gqa needs a head dim, so [L, E] goes without it.
COMBINATIONS = [(shape, causal, scale, gqa) for shape, causal, scale, gqa
                in itertools.product(SHAPES, [False, True], [None, 0.3], [False, True])
                if SHAPES[shape][1] or not gqa]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("shape,is_causal,scale,enable_gqa", COMBINATIONS)
def test_matches_sdpa(attn_mod, softmax, dtype, shape, is_causal, scale, enable_gqa):
    batch, heads = SHAPES[shape]
    q, k, v = _qkv(batch, heads, 5, 7, 8, 6, dtype, seed=len(shape))
    got = attn_mod.attention(q, k, v, softmax, is_causal=is_causal, scale=scale,
                             enable_gqa=enable_gqa)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale,
                                          enable_gqa=enable_gqa)
    assert got.shape == want.shape
    tol = TOL[dtype]
    assert torch.allclose(got, want, rtol=tol, atol=tol)
    for g, w in zip(_grads(got, (q, k, v), 1), _grads(want, (q, k, v), 1)):
        assert torch.allclose(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("heads,kv_heads", [(4, 2), (6, 1)], ids=["gqa", "mqa"])
@pytest.mark.parametrize("is_causal", [False, True])
def test_grouped_query_attention_matches_sdpa(attn_mod, softmax, dtype, heads, kv_heads,
                                              is_causal):
    """enable_gqa=True with fewer key/value heads: O and dq, dk, dv (summed over each
    group) as SDPA's, without copies of key and value."""
    q, k, v = _qkv((2,), (heads,), 9, 7, 8, 6, dtype, seed=heads, kv_heads=(kv_heads,))
    got = attn_mod.attention(q, k, v, softmax, is_causal=is_causal, enable_gqa=True)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=True)
    tol = TOL[dtype]
    assert torch.allclose(got, want, rtol=tol, atol=tol)
    for g, w in zip(_grads(got, (q, k, v), 3), _grads(want, (q, k, v), 3)):
        assert g.shape == w.shape and torch.allclose(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("is_causal", [False, True])
def test_key_lengths_match_sdpa_boolean_mask(attn_mod, softmax, is_causal):
    q, k, v = _qkv((3,), (2,), 6, 6, 8, 8, torch.float64, seed=5)
    lengths = torch.tensor([6, 4, 1])
    keep = torch.arange(6) < lengths[:, None, None, None]   # SDPA: True takes part
    if is_causal:
        keep = keep & torch.ones(6, 6, dtype=torch.bool).tril()
    got = attn_mod.attention(q, k, v, softmax, is_causal=is_causal, key_lengths=lengths)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    for g, w in zip(_grads(got, (q, k, v), 2), _grads(want, (q, k, v), 2)):
        assert torch.allclose(g, w, rtol=1e-12, atol=1e-12)


def test_ir_text_and_params_and_tensor_inputs(attn_mod):
    """kernel may be IR (compiled and cached); params and tensor inputs reach the kernel
    and get gradients; the batch index b counts q's leading batch dims flattened."""
    local = attn_mod.compile(REPO / "examples" / "families" / "luong_local.mlir")
    q, k, v = _qkv((2, 2), (2,), 4, 6, 8, 8, torch.float64, seed=6)
    params = local.initial_params(torch.float64).requires_grad_()
    p = (torch.rand(4, 2, 4, dtype=torch.float64) * 6).requires_grad_()   # [B, H, Nq]
    got = attn_mod.attention(q, k, v, str(REPO / "examples" / "families" / "luong_local.mlir"),
                             params=params, inputs={"p": p})
    flat = lambda t: t.reshape(4, *t.shape[2:])
    want = local(flat(q), flat(k), flat(v), params, inputs={"p": p})
    assert torch.equal(got, want.reshape(got.shape))
    grads = torch.autograd.grad(got.sum(), [params, p])
    assert grads[0].abs().sum() > 0 and grads[1].shape == p.shape


def _raises(pattern, fn, exc=RuntimeError):
    with pytest.raises(exc) as info:
        fn()
    assert re.search(pattern, str(info.value), re.S), str(info.value)


def test_errors_name_what_kernels_cannot_take(attn_mod, softmax):
    q, k, v = _qkv((2,), (2,), 5, 5, 8, 8, torch.float32, seed=7)
    run = lambda **kw: (lambda: attn_mod.attention(q, k, v, softmax, **kw))
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    for mask in (causal, torch.zeros(5, 5)):   # test_masks.py: kernels with the input
        _raises(r"attn_mask .*needs the kernel's attn_mask input, which kernel "
                r"softmax_attention does not have", run(attn_mask=mask), NotImplementedError)
    _raises(r"either attn_mask or is_causal", run(attn_mask=causal, is_causal=True))
    _raises(r"dropout_p=0.1 needs kernel support", run(dropout_p=0.1), NotImplementedError)
    k2, v2 = k[:, :1], v[:, :1]
    _raises(r"2 query heads and 1 key/value heads: the head counts must agree",
            lambda: attn_mod.attention(q, k2, v2, softmax))
    q3 = torch.randn(2, 3, 5, 8)
    _raises(r"q has 3 heads and k and v have 2 \(dim 1\): the query heads must be a multiple "
            r"of the key/value heads",
            lambda: attn_mod.attention(q3, k, v, softmax, enable_gqa=True))
    _raises(r"same number of dims", lambda: attn_mod.attention(q, k[0], v[0], softmax))
    _raises(r"batch dims .* must agree", lambda: attn_mod.attention(q, k[:1], v[:1], softmax))
    _raises(r"key_lengths must have the batch shape \(2,\)",
            run(key_lengths=torch.tensor([[5, 5]])))


@pytest.mark.parametrize("family,what", [("cosine", "contract cosine"),
                                         ("luong_general", "contract bilinear")])
def test_scale_needs_a_dot_contraction(attn_mod, family, what):
    kernel = attn_mod.compile(REPO / "examples" / "families" / f"{family}.mlir")
    q = torch.randn(1, 1, 3, 32)
    _raises(rf"scale=0.5 needs a score that is a constant times q·k, but kernel \w+ has {what}",
            lambda: attn_mod.attention(q, q, q, kernel, scale=0.5))


def test_scale_with_a_feature_map_is_refused(attn_mod):
    linear = attn_mod.compile(EXAMPLES / "linear.mlir")
    q = torch.randn(1, 1, 3, 8)
    _raises(r"has contract dot with a feature map",
            lambda: attn_mod.attention(q, q, q, linear, scale=0.5))


def test_scale_of_a_fixed_scale_kernel(attn_mod):
    """A kernel whose score has its own scale clause: scale= replaces it exactly."""
    ir = (EXAMPLES / "tanhmax.mlir").read_text().replace(
        "attn.kernel @tanhmax_attention normalizer(@tanhmax)",
        "attn.score @s contract scaled_dot scale 0.5\n"
        "attn.kernel @tanhmax_attention normalizer(@tanhmax) score(@s)")
    fixed, default = attn_mod.compile(ir), attn_mod.compile(EXAMPLES / "tanhmax.mlir")
    q, k, v = _qkv((1,), (2,), 4, 4, 16, 16, torch.float64, seed=8)
    assert torch.allclose(attn_mod.attention(q, k, v, fixed, scale=0.25),
                          attn_mod.attention(q, k, v, default), rtol=1e-13, atol=1e-13)
    assert torch.equal(attn_mod.attention(q, k, v, fixed, scale=0.5), fixed(q, k, v))
