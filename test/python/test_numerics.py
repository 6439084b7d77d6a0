"""Compiled kernels vs the eager float64 reference (test/reference/reference.py).

Every example normalizer, with/without causal mask and padding (key_lengths), odd shapes
(Nq != Nk, N = 1, d = 3, dv != d, N not a multiple of any tile, the specialised head dims
32/64/128, N = 1000), float64 and float32: O, dq, dk, dv and dparams.

  float64: max abs error <= 1e-9
  float32: max abs error <= 2e-4 * max abs of the reference tensor, where two degenerate
           cases get the allowance they need (see helpers.py): quantities that cancel to
           ~0 are measured against their term scale (1e-5 of it), and scores within f32
           rounding of a kink may take the other branch exactly as eager f32 PyTorch does
           (2x the eager float32 error is accepted).
Large scores (|s| ~ 1e4) and fully masked rows have their own tests below.
"""
import math

import pytest
import torch

import reference as ref
from conftest import NORMALIZER_NAMES
from helpers import (case_params, check_close, compiled_grads, make_inputs,
                     reference_grads, seed_of, term_scale, eager_f32)

DTYPES = {"f64": torch.float64, "f32": torch.float32}

# (B, H, Nq, Nk, d, dv)
SHAPES = {
    "sq17": (2, 3, 17, 17, 16, 16),      # square, N not a multiple of a tile
    "nq<nk": (1, 2, 5, 9, 8, 8),
    "nq>nk": (2, 1, 13, 6, 8, 8),        # causal: rows i >= Nk see every key
    "n1d3": (1, 1, 1, 1, 3, 3),          # N = 1, d = 3
    "nq1": (2, 1, 1, 9, 8, 8),           # one query
    "nk1": (1, 2, 6, 1, 4, 4),           # one key
    "d3dv5": (2, 2, 7, 11, 3, 5),        # d = 3, dv != d
    "tiles": (1, 2, 70, 130, 24, 12),    # several tiles in both directions, dv < d
    # the compiler specialises head dims 32/64/128: hit those paths too
    "d32dv16": (2, 1, 19, 70, 32, 16),
    "d64": (1, 2, 33, 47, 64, 64),
    # the tiled backward's row blocks (32 rows f32, 16 f64) of 3 register tiles, and
    # a block of one
    "d64nq20": (2, 1, 20, 37, 64, 64),
    "d128dv64": (1, 1, 65, 66, 128, 64),
}
BIG = (1, 1, 1000, 1000, 16, 16)
BIG_D64 = (1, 1, 1000, 1000, 64, 64)

MASKS = {"none": (False, False), "causal": (True, False), "pad": (False, True),
         "causal+pad": (True, True)}


def _run_case(artifacts, name, shape, mask, dt):
    B, H, Nq, Nk, d, dv = shape
    is_causal, padding = MASKS[mask]
    dtype = DTYPES[dt]
    q, k, v, dout, lens = make_inputs(name, B, H, Nq, Nk, d, dv,
                                      seed_of(name, shape, mask), padding, dtype)
    params = case_params(name, dtype)
    got = compiled_grads(artifacts(name), q, k, v, params, dout, is_causal, lens)
    want = reference_grads(name, q, k, v, params, dout, is_causal, lens)
    for n, t in got.items():
        assert t.dtype == dtype, f"{n} came back as {t.dtype}, expected {dtype}"
    terms = eager = None
    if dtype == torch.float32:
        terms = term_scale(name, q, k, v, params, dout, is_causal, lens)
        eager = eager_f32(name, q, k, v, params, dout, is_causal, lens)
    check_close(got, want, dtype, terms=terms, eager=eager,
                context=f"{name} shape={shape} mask={mask} {dt}", log_key=(name, dt))


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("name", NORMALIZER_NAMES)
def test_matches_reference(artifacts, name, shape, mask, dt):
    _run_case(artifacts, name, SHAPES[shape], mask, dt)


@pytest.mark.parametrize("name", NORMALIZER_NAMES)
def test_matches_reference_n1000_f64(artifacts, name):
    _run_case(artifacts, name, BIG, "causal+pad", "f64")


@pytest.mark.parametrize("name", NORMALIZER_NAMES)
def test_matches_reference_n1000_f32(artifacts, name):
    _run_case(artifacts, name, BIG_D64, "none", "f32")


@pytest.mark.parametrize("d", [8, 64])
@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("name", ["softmax", "multimax", "linear"])
def test_strided_inputs(artifacts, name, dt, d):
    """q, k, v as non-contiguous views ([B, N, H, d] transposed, as a model produces
    them from one projection), dout non-contiguous too."""
    dtype = DTYPES[dt]
    B, H, N = 2, 3, 10
    q, k, v, dout, lens = make_inputs(name, B, H, N, N, d, d, seed_of("strided", name),
                                      True, dtype)
    packed = torch.cat([t.transpose(1, 2) for t in (q, k, v)], dim=-1)   # [B, N, H, 3d]
    qs, ks, vs = (packed[..., i * d:(i + 1) * d].transpose(1, 2) for i in range(3))
    assert not qs.is_contiguous()
    params = case_params(name, dtype)
    douts = dout.transpose(2, 3).contiguous().transpose(2, 3)
    got = compiled_grads(artifacts(name), qs, ks, vs, params, douts, True, lens)
    want = reference_grads(name, q, k, v, params, dout, True, lens)
    terms = term_scale(name, q, k, v, params, dout, True, lens)
    check_close(got, want, dtype, terms=terms, context=f"{name} strided {dt}",
                log_key=(name, dt))


@pytest.mark.parametrize("name", ["softmax", "sigmoid"])
def test_non_unit_last_stride(artifacts, name):
    """Every other element of a wider tensor (last-dim stride 2) and an expanded
    (stride-0) k: same result as contiguous inputs."""
    q, k, v, dout, lens = make_inputs(name, 2, 2, 9, 11, 16, 8, seed_of("stride2", name), True)
    wide = torch.stack([q, torch.full_like(q, float("nan"))], dim=-1).flatten(-2)
    qs = wide[..., ::2]
    assert qs.stride(-1) == 2 and torch.equal(qs, q)
    kx = k[:, :1].expand(2, 2, 11, 16)                       # heads share one k
    params = case_params(name)
    got = compiled_grads(artifacts(name), qs, kx, v, params, dout, True, lens)
    want = reference_grads(name, q, kx.contiguous(), v, params, dout, True, lens)
    check_close(got, want, torch.float64, context=f"{name} stride-2 q, expanded k")


def test_grad_only_for_some_inputs(artifacts):
    """Only v requires grad, then only q: the other inputs get no gradient."""
    q, k, v, dout, _ = make_inputs("tanhmax", 1, 2, 5, 7, 4, 4, seed_of("partial"))
    path = artifacts("tanhmax")
    p = case_params("tanhmax")
    want = reference_grads("tanhmax", q, k, v, p, dout)
    vv = v.clone().requires_grad_(True)
    torch.ops.attn.attention(path, q, k, vv, p, False, None).backward(dout)
    assert (vv.grad - want["dv"]).abs().max() <= 1e-9
    qq = q.clone().requires_grad_(True)
    torch.ops.attn.attention(path, qq, k, v, p, False, None).backward(dout)
    assert (qq.grad - want["dq"]).abs().max() <= 1e-9


# ------------------------------------------------------------------ large scores
STABILISED = ["softmax", "tanhmax", "multimax", "sigsoftmax"]


def _large_score_inputs(B, H, N, d, dv, seed, dtype):
    """q·k/sqrt(d) ~ ±1e4, exactly representable in float32.

    Entries are small integers (q additionally times 2^9), d = 16 so the scale 1/4 is a
    power of two: every score is an exact multiple of 128 in both float32 and float64,
    and ties are exact ties -- the comparison measures the stabilisation, not the
    rounding of s."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(-8, 9, (B, H, N, d), generator=gen).to(torch.float64) * 512.0
    k = torch.randint(-8, 9, (B, H, N, d), generator=gen).to(torch.float64)
    v = torch.randn(B, H, N, dv, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, N, dv, generator=gen, dtype=torch.float64)
    return [t.to(dtype) for t in (q, k, v, dout)]


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("name", STABILISED)
def test_large_scores_do_not_overflow(artifacts, name, is_causal, dt):
    dtype = DTYPES[dt]
    B, H, N, d, dv = 2, 2, 37, 16, 8
    q, k, v, dout = _large_score_inputs(B, H, N, d, dv, seed_of("large", name), dtype)
    s = ref.scaled_dot(q.double(), k.double())
    assert s.abs().max() > 5e3, "test inputs are not large enough"
    params = case_params(name, dtype)
    got = compiled_grads(artifacts(name), q, k, v, params, dout, is_causal)
    for n, t in got.items():
        assert torch.isfinite(t).all(), f"{name}: {n} has inf/NaN at |s|~1e4"
    # the reference itself is computed stably (shifted by the row max of the exp argument)
    want = reference_grads(name, q, k, v, params, dout, is_causal)
    for n, t in want.items():
        assert torch.isfinite(t).all(), f"reference {n} not finite"
    # Weights are ~one-hot, so the gradients are sums of huge terms that cancel
    # (multimax: ∂σ/∂θ ~ s² ~ 1e8 times w(dO·v - D) ~ 0): errors are measured against
    # the term scale (helpers.TOL_F32_TERMS / TOL_F64_TERMS).
    terms = term_scale(name, q, k, v, params, dout, is_causal)
    check_close(got, want, dtype, terms=terms, context=f"{name} large scores {dt}")


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("name", NORMALIZER_NAMES)
def test_one_very_negative_score(artifacts, name, dt):
    """Minimal case: one query, keys with q·k = +5 and a very negative q·k (-100 in
    float32, where e^100 overflows; -800 in float64). For the exp-based normalizers
    and sigmoid the far key just gets weight ~0 and gradient ~0: never NaN."""
    dtype = DTYPES[dt]
    neg = -100.0 if dtype == torch.float32 else -800.0
    q = torch.ones(1, 1, 1, 1, dtype=dtype)
    k = torch.tensor([5.0, neg], dtype=dtype).view(1, 1, 2, 1)       # s = q·k/sqrt(1)
    v = torch.tensor([1.0, 2.0], dtype=dtype).view(1, 1, 2, 1)
    dout = torch.ones(1, 1, 1, 1, dtype=dtype)
    params = case_params(name, dtype)
    got = compiled_grads(artifacts(name), q, k, v, params, dout)
    for n, t in got.items():
        assert torch.isfinite(t).all(), f"{name} {dt}: {n} = {t.flatten().tolist()} (scores [5, {neg}])"
    want = reference_grads(name, q, k, v, params, dout)
    terms = term_scale(name, q, k, v, params, dout)
    check_close(got, want, dtype, terms=terms, context=f"{name} scores [5, {neg}] {dt}")


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("name", ["multimax", "relu"])
def test_scores_exactly_at_kinks(artifacts, name, dt):
    """Scores exactly at the kinks of max(., 0) (multimax: s = b1, d1, b2, d2; relu:
    s = 0) use the subgradient 0 (DESIGN.md), as the reference does."""
    dtype = DTYPES[dt]
    params = case_params(name, dtype)
    kinks = params[[2, 3, 6, 7]].tolist() if name == "multimax" else [0.0]
    svals = kinks + [0.25, -1.75, 1.5]                    # a few scores off the kinks
    n = len(svals)
    q = torch.ones(1, 1, 2, 1, dtype=torch.float64)         # d = 1: s = q·k exactly
    q[0, 0, 1, 0] = 0.5
    k = torch.tensor(svals, dtype=torch.float64).view(1, 1, n, 1)
    gen = torch.Generator().manual_seed(seed_of("kinks", name))
    v = torch.randn(1, 1, n, 3, generator=gen, dtype=torch.float64)
    dout = torch.randn(1, 1, 2, 3, generator=gen, dtype=torch.float64)
    q, k, v, dout = (t.to(dtype) for t in (q, k, v, dout))
    got = compiled_grads(artifacts(name), q, k, v, params, dout)
    want = reference_grads(name, q, k, v, params, dout)
    terms = term_scale(name, q, k, v, params, dout)
    check_close(got, want, dtype, terms=terms, context=f"{name} scores at kinks {dt}")


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("position", ["first", "middle", "last"])
@pytest.mark.parametrize("name", ["softmax", "tanhmax"])
def test_nan_score_makes_its_row_nan(artifacts, name, position, dt):
    """A NaN key entry makes every score of that key NaN: each row's O (the tiled
    forward, d = 64, whose running max may skip NaNs) is NaN, never a finite value
    that silently dropped the key; with the key masked out for some rows (causal)
    those rows stay exact."""
    dtype = DTYPES[dt]
    B, H, N, d = 1, 2, 150, 64
    gen = torch.Generator().manual_seed(seed_of("nan", name, position))
    q, k, v = (torch.randn(B, H, N, d, generator=gen, dtype=torch.float64).to(dtype)
               for _ in range(3))
    key = {"first": 0, "middle": 77, "last": N - 1}[position]
    k[:, :, key, 5] = float("nan")
    params = case_params(name, dtype)
    O = torch.ops.attn.attention(artifacts(name), q, k, v, params, True, None)
    assert torch.isnan(O[:, :, key:]).any(dim=-1).all(), f"{name}: rows past key {key} not NaN"
    if key == 0:
        return
    want = reference_grads(name, q[:, :, :key], k[:, :, :key], v[:, :, :key], params,
                           torch.zeros_like(q[:, :, :key]), True)["O"]
    assert torch.isfinite(O[:, :, :key]).all()
    torch.testing.assert_close(O[:, :, :key].double(), want, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------ fully masked rows
@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("name", NORMALIZER_NAMES)
def test_fully_masked_rows_are_zero(artifacts, name, is_causal, dt):
    dtype = DTYPES[dt]
    B, H, Nq, Nk, d, dv = 3, 2, 9, 12, 8, 4
    q, k, v, dout, _ = make_inputs(name, B, H, Nq, Nk, d, dv, seed_of("masked", name),
                                   False, dtype)
    lens = torch.tensor([0, 5, 0], dtype=torch.int64)
    params = case_params(name, dtype)
    got = compiled_grads(artifacts(name), q, k, v, params, dout, is_causal, lens)
    for n, t in got.items():
        assert not torch.isnan(t).any(), f"{name}: NaN in {n} with a fully masked row"
    for n in ["O", "dq", "dk", "dv"]:
        for b in (0, 2):
            assert (got[n][b] == 0).all(), f"{name}: {n}[b={b}] not zero (key_lengths=0)"
    want = reference_grads(name, q, k, v, params, dout, is_causal, lens)
    terms = term_scale(name, q, k, v, params, dout, is_causal, lens)
    check_close(got, want, dtype, terms=terms, context=f"{name} fully masked rows {dt}",
                log_key=(name, dt))


@pytest.mark.parametrize("name", NORMALIZER_NAMES)
def test_all_rows_masked_gives_zero_param_grad(artifacts, name):
    q, k, v, dout, _ = make_inputs(name, 2, 1, 4, 4, 8, 8, seed_of("allmasked", name))
    lens = torch.zeros(2, dtype=torch.int64)
    params = case_params(name)
    got = compiled_grads(artifacts(name), q, k, v, params, dout, True, lens)
    for n, t in got.items():
        assert (t == 0).all(), f"{name}: {n} not zero when every key is masked: {t}"


# --------------------------------------------------------- forward statistics
@pytest.mark.parametrize("name", NORMALIZER_NAMES)
def test_forward_row_statistics(artifacts, name):
    """attention_forward returns (O, row_max, row_sum) with row_sum = C·e^-row_max."""
    B, H, Nq, Nk, d, dv = 2, 2, 11, 13, 8, 8
    q, k, v, _, lens = make_inputs(name, B, H, Nq, Nk, d, dv, seed_of("stats", name), True)
    params = case_params(name)
    O, row_max, row_sum = torch.ops.attn.attention_forward(
        artifacts(name), q, k, v, params, True, lens)
    O_ref, _, _, C_ref = ref.attention_with_stats(name, q, k, v, params, True, lens)
    assert (O - O_ref).abs().max().item() <= 1e-9
    assert row_max.shape == (B, H, Nq) and row_sum.shape == (B, H, Nq)
    C = row_sum * torch.exp(row_max)
    rel = ((C - C_ref).abs() / C_ref.abs()).max().item()
    assert rel <= 1e-9, f"{name}: row_sum·e^row_max != C_i (max rel err {rel:.2e})"


# ------------------------------------------------ parameters and the wrapper
@pytest.mark.parametrize("name", NORMALIZER_NAMES)
def test_manifest_and_initial_params(attn_mod, artifacts, name):
    nz = ref.NORMALIZERS[name]
    path = artifacts(name)
    man = attn_mod.parse_manifest(torch.ops.attn.manifest(path))
    assert man["kernel"] == nz.kernel, man
    kern = attn_mod.load(path)
    assert list(kern.param_names) == nz.param_names
    for dtype in (torch.float32, torch.float64):
        p = kern.initial_params(dtype)
        assert p.dtype == dtype and p.shape == (len(nz.param_defaults),)
        assert torch.allclose(p.double(), torch.tensor(nz.param_defaults, dtype=torch.float64))


@pytest.mark.parametrize("name", NORMALIZER_NAMES)
def test_wrapper_default_params(attn_mod, artifacts, name):
    """kern(q, k, v) with params=None uses the normalizer's initial values."""
    q, k, v, dout, lens = make_inputs(name, 2, 2, 6, 7, 8, 8, seed_of("wrap", name), True)
    kern = attn_mod.load(artifacts(name))
    O = kern(q, k, v, is_causal=True, key_lengths=lens)
    O_ref = ref.attention(name, q, k, v, None, True, lens)
    assert (O - O_ref).abs().max().item() <= 1e-9


def test_params_learnable_multimax(attn_mod, artifacts):
    """A few SGD steps on the multimax parameters through the wrapper change them and
    lower a loss (parameters are really trained)."""
    kern = attn_mod.load(artifacts("multimax"))
    q, k, v, _, _ = make_inputs("multimax", 1, 2, 16, 16, 8, 8, seed_of("learn"))
    target = ref.attention("multimax", q, k, v, case_params("multimax"))
    p = torch.nn.Parameter(kern.initial_params(torch.float64))
    opt = torch.optim.SGD([p], lr=0.02)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = ((kern(q, k, v, params=p) - target) ** 2).sum()
        loss.backward()
        assert p.grad is not None and torch.isfinite(p.grad).all()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses


def test_gradcheck_small(artifacts):
    """torch.autograd.gradcheck on the compiled op itself (float64, tiny shape)."""
    for name in ["tanhmax", "multimax"]:
        q, k, v, _, lens = make_inputs(name, 1, 1, 3, 4, 3, 2, seed_of("gc", name), True)
        p = case_params(name)
        path = artifacts(name)
        ins = [t.clone().requires_grad_(True) for t in (q, k, v, p)]
        assert torch.autograd.gradcheck(
            lambda a, b, c, d: torch.ops.attn.attention(path, a, b, c, d, True, lens),
            ins, eps=1e-6, atol=1e-6)


def test_nan_param_makes_every_row_nan(artifacts):
    """A NaN param value is computed with, not refused (docs/language.md, Non-finite values): every
    score passes through multimax's params, so each one NaN makes every output NaN,
    never a finite value that silently dropped it."""
    q, k, v = (torch.randn(1, 2, 5, 8, generator=torch.Generator().manual_seed(n),
                           dtype=torch.float64) for n in range(3))
    params = case_params("multimax")
    for n in range(len(params)):
        nan = params.clone()
        nan[n] = float("nan")
        O = torch.ops.attn.attention(artifacts("multimax"), q, k, v, nan, False, None)
        assert torch.isnan(O).all(), f"multimax param #{n} NaN: some output is not NaN"
