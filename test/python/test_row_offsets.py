"""Row offsets C_i = β(b, h, i; θ, T) + Σ_j h (issue 14, part 3) against the eager float64
reference of test/reference/general.py: O, dq, dk, dv, dparams and the learnable tables'
gradients, f32 and f64, generic loops and tiled kernels.

    softmax1          β = 1 (`epsilon 1.0`): the constant's exponent joins the running max
    sinks             gpt-oss sliding window with learnable sinks: β = e^(sinks[h])
    offset_params     online, β = e^(t + 0.1·h) with a learnable param t
    plain_offset      plain, g = h = s², β = t² + 0.5 (no exp anywhere)
    luong_local_post  Luong local-p in the paper's form: g = e^(s - (j - p_i)²/2σ²), h = e^s

and the stabilisation: scores of ±1e4 stay finite with an offset whose exponent is far
below or above them.
"""
import math

import pytest
import torch

import general
from conftest import REPO, kernels_from
from helpers import check_close, seed_of

DTYPES = {"f64": torch.float64, "f32": torch.float32}
SHAPES = {"generic": (2, 3, 13, 19, 8, 5), "tiled": (2, 3, 40, 40, 32, 32)}

SOFTMAX_REGIONS = """
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
"""

OFFSET_PARAMS = """
attn.normalizer @n params(t = 0.5) {""" + SOFTMAX_REGIONS + """
  offset {
  ^bb0(%b: index, %h: index, %i: index, %t: f32):
    %h64 = arith.index_cast %h : index to i64
    %hf = arith.sitofp %h64 : i64 to f32
    %c = arith.constant 0.1 : f32
    %x0 = arith.mulf %hf, %c : f32
    %x = arith.addf %t, %x0 : f32
    %e = math.exp %x : f32
    attn.yield %e : f32
  }
}
attn.kernel @offset_params normalizer(@n)
"""

PLAIN_OFFSET = """
attn.normalizer @n params(t = 0.8) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %g = arith.mulf %s, %s : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %g = arith.mulf %s, %s : f32
    attn.yield %g : f32
  }
  offset {
  ^bb0(%b: index, %h: index, %i: index, %t: f32):
    %tt = arith.mulf %t, %t : f32
    %half = arith.constant 0.5 : f32
    %beta = arith.addf %tt, %half : f32
    attn.yield %beta : f32
  }
}
attn.kernel @plain_offset normalizer(@n)
"""

SOURCES = {
    "softmax1": REPO / "examples" / "normalizers" / "softmax1.mlir",
    "sinks": REPO / "examples" / "families" / "sliding_window_sinks.mlir",
    "luong_local_post": REPO / "examples" / "families" / "luong_local_post.mlir",
    "offset_params": OFFSET_PARAMS,
    "plain_offset": PLAIN_OFFSET,
}


compiled = kernels_from(SOURCES.__getitem__)


def scaled_dot(q, k, ix):
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])


def with_offset(beta, g, h, score=scaled_dot, keep=None):
    """ref(q, k, v, params, *tables): O with C_i = β_i + Σ_j h. beta, g, h take (params,
    *tables) and return functions of the index grids ix (g, h: and of s); β broadcasts to
    [B, H, Nq, 1]."""
    def ref(q, k, v, *rest):
        B, H, Nq, Nk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
        ix = general.indices(B, H, Nq, Nk)
        kept = torch.ones(B, H, Nq, Nk, dtype=torch.bool)
        if keep is not None:
            kept = kept & keep(ix)
        zero = torch.zeros((), dtype=q.dtype)
        s = torch.where(kept, score(q, k, ix), zero)
        weights = torch.where(kept, g(*rest)(s, ix), zero)
        C = torch.where(kept, h(*rest)(s, ix), zero).sum(-1, keepdim=True) + beta(*rest)(ix)
        O = (weights @ v) / C
        return torch.where(kept.any(-1, keepdim=True), O, zero)
    return ref


def case(name, gen, H, Nq):
    """(params [P] float64, tables {name: tensor}, reference(q, k, v, params, *tables))."""
    exp = torch.exp
    one = torch.ones((), dtype=torch.float64)
    softmax = lambda *rest: lambda s, ix: exp(s)
    if name == "softmax1":
        return torch.zeros(0, dtype=torch.float64), {}, with_offset(
            lambda p: lambda ix: one, softmax, softmax)
    if name == "sinks":
        sinks = torch.randn(H, generator=gen, dtype=torch.float64)
        keep = lambda ix: (ix.j <= ix.i) & (ix.i - ix.j < 16)
        return torch.zeros(0, dtype=torch.float64), {"sinks": sinks}, with_offset(
            lambda p, sinks: lambda ix: exp(sinks)[ix.h], softmax, softmax, keep=keep)
    if name == "offset_params":
        return torch.tensor([0.3], dtype=torch.float64), {}, with_offset(
            lambda p: lambda ix: exp(p[0] + 0.1 * ix.h.to(p.dtype)), softmax, softmax)
    if name == "plain_offset":
        square = lambda p: lambda s, ix: s * s
        return torch.tensor([0.7], dtype=torch.float64), {}, with_offset(
            lambda p: lambda ix: p[0] * p[0] + 0.5, square, square)
    if name == "luong_local_post":
        centre = torch.rand(2, H, Nq, generator=gen, dtype=torch.float64) * 20 - 1
        window = lambda params, p: lambda s, ix: exp(
            s - (ix.j.to(s.dtype) - p[ix.b, ix.h, ix.i]) ** 2 / (2 * params[0] ** 2))
        return torch.tensor([1.7], dtype=torch.float64), {"p": centre}, with_offset(
            lambda params, p: lambda ix: 0.0 * one, window, softmax,
            score=lambda q, k, ix: q @ k.transpose(-1, -2))
    raise KeyError(name)


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("name", list(SOURCES))
def test_row_offset_matches_reference(compiled, name, shape, dt):
    kernel, dtype = compiled(name), DTYPES[dt]
    B, H, Nq, Nk, d, dv = SHAPES[shape]
    gen = torch.Generator().manual_seed(seed_of("offsets", name, shape))
    scale = 0.3 if name == "luong_local_post" else 1.0
    q, k = (scale * torch.randn(B, H, n, d, generator=gen, dtype=torch.float64) for n in (Nq, Nk))
    v = torch.randn(B, H, Nk, dv, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, dv, generator=gen, dtype=torch.float64)
    params, tables, ref = case(name, gen, H, Nq)

    leaves = [t.to(dtype).clone().requires_grad_() for t in (q, k, v)]
    p = params.to(dtype).clone().requires_grad_(params.numel() > 0)
    given = {n: t.to(dtype).clone().requires_grad_() for n, t in tables.items()}
    O = kernel(*leaves, p, False, None, inputs=given)
    wanted = leaves + ([p] if params.numel() else []) + list(given.values())
    grads = list(torch.autograd.grad(O, wanted, grad_outputs=dout.to(dtype)))
    got = {"O": O.detach(), "dq": grads.pop(0), "dk": grads.pop(0), "dv": grads.pop(0)}
    if params.numel():
        got["dparams"] = grads.pop(0)
    got.update({f"d{n}": grads.pop(0) for n in tables})

    want = general.attention_and_grads(ref, q, k, v, dout, [params, *tables.values()])
    if params.numel():
        want["dparams"] = want["d0"]
    for index, n in enumerate(tables, start=1):
        want[f"d{n}"] = want[f"d{index}"]
    check_close(got, want, dtype, context=f"{name} {shape} {dt}", names=list(got))


@pytest.mark.parametrize("dt", list(DTYPES))
def test_offsets_stay_finite_for_extreme_scores(compiled, dt):
    """softmax1 with every score ≈ -1e4 (far below the offset's exponent 0: C ≈ 1, O ≈ 0)
    and ≈ +1e4 (far above: the 1 vanishes, O is the softmax's); sinks with sink logits of
    ±1e4. Online stabilisation with β's exponent in the running max keeps all finite."""
    dtype = DTYPES[dt]
    q = torch.full((1, 2, 4, 8), 1.0, dtype=dtype)
    k = torch.full((1, 2, 6, 8), 1.0, dtype=dtype) * (1e4 / math.sqrt(8))
    v = torch.randn(1, 2, 6, 8, dtype=dtype)
    softmax1 = compiled("softmax1")
    low = softmax1(-q, k, v, None)               # s = -1e4
    high = softmax1(q, k, v, None)               # s = +1e4
    assert torch.isfinite(low).all() and low.abs().max() == 0
    assert torch.allclose(high, v.mean(2, keepdim=True).expand_as(high), atol=1e-5)
    sinks = compiled("sinks")
    for logit, expect_zero in ((1e4, True), (-1e4, False)):
        sink = torch.full((2,), logit, dtype=dtype, requires_grad=True)
        out = sinks(q, k / 1e4, v, None, inputs={"sinks": sink})
        out.sum().backward()
        assert torch.isfinite(out).all() and torch.isfinite(sink.grad).all()
        assert (out.abs().max() < 1e-6) == expect_zero


@pytest.mark.parametrize("dt", list(DTYPES))
def test_infinite_sinks_follow_ieee_arithmetic(compiled, dt):
    """A non-finite tensor input is computed with, not refused (docs/language.md, Non-finite
    values): a sink logit of -inf is β = e^-inf = 0, no sink (the sliding window's
    softmax); one of +inf is β = ∞ and its head's rows are ∞/∞ = NaN, as torch.softmax
    of a row holding +inf (gpt-oss's eager sinks) gives; the other head is untouched."""
    dtype = DTYPES[dt]
    gen = torch.Generator().manual_seed(39)
    q, k, v = (torch.randn(1, 2, 6, 8, generator=gen, dtype=dtype) for _ in range(3))
    sinks = compiled("sinks")
    finite = torch.zeros(2, dtype=dtype)
    base = sinks(q, k, v, None, inputs={"sinks": finite})
    none = sinks(q, k, v, None, inputs={"sinks": torch.tensor([-math.inf, 0.0], dtype=dtype)})
    s = (q @ k.transpose(-1, -2)) / math.sqrt(8)
    i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    window = torch.softmax(s[:, 0].masked_fill(~((j <= i) & (i - 16 < j)), -math.inf), -1)
    torch.testing.assert_close(none[:, 0], window @ v[:, 0])
    torch.testing.assert_close(none[:, 1], base[:, 1])
    full = sinks(q, k, v, None, inputs={"sinks": torch.tensor([math.inf, 0.0], dtype=dtype)})
    assert torch.isnan(full[:, 0]).all()
    torch.testing.assert_close(full[:, 1], base[:, 1])


def test_front_end_offset_and_tensor_input(compiled, attn_mod):
    """The sinks kernel written in Python (attn.normalizer(offset=...), attn.tensor_input)
    computes what sliding_window_sinks.mlir does, gradients included."""
    from attn import exp

    sinks = attn_mod.tensor_input("sinks", (None,), learnable=True)
    normalizer = attn_mod.normalizer(numerator=lambda s: exp(s), denominator=lambda s: exp(s),
                                     offset=lambda h: exp(sinks[h]), name="softmax_sinks")
    window = attn_mod.mask(lambda i, j: (j <= i) & (j + 16 > i), name="window")
    traced = attn_mod.compile(attn_mod.kernel(normalizer, mask=window))
    written = compiled("sinks")
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 3, 21, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    logits = torch.randn(3, generator=gen, dtype=torch.float64)
    results = []
    for kernel in (traced, written):
        leaf = logits.clone().requires_grad_()
        out = kernel(q, k, v, None, inputs={"sinks": leaf})
        out.sum().backward()
        results.append((out.detach(), leaf.grad))
    assert torch.allclose(results[0][0], results[1][0], rtol=1e-12, atol=1e-12)
    assert torch.allclose(results[0][1], results[1][1], rtol=1e-12, atol=1e-12)
