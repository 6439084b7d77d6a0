"""The attention families of examples/families/ vs the eager float64 references of
test/reference/families.py: O, dq, dk, dv and the gradient of every learnable param and
weight (W of Luong general, W_q, W_k, v of Bahdanau / Luong concat / location-sensitive,
ALiBi's slope, the soft cap, the relative-bias table), in float64 and float32, with and
without causal mask and padding, on the generic loops (dv != d) and the tiled kernels
(d = dv = 32)."""
from pathlib import Path

import pytest
import torch

import families as fam
from conftest import REPO, compile_source
from helpers import check_close, compiled_grads, seed_of

FAMILIES_DIR = REPO / "examples" / "families"

# name: (score, keep mask of the IR, head dim fixed by the weights or None, input scale)
FAMILIES = {
    "cosine": (fam.cosine_score(5.0), None, None, 1.0),
    "luong_dot": (fam.dot_score, None, None, 0.3),
    "luong_general": (fam.bilinear_score(), None, 32, 0.2),
    "luong_concat": (fam.additive_score, None, 16, 0.5),
    "bahdanau": (fam.additive_score, None, 32, 0.3),
    "location_sensitive": (fam.additive_score, None, 21, 0.5),
    "alibi": (fam.alibi_score, fam.causal_keep, None, 1.3),
    "softcap": (fam.softcap_score, None, None, 1.3),
    "relative_bias": (fam.relative_bias_score, None, None, 1.3),
    "sliding_window": (fam.plain_scaled_dot, fam.window_keep, None, 1.3),
    "causal": (fam.plain_scaled_dot, fam.causal_keep, None, 1.3),
    "nested_tanh": (fam.nested_tanh_score, None, 16, 1.0),
}
TILED_VALUE_DIM = {"nested_tanh": 32}
DTYPES = {"f64": torch.float64, "f32": torch.float32}
MASKS = {"none": (False, False), "causal+pad": (True, True)}


class _Compiled:
    def __init__(self, outdir):
        self.outdir, self.cache = outdir, {}

    def __call__(self, name):
        if name not in self.cache:
            self.cache[name] = str(compile_source(FAMILIES_DIR / f"{name}.mlir", self.outdir, name))
        return self.cache[name]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory, attn_mod):
    return _Compiled(tmp_path_factory.mktemp("families"))


def random_params(kernel, gen):
    """Non-trivial values for every param and weight (not the identity / fill inits),
    so each gradient term is exercised."""
    parts = []
    for name, shape in kernel.param_shapes.items():
        fan_in = shape[-1] if shape else 1
        parts.append((torch.randn(tuple(shape), generator=gen, dtype=torch.float64) / fan_in ** 0.5).reshape(-1))
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def run_family(attn_mod, compiled, name, shape, mask, dt, zero_rows=False, relative=False,
               path=None):
    """`path`: an artifact of the family's IR with other weight shapes (the head dim
    given in `shape` then)."""
    score, keep_fn, fixed_d, input_scale = FAMILIES[name]
    if path:
        fixed_d = None
    B, H, Nq, Nk, d, dv = shape
    if fixed_d:
        d = fixed_d
    dtype = DTYPES[dt]
    is_causal, padding = MASKS[mask]
    gen = torch.Generator().manual_seed(seed_of("families", name, shape, mask))
    q, k = (input_scale * torch.randn(B, H, n, d, generator=gen, dtype=torch.float64) for n in (Nq, Nk))
    v = torch.randn(B, H, Nk, dv, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, dv, generator=gen, dtype=torch.float64)
    if zero_rows:
        q[:, :, 0] = 0.0
        k[:, :, 1] = 0.0
    lengths = None
    if padding:
        lengths = torch.randint(1, Nk + 1, (B,), generator=gen, dtype=torch.int64)
        lengths[0] = max(1, Nk // 2)
    kernel = attn_mod.load(path or compiled(name))
    params = random_params(kernel, gen)
    cast = lambda t: t.to(dtype)
    got = compiled_grads(kernel.path, cast(q), cast(k), cast(v), cast(params), cast(dout),
                         is_causal, lengths)
    want = fam.attention_and_grads(score, keep_fn, q, k, v, params, kernel.param_shapes, dout,
                                   is_causal, lengths)
    # relative: gradients of size ~1/ε (zero cosine rows) are held to the tolerance
    # relative to their own size
    floor = ({n: t.abs().max().item() if t.numel() else 0.0 for n, t in want.items()}
             if relative else None)
    check_close(got, want, dtype, floor=floor, context=f"{name} shape={shape} mask={mask} {dt}",
                log_key=(name, dt))
    return got, want


SHAPES = {
    "generic": (2, 2, 7, 11, 8, 5),     # dv != d: the generic loops
    "tiled": (1, 2, 70, 67, 32, 32),    # d = dv = 32: the tiled kernels where they apply
}


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("name", list(FAMILIES))
def test_family_matches_reference(attn_mod, compiled, name, shape, mask, dt):
    s = SHAPES[shape]
    if FAMILIES[name][2] and shape == "tiled":
        # the tiled kernels need the contracted width (W q's for nested_tanh) = dv
        s = s[:4] + (FAMILIES[name][2], TILED_VALUE_DIM.get(name, FAMILIES[name][2]))
    run_family(attn_mod, compiled, name, s, mask, dt)


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("hidden", [64, 128])
def test_additive_tiles_at_other_widths(attn_mod, compiled, hidden, mask, dt):
    """The tiled tanh-dot at the hidden widths blocked otherwise than 32's (4 rows of
    4 vectors at 64, 2 rows of 8 at 128, f32; half as many lanes in f64), rows and
    keys not multiples of the tile, keys over several of the backward's key blocks at
    128 (256 keys in f32, 128 in f64)."""
    name = f"bahdanau{hidden}"
    if name not in compiled.cache:
        text = (FAMILIES_DIR / "bahdanau.mlir").read_text()
        widened = text.replace("hidden 32 weights(W_q: 32x32 = identity, W_k: 32x32 = identity, "
                               "v: 32 = 0.125)",
                               f"hidden {hidden} weights(W_q: {hidden}x{hidden} = identity, "
                               f"W_k: {hidden}x{hidden} = identity, v: {hidden} = 0.125)")
        assert widened != text, "examples/families/bahdanau.mlir changed its score line"
        compiled.cache[name] = str(compile_source(widened, compiled.outdir, name))
    run_family(attn_mod, compiled, "bahdanau", (1, 2, 45, 300, hidden, hidden), mask, dt,
               path=compiled.cache[name])


@pytest.mark.parametrize("dt", list(DTYPES))
def test_cosine_zero_rows_stay_finite(attn_mod, compiled, dt):
    """|q| = 0 or |k| = 0: the ε-norm gives cos = 0 and finite gradients (of size
    |dq̂|/ε there, as in the reference)."""
    got, _ = run_family(attn_mod, compiled, "cosine", (1, 2, 6, 5, 8, 8), "none", dt,
                        zero_rows=True, relative=True)
    assert all(torch.isfinite(t).all() for t in got.values())


def test_weight_gradients_are_nonzero(attn_mod, compiled):
    """dparams really carries dW (Luong general) and dW_q, dW_k, dv (Bahdanau): no slot
    of the flattened weights stays 0 for random inputs."""
    for name in ("luong_general", "bahdanau", "nested_tanh"):
        got, _ = run_family(attn_mod, compiled, name, (2, 2, 9, 10, 0, 6), "none", "f64")
        assert (got["dparams"] != 0).all(), name


def test_initial_params_and_shapes(attn_mod, compiled):
    kernel = attn_mod.load(compiled("bahdanau"))
    assert kernel.param_shapes == {"W_q": (32, 32), "W_k": (32, 32), "v": (32,)}
    split = kernel.split_params(kernel.initial_params(torch.float64))
    assert torch.equal(split["W_q"], torch.eye(32, dtype=torch.float64))
    assert torch.equal(split["v"], torch.full((32,), 0.125, dtype=torch.float64))
    assert kernel.initial_params().numel() == 2 * 32 * 32 + 32


def test_head_dim_fixed_by_weights(attn_mod, compiled):
    kernel = attn_mod.load(compiled("luong_general"))
    q = torch.randn(1, 1, 4, 16)
    with pytest.raises(RuntimeError, match="compiled for head dim 32"):
        kernel(q, q, q)


# --- Luong local-p: a per-query tensor input p_i [B, H, Nq] ---------------------------

def luong_local_case(attn_mod, compiled, shape, mask, dt, row_layout="bhn"):
    B, H, Nq, Nk, d, dv = shape
    dtype = DTYPES[dt]
    is_causal, padding = MASKS[mask]
    gen = torch.Generator().manual_seed(seed_of("luong_local", shape, mask, row_layout))
    q, k = (0.3 * torch.randn(B, H, n, d, generator=gen, dtype=torch.float64) for n in (Nq, Nk))
    v = torch.randn(B, H, Nk, dv, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, dv, generator=gen, dtype=torch.float64)
    # window centres spread over (and a little beyond) the keys, not on integers
    centre = (Nk + 2) * torch.rand(B, 1 if row_layout == "bn" else H, Nq, generator=gen,
                                   dtype=torch.float64) - 1
    lengths = None
    if padding:
        lengths = torch.randint(1, Nk + 1, (B,), generator=gen, dtype=torch.int64)
        lengths[0] = max(1, Nk // 2)
    kernel = attn_mod.load(compiled("luong_local"))
    assert kernel.input_names == ["p"]
    params = torch.tensor([1.7], dtype=torch.float64)          # sigma
    rows = centre.expand(B, H, Nq).unsqueeze(2)                 # [B, H, 1, Nq]
    want = fam.attention_and_grads(fam.luong_local_score, None, q, k, v, params,
                                   kernel.param_shapes, dout, is_causal, lengths, rows)
    cast = lambda t: t.detach().to(dtype).clone().requires_grad_(True)
    qc, kc, vc, pc = cast(q), cast(k), cast(v), cast(params)
    given = cast(centre[:, 0] if row_layout == "bn" else centre)
    # "bn": one centre per query for every head, passed as a stride-0 view [B, H, Nq]
    p = given[:, None, :].expand(B, H, Nq) if row_layout == "bn" else given
    O = kernel(qc, kc, vc, pc, is_causal, lengths, inputs={"p": p})
    grads = torch.autograd.grad(O, [qc, kc, vc, pc, given], grad_outputs=dout.to(dtype))
    got = {"O": O.detach(), "dq": grads[0], "dk": grads[1], "dv": grads[2], "dparams": grads[3]}
    # σ's gradient sums dS_ij · (j - p_i)²/σ³ over every pair, factors up to ~900 against a
    # sum of ~5: plain f32 arithmetic lands ~3e-4 (relative) from float64 on it, eager
    # torch as much as the kernel, so f32 may be off by twice eager f32's error too
    eager = (None if dtype == torch.float64 else
             fam.attention_and_grads(fam.luong_local_score, None, q, k, v, params,
                                     kernel.param_shapes, dout, is_causal, lengths, rows,
                                     dtype=dtype))
    check_close(got, want, dtype, eager=eager,
                context=f"luong_local {shape} {mask} {dt} {row_layout}",
                log_key=("luong_local", dt))
    # dp: [B, H, Nq] (or [B, Nq], summed over heads, for a centre shared by the heads)
    want_dp = want["drows"][:, :, 0]
    if row_layout == "bn":
        want_dp = want_dp.sum(1)
    tol = 1e-9 if dtype == torch.float64 else 2e-4 * want_dp.abs().max().item()
    assert grads[4].shape == want_dp.shape
    err = (grads[4].to(torch.float64) - want_dp).abs().max().item()
    assert err <= tol, f"dp: max abs err {err:.3e} > {tol:.3e}"


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_luong_local_matches_reference(attn_mod, compiled, shape, mask, dt):
    luong_local_case(attn_mod, compiled, SHAPES[shape], mask, dt)


def test_luong_local_centre_shared_by_heads(attn_mod, compiled):
    luong_local_case(attn_mod, compiled, (2, 3, 9, 12, 8, 8), "none", "f64", row_layout="bn")


def test_input_errors(attn_mod, compiled):
    q = torch.randn(1, 2, 5, 8)
    local = attn_mod.load(compiled("luong_local"))
    with pytest.raises(RuntimeError, match=r"takes the tensor inputs \['p'\]; missing: \['p'\]"):
        local(q, q, q)
    with pytest.raises(RuntimeError, match=r"unknown: \['centre'\]"):
        local(q, q, q, inputs={"p": torch.zeros(1, 2, 5), "centre": torch.zeros(1)})
    with pytest.raises(RuntimeError, match=r"takes 1 tensor input\(s\) \(p \(float \[B, H, Nq\], learnable\)\), got 0"):
        local(q, q, q, inputs=[])
    with pytest.raises(RuntimeError, match=r"input p must be a 3-D tensor, expected p \(float \[B, H, Nq\], learnable\), got shape \[1, 2, 1, 5\]"):
        local(q, q, q, inputs={"p": torch.zeros(1, 2, 1, 5)})
    with pytest.raises(RuntimeError, match=r"input p has dtype float64, expected float32 \(a float input has the dtype of q\)"):
        local(q, q, q, inputs={"p": torch.zeros(1, 2, 5, dtype=torch.float64)})
    with pytest.raises(RuntimeError, match=r"input p has an empty dim 2"):
        local(q, q, q, inputs={"p": torch.zeros(1, 2, 0)})
    with pytest.raises(RuntimeError, match=r"kernel luong_dot_attention takes 0 tensor input\(s\), got 1"):
        attn_mod.load(compiled("luong_dot"))(q, q, q, inputs=[torch.zeros(1, 2, 5)])


@pytest.mark.parametrize("name", ["cosine", "luong_general", "bahdanau", "nested_tanh"])
def test_fully_masked_rows_give_zeros(attn_mod, compiled, name):
    """key_lengths = 0 for a batch entry: O = 0 and zero, finite gradients there, through
    the row transforms too (tiled and generic)."""
    fixed = FAMILIES[name][2] or 32
    for dv in (TILED_VALUE_DIM.get(name, fixed), 5):
        kernel = attn_mod.load(compiled(name))
        q, k = (torch.randn(2, 2, 6, fixed, requires_grad=True) for _ in range(2))
        v = torch.randn(2, 2, 6, dv, requires_grad=True)
        params = kernel.initial_params().requires_grad_()
        out = kernel(q, k, v, params, key_lengths=torch.tensor([0, 3]))
        out.sum().backward()
        assert (out[0] == 0).all() and (q.grad[0] == 0).all() and (k.grad[0] == 0).all()
        assert all(torch.isfinite(t).all() for t in (out, q.grad, k.grad, v.grad, params.grad))


MIXED_PARAMS_IR = """
attn.score @general contract bilinear scale 0.5 params(shift = 0.25) weights(W: 8x8 = identity) mod {
^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index, %shift: f64):
  %t = arith.addf %s, %shift : f64
  attn.yield %t : f64
}
attn.normalizer @sigmoid params(bias = -1.0) {
  numerator {
  ^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index, %bias: f64):
    %one = arith.constant 1.0 : f64
    %x = arith.addf %s, %bias : f64
    %nx = arith.negf %x : f64
    %e = math.exp %nx : f64
    %den = arith.addf %one, %e : f64
    %g = arith.divf %one, %den : f64
    attn.yield %g : f64
  }
  denominator constant 1.0
}
attn.kernel @mixed normalizer(@sigmoid) score(@general)
"""


def test_weights_after_normalizer_and_score_scalars(attn_mod, tmp_path):
    """Params vector = normalizer scalars, score scalars, then the weights: every
    gradient lands in its own slot (sigmoid normalizer bias, mod shift, W)."""
    kernel = attn_mod.load(compile_source(MIXED_PARAMS_IR, tmp_path, "mixed"))
    assert kernel.param_shapes == {"bias": (), "shift": (), "W": (8, 8)}
    gen = torch.Generator().manual_seed(7)
    q, k, v, dout = (torch.randn(2, 2, n, 8, generator=gen, dtype=torch.float64) for n in (5, 6, 6, 5))
    params = torch.randn(2 + 64, generator=gen, dtype=torch.float64) * 0.3

    def score(q, k, p):
        return 0.5 * (q @ p["W"]) @ k.transpose(-1, -2) + p["shift"]

    def reference(q, k, v, params):
        p = fam.split_params(params, kernel.param_shapes)
        return torch.sigmoid(score(q, k, p) + p["bias"]) @ v

    leaves = [t.clone().requires_grad_(True) for t in (q, k, v, params)]
    want = torch.autograd.grad(reference(*leaves), leaves, dout)
    got_leaves = [t.clone().requires_grad_(True) for t in (q, k, v, params)]
    got = torch.autograd.grad(kernel(*got_leaves), got_leaves, dout)
    for name, g, w in zip(["dq", "dk", "dv", "dparams"], got, want):
        assert (g - w).abs().max() <= 1e-9, name
