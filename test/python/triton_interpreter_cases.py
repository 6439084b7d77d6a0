"""The Triton kernels of attn-compile --emit=triton (lib/Codegen/Triton), run by
Triton's interpreter on CPU tensors against the float64 references, forward and every
gradient: every example normalizer, causal, key padding, fully masked rows, Nq != Nk,
Nq = 1, N not a multiple of the tile, GQA, an index mask, a score mod with a learnable
param, offset regions with learnable params, T5's buckets (integer helpers), the cosine,
bilinear and additive contractions and a learnable projection before a feature map (the
weights' gradients too), a feature map, and f16 and bf16 storage; stick-breaking (a scan:
key tiles last to first, its left-over and a learnable shift; f32 and bf16); sparsemax and
α-entmax (an implicit normalizer: τ_i by passes over the key tiles, r_i for the backward,
the learnable α; f32 and bf16; never split); and the
decode forward (attn_fwd_split + attn_fwd_merge, forced into 3 key chunks) for the
normalizers, row offsets, positions and the contractions. Tiles of 16 and
N <= 40 keep the interpreter quick.

Triton decides when it is imported whether its own library runs interpreted, so these
cases run in a process that sets TRITON_INTERPRET=1 first: test_triton_interpreter.py
starts one (or, by hand: TRITON_INTERPRET=1 pytest test/python/triton_interpreter_cases.py).
On a GPU the same cases run natively: ATTN_TRITON_DEVICE=cuda pytest
test/python/triton_interpreter_cases.py (scripts/gpu-check.sh) moves q, k and v to the
GPU and the results back.
"""
import os

import pytest
import torch

import general
import helpers
import reference as ref
from conftest import EXAMPLES, NORMALIZER_NAMES, REPO
from triton_table_kernels import (BIAS_TABLE, BILINEAR, FEATURE_MAP, INTEGER_OPS, MATH_OPS,
                                  PROJECTED_FEATURES, SINKS_DOCUMENTS, SOFTMAX,
                                  WIDE_ADDITIVE, WIDE_POSITIONS)

DEVICE = os.environ.get("ATTN_TRITON_DEVICE", "cpu")
if DEVICE == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported (test_triton_interpreter.py "
                "runs this file so), or ATTN_TRITON_DEVICE=cuda on a GPU",
                allow_module_level=True)
if DEVICE != "cpu" and not torch.cuda.is_available():
    pytest.skip(f"ATTN_TRITON_DEVICE={DEVICE} but no CUDA device", allow_module_level=True)
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from attn import triton_backend  # noqa: E402

FAMILIES = REPO / "examples" / "families"
TILE = 16
D = 16


_KERNELS = {}


class _OnDevice:
    """A TritonKernel whose calls run on DEVICE: q, k and v go there, O comes back (both
    differentiable, so the gradients reach the CPU leaves)."""

    def __init__(self, kern):
        self.kern = kern

    def __getattr__(self, name):
        return getattr(self.kern, name)

    def __call__(self, q, k, v, *args, **kwargs):
        return self.kern(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), *args, **kwargs).cpu()


def kernel(path):
    """The kernel of an .mlir file (or IR text), compiled once per session."""
    if path not in _KERNELS:
        kern = triton_backend.compile_triton(str(path), block_m=TILE, block_n=TILE)
        _KERNELS[path] = kern if DEVICE == "cpu" else _OnDevice(kern)
    return _KERNELS[path]


SPLITS = 3  # chunks of 16 keys (one tile each) over Nk = 45: the last one is short


def split_kernel(path):
    """The kernel of `path` whose forward always runs the decode forward in SPLITS
    chunks (as a GPU does for few rows over many keys), compiled once per session."""
    key = (str(path), "split")
    if key not in _KERNELS:
        kern = triton_backend.compile_triton(str(path), block_m=TILE, block_n=TILE,
                                             key_splits=SPLITS)
        _KERNELS[key] = kern if DEVICE == "cpu" else _OnDevice(kern)
    return _KERNELS[key]


# Both forwards of a kernel: attn_fwd, and the decode forward forced for every call.
FORWARDS = pytest.mark.parametrize("make", [kernel, split_kernel], ids=["attn_fwd", "decode"])


def run(kern, q, k, v, params, dout, is_causal=False, key_lengths=None, dtype=torch.float32):
    """O and the gradients of the Triton kernels, as float64 tensors."""
    leaves = [t.detach().to(dtype).requires_grad_(True) for t in (q, k, v)]
    p = params.detach().to(torch.float32).requires_grad_(True)
    out = kern(*leaves, p, is_causal=is_causal, key_lengths=key_lengths)
    out.backward(dout.to(dtype))
    grads = [t.grad.double() for t in leaves]
    return {"O": out.detach().double(), "dq": grads[0], "dk": grads[1], "dv": grads[2],
            "dparams": p.grad.double()}


def assert_close(got, want, tolerance=helpers.TOL_F32_REL, context=""):
    for name in want:
        g = got[name]
        assert torch.isfinite(g).all(), f"{context}: {name} has NaN or inf"
        w = want[name]
        if w.numel() == 0:
            continue
        err = (g - w).abs().max().item()
        scale = max(w.abs().max().item(), 1e-30)
        assert err <= tolerance * scale, (
            f"{context}: {name} max error {err:.3e}, {err / scale:.2e} of max|ref| "
            f"(allowed {tolerance:.0e})")


@pytest.mark.parametrize("name", [n for n in NORMALIZER_NAMES if n != "linear"]
                         + ["softmax1"])
def test_example_normalizers_with_key_padding(name):
    """Every example normalizer over keys padded per batch; 37 is not a multiple of 16."""
    reference = "softmax" if name == "softmax1" else name
    B, H, N = 2, 2, 37
    q, k, v, dout, lengths = helpers.make_inputs(reference, B, H, N, N, D, D,
                                                 helpers.seed_of("triton", name), padding=True)
    params = helpers.case_params(reference)
    got = run(kernel(EXAMPLES / f"{name}.mlir"), q, k, v, params, dout, key_lengths=lengths)
    if name == "softmax1":   # C = 1 + Σ e^s: softmax with one more key of score 0 and v = 0
        pad = lambda t, value: torch.cat([t, torch.full_like(t[:, :, :1], value)], dim=2)
        q0, k0, v0 = q.detach(), pad(k.detach(), 0.0), pad(v.detach(), 0.0)
        fn = lambda q_, k_, v_: general.attention(
            q_, k_, v_, lambda a, b, ix: a @ b.transpose(-1, -2) / D ** 0.5,
            lambda s, ix: torch.exp(s), lambda s, ix: torch.exp(s),
            keep=lambda ix: (ix.j < lengths.view(B, 1, 1, 1)) | (ix.j == N))
        want = general.attention_and_grads(fn, q0, k0, v0, dout)
        want["dk"], want["dv"] = want["dk"][:, :, :N], want["dv"][:, :, :N]
        assert_close(got, {n: want[n] for n in ("O", "dq", "dk", "dv")}, context=name)
    else:
        want = helpers.reference_grads(reference, q, k, v, params, dout, key_lengths=lengths)
        assert_close(got, want, context=name)


@pytest.mark.parametrize("name,Nq,Nk,dv", [("tanhmax", 40, 40, D), ("softmax", 21, 37, 24),
                                           ("sigmoid", 1, 40, D)])
def test_causal_and_odd_shapes(name, Nq, Nk, dv):
    """is_causal (top-left aligned), Nq != Nk, a single query row, dv != d."""
    q, k, v, dout, _ = helpers.make_inputs(name, 1, 2, Nq, Nk, D, dv,
                                           helpers.seed_of("triton-causal", name, Nq, Nk))
    params = helpers.case_params(name)
    got = run(kernel(EXAMPLES / f"{name}.mlir"), q, k, v, params, dout, is_causal=True)
    want = helpers.reference_grads(name, q, k, v, params, dout, is_causal=True)
    assert_close(got, want, context=f"{name} causal {Nq}x{Nk}")


@pytest.mark.parametrize("name", ["softmax", "expressive"])
def test_fully_masked_rows_give_zero(name):
    """A batch entry without keys: O = 0 and zero gradients, no NaN."""
    q, k, v, dout, _ = helpers.make_inputs(name, 2, 1, 20, 20, D, D,
                                           helpers.seed_of("triton-empty", name))
    lengths = torch.tensor([0, 13])
    got = run(kernel(EXAMPLES / f"{name}.mlir"), q, k, v, helpers.case_params(name), dout,
              key_lengths=lengths)
    for n in ("O", "dq", "dk", "dv"):
        assert torch.isfinite(got[n]).all(), f"{n} has NaN or inf"
        assert got[n][0].abs().max() == 0, f"{n} of the batch entry without keys is not 0"
    want = helpers.reference_grads(name, q, k, v, helpers.case_params(name), dout,
                                   key_lengths=lengths)
    assert_close(got, want, context=f"{name} empty rows")


# s = log(raw²) of the bilinear contraction raw = 0.5·q·W·k, softmax weights ∝ raw²: at
# the rows past NQ, whose q loads as 0, raw = 0, s = -inf and ∂s/∂raw = 2·raw/raw² = 0/0.
GENERAL_LOG_SQUARE = """
attn.score @general_log_square contract bilinear scale 0.5 weights(W: 16x16 = identity) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %square = arith.mulf %s, %s : f32
  %log = math.log %square : f32
  attn.yield %log : f32
}
""" + SOFTMAX + """attn.kernel @general_log_square_attention normalizer(@softmax) score(@general_log_square)
"""


@pytest.mark.parametrize("is_causal", [False, True])
def test_rows_past_nq_stay_out_of_the_weight_gradient(is_causal):
    """NQ = 40 with 16-row blocks: the last block's rows past NQ have NaN pair terms under
    log(raw²), and dW sums q_rowsᵀ·dq over a dQ program's rows, so that block's key tiles
    must all be masked (none whole)."""
    import families as fam

    gen = torch.Generator().manual_seed(helpers.seed_of("triton-rows-past-nq", is_causal))
    q, k, v, dout = (torch.randn(1, 2, 40, D, generator=gen, dtype=torch.float64)
                     for _ in range(4))
    W = torch.eye(D, dtype=torch.float64) + 0.3 * torch.randn(D, D, generator=gen,
                                                               dtype=torch.float64)
    got = run(kernel(GENERAL_LOG_SQUARE), q, k, v, W.flatten(), dout, is_causal=is_causal)
    fn = lambda q_, k_, v_, W_: general.attention(
        q_, k_, v_, lambda a, b, ix: torch.log(fam.bilinear_score(0.5)(a, b, {"W": W_}) ** 2),
        lambda s, ix: torch.exp(s), lambda s, ix: torch.exp(s), is_causal=is_causal)
    want = general.attention_and_grads(fn, q, k, v, dout, leaves=(W,))
    want["dparams"] = want.pop("d0").flatten()
    assert_close(got, want, context=f"log(raw²) of q·W·k, causal={is_causal}")


def test_gqa_reads_kv_heads_by_index():
    """4 query heads over 2 kv heads: dK and dV sum over each head's group."""
    gen = torch.Generator().manual_seed(helpers.seed_of("triton-gqa"))
    q = 1.3 * torch.randn(1, 4, 24, D, generator=gen, dtype=torch.float64)
    k = 1.3 * torch.randn(1, 2, 30, D, generator=gen, dtype=torch.float64)
    v = torch.randn(1, 2, 30, D, generator=gen, dtype=torch.float64)
    dout = torch.randn(1, 4, 24, D, generator=gen, dtype=torch.float64)
    got = run(kernel(EXAMPLES / "tanhmax.mlir"), q, k, v, torch.zeros(0), dout, is_causal=True)
    fn = lambda q_, k_, v_: ref.attention("tanhmax", q_, k_.repeat_interleave(2, dim=1),
                                          v_.repeat_interleave(2, dim=1), is_causal=True)
    want = general.attention_and_grads(fn, q, k, v, dout)
    assert_close(got, {n: want[n] for n in ("O", "dq", "dk", "dv")}, context="gqa")


def _scaled_dot(q, k, ix):
    return q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5


def test_sliding_window_mask():
    """An index mask (examples/families/sliding_window.mlir: |i - j| <= 3)."""
    q, k, v, dout, _ = helpers.make_inputs("softmax", 1, 2, 33, 33, D, D,
                                           helpers.seed_of("triton-window"))
    got = run(kernel(FAMILIES / "sliding_window.mlir"), q, k, v, torch.zeros(0), dout)
    fn = lambda q_, k_, v_: general.attention(
        q_, k_, v_, _scaled_dot, lambda s, ix: torch.exp(s), lambda s, ix: torch.exp(s),
        keep=lambda ix: (ix.j + 3 >= ix.i) & (ix.i + 3 >= ix.j))
    want = general.attention_and_grads(fn, q, k, v, dout)
    assert_close(got, {n: want[n] for n in ("O", "dq", "dk", "dv")}, context="window")


def test_alibi_score_mod_and_its_learnable_slope():
    """A score mod from the indices with a learnable param (examples/families/alibi.mlir:
    s - slope·|i - j|, causal mask): dθ = Σ ds·∂mod/∂θ."""
    q, k, v, dout, _ = helpers.make_inputs("softmax", 2, 2, 29, 29, D, D,
                                           helpers.seed_of("triton-alibi"))
    slope = torch.tensor([0.3], dtype=torch.float64)
    got = run(kernel(FAMILIES / "alibi.mlir"), q, k, v, slope, dout)
    fn = lambda q_, k_, v_, p: general.attention(
        q_, k_, v_, lambda a, b, ix: _scaled_dot(a, b, ix) - p[0] * (ix.i - ix.j).abs(),
        lambda s, ix: torch.exp(s), lambda s, ix: torch.exp(s), keep=lambda ix: ix.j <= ix.i)
    want = general.attention_and_grads(fn, q, k, v, dout, leaves=(slope,))
    want["dparams"] = want.pop("d0")
    assert_close(got, want, context="alibi")


@FORWARDS
def test_cosine_contraction_through_the_norms(make):
    """examples/families/cosine.mlir: s = 5·q̂·k̂ with x̂ = x/sqrt(x·x + ε²), the kernels
    contracting unit rows and chaining dq and dk back through the norms; a zero q row and
    a zero k row (cos = 0, finite gradients), Nq != Nk, padded keys."""
    import families as fam

    q, k, v, dout, _ = helpers.make_inputs("softmax", 2, 2, 21, 37, D, D,
                                           helpers.seed_of("triton-cosine"))
    q[0, 1, 3], k[1, 0, 5] = 0.0, 0.0
    lengths = torch.tensor([37, 30])
    got = run(make(FAMILIES / "cosine.mlir"), q, k, v, torch.zeros(0), dout,
              key_lengths=lengths)
    fn = lambda q_, k_, v_: general.attention(
        q_, k_, v_, lambda a, b, ix: fam.cosine_score(5.0)(a, b, None),
        lambda s, ix: torch.exp(s), lambda s, ix: torch.exp(s), key_lengths=lengths)
    want = general.attention_and_grads(fn, q, k, v, dout)
    assert_close(got, {n: want[n] for n in ("O", "dq", "dk", "dv")}, context="cosine")


@FORWARDS
def test_bilinear_contraction_and_its_weight_gradient(make):
    """s = 0.5·q·W·k with a learnable W [d, d] (Luong's general score), W not the identity:
    q' = q·W in the kernels, dq = dq'·Wᵀ, and dW = Σ qᵀ·dq' from the dQ programs' slots
    (the same bits twice); causal, Nq != Nk, GQA."""
    import families as fam

    gen = torch.Generator().manual_seed(helpers.seed_of("triton-bilinear"))
    q = torch.randn(1, 4, 21, D, generator=gen, dtype=torch.float64)
    k = torch.randn(1, 2, 30, D, generator=gen, dtype=torch.float64)
    v = torch.randn(1, 2, 30, D, generator=gen, dtype=torch.float64)
    dout = torch.randn(1, 4, 21, D, generator=gen, dtype=torch.float64)
    W = torch.eye(D, dtype=torch.float64) + 0.3 * torch.randn(D, D, generator=gen,
                                                               dtype=torch.float64)
    kern = make(BILINEAR)
    assert torch.equal(kern.initial_params(), torch.eye(D).flatten())
    got = run(kern, q, k, v, W.flatten(), dout, is_causal=True)
    again = run(kern, q, k, v, W.flatten(), dout, is_causal=True)
    assert torch.equal(got["dparams"], again["dparams"])
    fn = lambda q_, k_, v_, W_: general.attention(
        q_, k_.repeat_interleave(2, 1), v_.repeat_interleave(2, 1),
        lambda a, b, ix: fam.bilinear_score(0.5)(a, b, {"W": W_}),
        lambda s, ix: torch.exp(s), lambda s, ix: torch.exp(s), is_causal=True)
    want = general.attention_and_grads(fn, q, k, v, dout, leaves=(W,))
    want["dparams"] = want.pop("d0").flatten()
    assert_close(got, want, context="bilinear")
    with pytest.raises(ValueError, match="weight W is 16x16, so q and k need head dim 16, got 8"):
        kern(q[..., :8].float(), k[..., :8].float(), v.float(), W.flatten().float())
    with pytest.raises(ValueError, match="params must be a 1-D tensor of 256 \\(W\\[16x16\\]\\)"):
        kern(q.float(), k.float(), v.float(), torch.zeros(16))


@FORWARDS
def test_feature_map_in_the_quadratic_form(make):
    """s = φ(q)·φ(k) with φ(x) = tanh(x) + 1 applied to the tiles as loaded, dq and dk
    chained through φ'; d = 12 pads the head dim to 16 columns, where φ(0) = 1 must not
    count (σ(s) with C = 1 sees a shift of the scores); padded keys."""
    q, k, v, dout, _ = helpers.make_inputs("softmax", 2, 2, 19, 26, 12, D,
                                           helpers.seed_of("triton-feature"))
    lengths = torch.tensor([26, 11])
    got = run(make(FEATURE_MAP), q, k, v, torch.zeros(0), dout, key_lengths=lengths)
    phi = lambda x: torch.tanh(x) + 1
    fn = lambda q_, k_, v_: general.attention(
        q_, k_, v_, lambda a, b, ix: phi(a) @ phi(b).transpose(-1, -2),
        lambda s, ix: torch.sigmoid(s), denominator="constant", key_lengths=lengths)
    want = general.attention_and_grads(fn, q, k, v, dout)
    assert_close(got, {n: want[n] for n in ("O", "dq", "dk", "dv")}, context="feature map")


ADDITIVE = {8: FAMILIES / "luong_concat.mlir", 40: WIDE_ADDITIVE}  # by hidden n


def _additive_case(n=8):
    """The inputs of ADDITIVE[n] (d = 16; W_q, W_k [n, 16] and v [n] not their inits; 4
    query heads over 2 kv heads, Nq != Nk, keys padded per batch entry)
    and the float64 reference of O and every gradient, the weights' flattened as
    dparams, for the inputs as given (round them first for 16-bit storage)."""
    import families as fam

    gen = torch.Generator().manual_seed(helpers.seed_of("triton-additive", n))
    B, H, H_KV, Nq, Nk = 2, 4, 2, 21, 37
    q = torch.randn(B, H, Nq, D, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(B, H_KV, Nk, D, generator=gen, dtype=torch.float64) for _ in range(2))
    dout = torch.randn(B, H, Nq, D, generator=gen, dtype=torch.float64)
    weights = [0.4 * torch.randn(n, D, generator=gen, dtype=torch.float64),
               0.4 * torch.randn(n, D, generator=gen, dtype=torch.float64),
               torch.randn(n, generator=gen, dtype=torch.float64)]
    lengths = torch.tensor([37, 26])

    def reference(q, k, v, dout, weights):
        fn = lambda q_, k_, v_, wq, wk, wv: general.attention(
            q_, k_, v_, lambda a, b, ix: fam.additive_score(a, b, {"W_q": wq, "W_k": wk,
                                                                  "v": wv}),
            lambda s, ix: torch.exp(s), lambda s, ix: torch.exp(s), is_causal=True,
            key_lengths=lengths)
        want = general.attention_and_grads(with_gqa(fn, H // H_KV), q, k, v, dout,
                                           leaves=tuple(weights))
        want["dparams"] = torch.cat([want.pop(f"d{n}").flatten() for n in range(3)])
        return want

    return (q, k, v, dout, weights), dict(is_causal=True, key_lengths=lengths), reference


@pytest.mark.parametrize("make,n", [(kernel, 8), (split_kernel, 8), (kernel, 40)],
                         ids=["attn_fwd", "decode", "attn_fwd-n40"])
def test_additive_contraction_and_its_weight_gradients(make, n):
    """s = v·tanh(W_q q + W_k k): examples/families/luong_concat.mlir (hidden n = 8, one
    chunk of 16 columns) and WIDE_ADDITIVE (n = 40: four chunks, the last ones padding),
    W_q, W_k [n, 16] and v [n] learnable and not their inits; dW_q from the dQ programs'
    slots, dW_k and dv from the dK programs', the same bits twice; 4 query heads over 2
    kv heads, causal, Nq != Nk, keys padded per batch entry."""
    (q, k, v, dout, weights), options, reference = _additive_case(n)
    flat = torch.cat([w.flatten() for w in weights])
    kern = make(ADDITIVE[n])
    got = run(kern, q, k, v, flat, dout, **options)
    again = run(kern, q, k, v, flat, dout, **options)
    assert torch.equal(got["dparams"], again["dparams"])
    assert_close(got, reference(q, k, v, dout, weights), context="additive")
    with pytest.raises(ValueError, match=f"weight W_q is {n}x16, so q and k need head dim 16, "
                       "got 8"):
        kern(q[..., :8].float(), k[..., :8].float(), v.float(), flat.float())


def _projected_case():
    """PROJECTED_FEATURES' inputs (W [24, 12] learnable: m = 24 and d = 12 pad their
    tiles; Nq != Nk, keys padded per batch entry) and the float64 reference of O and
    every gradient, dW flattened as dparams."""
    gen = torch.Generator().manual_seed(helpers.seed_of("triton-projected"))
    B, H, Nq, Nk, m, d = 2, 2, 19, 40, 24, 12
    q = torch.randn(B, H, Nq, d, generator=gen, dtype=torch.float64)
    k = torch.randn(B, H, Nk, d, generator=gen, dtype=torch.float64)
    v = torch.randn(B, H, Nk, D, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, D, generator=gen, dtype=torch.float64)
    W = 0.5 * torch.randn(m, d, generator=gen, dtype=torch.float64)
    lengths = torch.tensor([40, 23])

    def reference(q, k, v, dout, weights):
        fn = lambda q_, k_, v_, W_: general.attention(
            q_, k_, v_, lambda a, b, ix: torch.tanh(a @ W_.T)
            @ torch.tanh(b @ W_.T).transpose(-1, -2) / m ** 0.5,
            lambda s, ix: torch.exp(s), lambda s, ix: torch.exp(s), key_lengths=lengths)
        want = general.attention_and_grads(fn, q, k, v, dout, leaves=tuple(weights))
        want["dparams"] = want.pop("d0").flatten()
        return want

    return (q, k, v, dout, [W]), dict(key_lengths=lengths), reference


@FORWARDS
def test_learnable_projection_before_the_feature_map(make):
    """s = tanh(W q)·tanh(W k)/sqrt(m) with one learnable W [24, 12] (PROJECTED_FEATURES):
    the hidden m = 24 and the head dim 12 pad their tiles; dW sums the dQ programs' share
    (through q) and the dK programs' (through k), the same bits twice; Nq != Nk, keys
    padded per batch entry."""
    (q, k, v, dout, weights), options, reference = _projected_case()
    kern = make(PROJECTED_FEATURES)
    assert kern.module.score_scale(12) == 1 / 24 ** 0.5
    got = run(kern, q, k, v, weights[0].flatten(), dout, **options)
    again = run(kern, q, k, v, weights[0].flatten(), dout, **options)
    assert torch.equal(got["dparams"], again["dparams"])
    assert_close(got, reference(q, k, v, dout, weights), context="projected features")


def _interpreter_dot_multiplies_bfloat16_values():
    """Triton 3.9's interpreter keeps bfloat16 as its uint16 bits and np.matmul-s those
    bits in tl.dot (a 16 x 16 product of randn is off by 3e10, silently), where a GPU
    multiplies the values into a float32 accumulator. Its casts decode bfloat16
    correctly, so tl.dot's bfloat16 operands are decoded to float32 first (exact): the
    kernels then run under the interpreter as on a GPU, up to summation order. The
    kernels themselves are not changed."""
    from triton.runtime import interpreter
    import triton.language as tl

    builder = interpreter.InterpreterBuilder
    create_dot = builder.create_dot

    def dot_of_values(self, a, b, d, input_precision, max_num_imprecise_acc):
        a, b = (self.cast_impl(x, tl.float32) if x.dtype.scalar == tl.bfloat16 else x
                for x in (a, b))
        return create_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder.create_dot = dot_of_values


if DEVICE == "cpu":
    _interpreter_dot_multiplies_bfloat16_values()
STORAGE = [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("name", ["softmax", "cosine"])
@pytest.mark.parametrize("storage", STORAGE, ids=str)
def test_16_bit_storage(storage, name):
    """16-bit q, k, v (fp32 accumulation, P and dS rounded to the storage type for the
    dots; cosine: the unit rows too): within four of the storage type's eps (its spacing
    at 1) of the reference on the rounded inputs. Measured: f16 4e-4, bf16 9e-3."""
    import families as fam

    q, k, v, dout, _ = helpers.make_inputs("softmax", 1, 2, 20, 20, D, D,
                                           helpers.seed_of("triton-bf16"))
    params = torch.zeros(0)
    path = EXAMPLES / "softmax.mlir" if name == "softmax" else FAMILIES / "cosine.mlir"
    got = run(kernel(path), q, k, v, params, dout, is_causal=True, dtype=storage)
    q, k, v, dout = (t.to(storage).double() for t in (q, k, v, dout))
    if name == "softmax":
        want = helpers.reference_grads("softmax", q, k, v, params, dout, is_causal=True)
    else:
        fn = lambda q_, k_, v_: general.attention(
            q_, k_, v_, lambda a, b, ix: fam.cosine_score(5.0)(a, b, None),
            lambda s, ix: torch.exp(s), lambda s, ix: torch.exp(s), is_causal=True)
        want = general.attention_and_grads(fn, q, k, v, dout)
        want = {n: want[n] for n in ("O", "dq", "dk", "dv")}
    assert_close(got, want, tolerance=4 * torch.finfo(storage).eps,
                 context=f"{name} {storage}")


@pytest.mark.parametrize("name", ["additive", "projected"])
@pytest.mark.parametrize("storage", STORAGE, ids=str)
def test_16_bit_storage_of_the_learnable_projections(storage, name):
    """The additive contraction (luong_concat.mlir) and a projection before a feature map
    (PROJECTED_FEATURES) with 16-bit q, k, v: O, dq, dk, dv and the weights' gradients
    (dW_q, dW_k, v; W) within four of the storage type's eps of max |reference|, as the
    other 16-bit cases: the projections' dots take the weights rounded to the storage
    type, P and dS are rounded for theirs, the rest is float32 (tf32 dots on a GPU,
    2^-11 relative). The weights are given rounded, so the reference runs on the values
    the kernels multiply. Measured under the interpreter, the largest of every output:
    f16 6.9e-4 (0.7 eps), bf16 1.2e-2 (1.5 eps, the projection's dq)."""
    case, source = {"additive": (_additive_case, FAMILIES / "luong_concat.mlir"),
                    "projected": (_projected_case, PROJECTED_FEATURES)}[name]
    tensors, options, reference = case()
    q, k, v, dout, weights = ([t.to(storage).double() for t in tensors[:4]]
                              + [[w.to(storage).double() for w in tensors[4]]])
    flat = torch.cat([w.flatten() for w in weights])
    got = run(kernel(source), q, k, v, flat, dout, dtype=storage, **options)
    assert_close(got, reference(q, k, v, dout, weights),
                 tolerance=4 * torch.finfo(storage).eps, context=f"{name} {storage}")


def test_param_gradients_are_deterministic():
    """dθ is summed from per-program slots in a fixed order: the same bits twice."""
    q, k, v, dout, _ = helpers.make_inputs("sigmoid", 2, 2, 40, 40, D, D,
                                           helpers.seed_of("triton-bits"))
    kern = kernel(EXAMPLES / "sigmoid.mlir")
    first = run(kern, q, k, v, helpers.case_params("sigmoid"), dout)["dparams"]
    second = run(kern, q, k, v, helpers.case_params("sigmoid"), dout)["dparams"]
    assert torch.equal(first, second)


@pytest.mark.skipif(DEVICE == "cpu", reason="the GPU's stream: native runs only")
@pytest.mark.parametrize("split", [False, True])
def test_native_only_calls_leave_the_stream_running(split):
    """A warm forward and backward wait for no GPU work on the host (torch's sync debug
    mode raises on any call that would): positions and key lengths given on the CPU reach
    the kernels without a copy from pageable memory, which drains the stream. Seen on an
    H200: such copies made every call wait for the one before it."""
    path = EXAMPLES / "softmax.mlir"
    kern = (kernel(path) if not split else split_kernel(path)).kern
    gen = torch.Generator().manual_seed(helpers.seed_of("triton-stream", split))
    q, k, v = (torch.randn(2, 2, 1 if split else 40, D, generator=gen).to(DEVICE)
               .requires_grad_() for _ in range(3))
    call = dict(query_start=torch.tensor([3, 40]), key_start=torch.tensor([0, 2]),
                key_lengths=torch.tensor([40, 17]), is_causal=True)
    kern(q, k, v, **call).sum().backward()  # compiles the kernels
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        kern(q, k, v, **call).sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def test_schedule_entries_replace_the_modules():
    """A kernel given schedule entries launches with them (bench/gpu_tiles.py's
    candidates) and computes the same function; an unknown entry is refused."""
    override = {"forward": (32, 16, 4, 1), "backward": (16, 32, 4, 1)}
    kern = triton_backend.compile_triton(str(EXAMPLES / "softmax.mlir"), schedule=override)
    schedule = kern.schedule(DEVICE, torch.float32, D)
    assert schedule["forward"] == override["forward"]
    assert schedule["backward"] == override["backward"]
    q, k, v, dout, _ = helpers.make_inputs("softmax", 1, 2, 40, 40, D, D,
                                           helpers.seed_of("triton-schedule"))
    run_on = kern if DEVICE == "cpu" else _OnDevice(kern)
    got = run(run_on, q, k, v, helpers.case_params("softmax"), dout, is_causal=True)
    want = run(kernel(EXAMPLES / "softmax.mlir"), q, k, v, helpers.case_params("softmax"),
               dout, is_causal=True)
    assert_close(got, want, context="softmax with schedule entries")
    with pytest.raises(ValueError, match="schedule entries are forward, backward and decode"):
        triton_backend.compile_triton(str(EXAMPLES / "softmax.mlir"), schedule={"fwd": (1,)})


@pytest.mark.skipif(DEVICE != "cpu", reason="the script itself times on the GPU")
def test_gpu_tiles_script_checks_and_tabulates_each_schedule(tmp_path, monkeypatch, capsys):
    """bench/gpu_tiles.py on CPU tensors (its timing stubbed): every schedule runs, agrees
    with the module's own and gets its row."""
    import sys
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import gpu_bench
    import gpu_tiles

    gen = torch.Generator().manual_seed(helpers.seed_of("gpu-tiles"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "CPU (interpreter)")
    monkeypatch.setattr(gpu_bench, "inputs", lambda n, d, seed=0: [
        torch.randn(1, 2, n, d, generator=gen) for _ in range(4)])
    monkeypatch.setattr(gpu_bench, "cell", lambda fn, q, k, v, do, backward, budget:
                        (gpu_bench.runner(fn, q, k, v, do, backward)(), 1.0)[1])
    out = tmp_path / "tiles.md"
    monkeypatch.setattr(sys, "argv", ["gpu_tiles.py", "--n", "40", "--d", "64", "--causal",
                                      "--forward", "32,16,4,1", "--backward", "16,32,4,1",
                                      "--out", str(out)])
    assert gpu_tiles.main() == 0
    table = out.read_text()
    assert "| fwd | 64, 64, 4, 2 (own) | 1.000 | 1.00× | 0.0e+00 |" in table
    assert "| fwd | 32, 16, 4, 1 | 1.000 | 1.00× |" in table
    assert "| fwd+bwd | 16, 32, 4, 1 | 1.000 | 1.00× |" in table
    assert "MISMATCH" not in table and "error" not in table


def test_refused_kernel_names_the_feature():
    with pytest.raises(RuntimeError, match="kernelised \\(linear-time\\) form"):
        triton_backend.emit_triton(str(EXAMPLES / "linear.mlir"))


def test_bad_arguments_say_what_was_expected():
    kern = kernel(EXAMPLES / "sigmoid.mlir")
    q = torch.zeros(1, 4, 8, D)
    with pytest.raises(ValueError, match="multiple of k's 3"):
        kern(q, torch.zeros(1, 3, 8, D), torch.zeros(1, 3, 8, D))
    with pytest.raises(ValueError, match="params must be a 1-D tensor of 1 \\(bias\\)"):
        kern(q, q, q, torch.zeros(2))
    with pytest.raises(ValueError, match="key_lengths must be an integer tensor \\[1\\]"):
        kern(q, q, q, key_lengths=torch.ones(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="float32, float16 or bfloat16"):
        kern(q.double(), q.double(), q.double())


@pytest.mark.parametrize("name", ["offset_params", "plain_offset"])
def test_row_offsets_and_their_param_gradients(name):
    """An offset region with a learnable param (test_row_offsets.py's kernels): online,
    β = e^(t + 0.1·h) joins the running max; plain, β = t² + 0.5. dθ from β is the
    backward preprocess's share: −∂β/∂θ·D/C per row."""
    import test_row_offsets as row_offsets

    gen = torch.Generator().manual_seed(helpers.seed_of("triton-offsets", name))
    q, k = (torch.randn(2, 2, 27, D, generator=gen, dtype=torch.float64) for _ in range(2))
    v = torch.randn(2, 2, 27, D, generator=gen, dtype=torch.float64)
    dout = torch.randn(2, 2, 27, D, generator=gen, dtype=torch.float64)
    params, _, reference = row_offsets.case(name, gen, 2, 27)
    got = run(kernel(row_offsets.SOURCES[name]), q, k, v, params, dout)
    want = general.attention_and_grads(reference, q, k, v, dout, [params])
    want["dparams"] = want.pop("d0")
    assert_close(got, want, context=name)


# --- tensor inputs -------------------------------------------------------------------



def run_tables(kern, q, k, v, dout, tables, learnable, **options):
    """O and the gradients (dq, dk, dv and d<name> of each learnable table), float64."""
    leaves = [t.detach().float().requires_grad_(True) for t in (q, k, v)]
    inputs = {name: (t.detach().float().requires_grad_(True) if name in learnable else t)
              for name, t in tables.items()}
    out = kern(*leaves, inputs=inputs, **options)
    out.backward(dout.float())
    got = {"O": out.detach().double(), "dq": leaves[0].grad.double(),
           "dk": leaves[1].grad.double(), "dv": leaves[2].grad.double()}
    for name in learnable:
        got["d" + name] = inputs[name].grad.double()
    return got


def test_sinks_document_mask_and_gqa_in_one_kernel():
    """A learnable sink logit per head (an offset region reading sinks[H]), document ids
    doc [B, N] (int64, read as a broadcast view: stride 0 over the batch), 4 query heads
    over 2 kv heads and causal: O, dq, dk, dv and dsinks against the float64 reference."""
    gen = torch.Generator().manual_seed(helpers.seed_of("triton-sinks-documents"))
    B, H, H_KV, N = 2, 4, 2, 35
    q = 1.3 * torch.randn(B, H, N, D, generator=gen, dtype=torch.float64)
    k = 1.3 * torch.randn(B, H_KV, N, D, generator=gen, dtype=torch.float64)
    v = torch.randn(B, H_KV, N, D, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, N, D, generator=gen, dtype=torch.float64)
    sinks = torch.randn(H, generator=gen, dtype=torch.float64)
    doc = torch.cumsum((torch.rand(1, N, generator=gen) < 0.15).to(torch.int64), 1).expand(B, N)
    assert doc.stride(0) == 0
    got = run_tables(kernel(SINKS_DOCUMENTS), q, k, v, dout, {"sinks": sinks, "doc": doc},
                     ["sinks"], is_causal=True)

    def reference(q_, k_, v_, sinks_):
        k_, v_ = k_.repeat_interleave(H // H_KV, 1), v_.repeat_interleave(H // H_KV, 1)
        s = q_ @ k_.transpose(-1, -2) / D ** 0.5
        i, j = torch.arange(N).view(N, 1), torch.arange(N).view(1, N)
        keep = (doc[:, None, :, None] == doc[:, None, None, :]) & (j <= i)
        e = torch.where(keep, torch.exp(s), 0.0)
        c = torch.exp(sinks_).view(1, H, 1, 1) + e.sum(-1, keepdim=True)
        return (e / c) @ v_

    want = general.attention_and_grads(reference, q, k, v, dout, leaves=(sinks,))
    want["dsinks"] = want.pop("d0")
    assert_close(got, want, context="sinks + documents + gqa")




def test_learnable_table_gradient_with_clamped_reads():
    """s + bias[h, j - i + 2] with bias [H, 6] learnable: the reads below 0 and past 5 are
    clamped (every pair farther than 2 before or 3 after the query reads an end bucket),
    and dbias sums each pair's ds at the element read; the same bits twice."""
    gen = torch.Generator().manual_seed(helpers.seed_of("triton-bias-table"))
    B, H, N = 2, 2, 29
    q, k, v, dout = (torch.randn(B, H, N, D, generator=gen, dtype=torch.float64)
                     for _ in range(4))
    bias = 0.5 * torch.randn(H, 6, generator=gen, dtype=torch.float64)
    kern = kernel(BIAS_TABLE)
    got = run_tables(kern, q, k, v, dout, {"bias": bias}, ["bias"], key_lengths=torch.tensor([29, 17]))
    again = run_tables(kern, q, k, v, dout, {"bias": bias}, ["bias"], key_lengths=torch.tensor([29, 17]))
    assert torch.equal(got["dbias"], again["dbias"])
    lengths = torch.tensor([29, 17])
    bucket = lambda ix: (ix.j - ix.i + 2).clamp(0, 5)
    fn = lambda q_, k_, v_, bias_: general.attention(
        q_, k_, v_, lambda a, b, ix: _scaled_dot(a, b, ix) + bias_[ix.h, bucket(ix)],
        lambda s, ix: torch.exp(s), lambda s, ix: torch.exp(s),
        keep=lambda ix: ix.j < lengths.view(B, 1, 1, 1))
    want = general.attention_and_grads(fn, q, k, v, dout, leaves=(bias,))
    want["dbias"] = want.pop("d0")
    assert_close(got, want, context="bias table")


def test_t5_relative_buckets_and_their_learnable_bias():
    """examples/families/t5_bias.mlir: T5's bidirectional buckets, logarithmic past a
    distance of 8 (⌊log2 n²⌋ + 2 through math.ctlz on i64; 40 keys cross the bucket
    boundaries at 16 and 32 on both sides), and dbias [H, 32] against T5's own bucket
    function in float64 (test_table_families.t5_bucket)."""
    from test_table_families import make

    gen = torch.Generator().manual_seed(helpers.seed_of("triton-t5"))
    B, H, Nq, Nk = 1, 2, 37, 40
    q = 0.5 * torch.randn(B, H, Nq, D, generator=gen, dtype=torch.float64)
    k = 0.5 * torch.randn(B, H, Nk, D, generator=gen, dtype=torch.float64)
    v = torch.randn(B, H, Nk, D, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, D, generator=gen, dtype=torch.float64)
    tables, reference, _ = make("t5_bias", (B, H, Nq, Nk, D, D), gen)
    got = run_tables(kernel(FAMILIES / "t5_bias.mlir"), q, k, v, dout, tables, ["bias"])
    want = general.attention_and_grads(reference, q, k, v, dout, leaves=(tables["bias"],))
    want["dbias"] = want.pop("d0")
    assert_close(got, want, context="t5 buckets")


def _integer_ops_reference(i, j):
    """f(i, j) of INTEGER_OPS in int64 torch ops (i, j >= 0)."""
    def bits(x):
        return torch.stack([(x >> b) & 1 for b in range(32)]).sum(0)

    n = i - j
    floor, ceil = torch.div(n, 3, rounding_mode="floor"), -torch.div(-n, 4, rounding_mode="floor")
    j1, i1 = j + 1, i + 1
    trailing = bits((j1 & -j1) - 1)
    leading = 32 - torch.floor(torch.log2(i1.double())).long() - 1
    return (floor + ceil + bits(i * 7 + j) + trailing + leading + (i + 5) // 3 + (j + 7) % 5
            + (i * j >> 2) + torch.maximum(i, j) - torch.minimum(i, j))


def test_integer_ops_without_a_triton_operator():
    """floordivsi, ceildivsi (negative quotients), ctpop, cttz, ctlz and the unsigned
    divui, remui, shrui, maxui, minui against int64 torch."""
    q, k, v, dout, _ = helpers.make_inputs("softmax", 1, 1, 37, 37, D, D,
                                           helpers.seed_of("triton-integer-ops"))
    got = run(kernel(INTEGER_OPS), q, k, v, torch.zeros(0), dout)
    fn = lambda q_, k_, v_: general.attention(
        q_, k_, v_, lambda a, b, ix: _scaled_dot(a, b, ix)
        + 0.01 * _integer_ops_reference(ix.i, ix.j).to(a.dtype),
        lambda s, ix: torch.exp(s), lambda s, ix: torch.exp(s))
    want = general.attention_and_grads(fn, q, k, v, dout)
    assert_close(got, {n: want[n] for n in ("O", "dq", "dk", "dv")}, context="integer ops")


def _softmax_with(score, keep):
    """O of softmax attention over score(s, i, j) where keep(i, j) ([B, 1, Nq, Nk] indices)."""
    def fn(q_, k_, v_):
        s = score(q_ @ k_.transpose(-1, -2) / q_.shape[-1] ** 0.5)
        e = torch.where(keep, torch.exp(s - s.masked_fill(~keep, -torch.inf).amax(-1, True)), 0.0)
        return (e / e.sum(-1, keepdim=True)) @ v_
    return fn


@FORWARDS
def test_index_arithmetic_past_two_to_the_31(make):
    """Through both forwards (the decode forward's rows, their lowest and highest
    position and its causal stop are int64 too), positions near 3e9 (query_start per batch entry, key_start): (i·j) mod 7 (products
    near 9e18) in the score mod and (i + j) mod 5 in the mask are 64-bit as the IR's index
    says, and the mask's index_cast to i32 wraps as the IR says; int32 arithmetic would
    give other residues (the test fails with it); the score mod's extui, trunci to i1 and
    extsi / sitofp of that i1 follow the IR's widths and signs."""
    B, H, Nq, Nk = 2, 1, 19, 23
    q, k, v, dout, _ = helpers.make_inputs("softmax", B, H, Nq, Nk, D, D,
                                           helpers.seed_of("triton-wide-positions"))
    starts, key_start = torch.tensor([3_000_000_011, 2_147_483_640]), 2_999_999_993
    i = (starts.view(B, 1, 1, 1) + torch.arange(Nq).view(1, 1, Nq, 1))
    j = key_start + torch.arange(Nk).view(1, 1, 1, Nk)
    assert (i * j).max() > 2 ** 62
    keep = (torch.fmod(i + j, 5) != 2) | (torch.fmod(i.to(torch.int32), 3) != 0)
    bias = 0.25 * (torch.fmod(i * j, 7) - 3).to(torch.float64)
    unsigned, bit = j & 0xFFFFFFFF, j & 1  # of j: a term of i alone would cancel in softmax
    bias = bias + 0.0625 * (torch.fmod(unsigned, 11) - 5 - 2 * bit).to(torch.float64)
    got = run_tables(make(WIDE_POSITIONS), q, k, v, dout, {}, [], query_start=starts,
                     key_start=key_start)
    want = general.attention_and_grads(_softmax_with(lambda s: s + bias, keep), q, k, v, dout)
    assert_close(got, {n: want[n] for n in ("O", "dq", "dk", "dv")}, context="wide positions")


def _math_ops_score(s, i, j):
    """MATH_OPS's score mod in float64 (torch.round rounds halves to even)."""
    x, y, q = (i - j) * 0.1, (i + j) * 0.05, (i - j) * 0.25
    y1, xs = y + 1.0, x * 0.2
    log_x = torch.log(x)
    index_terms = (torch.sinh(x) + torch.cosh(x) + torch.tan(xs) + x.sign() * x.abs() ** (1 / 3)
                   + torch.log10(y1) + torch.special.erfc(x) + torch.atan2(x, y) + torch.asin(xs)
                   + torch.acos(xs) + torch.asinh(x) + torch.acosh(y1) + torch.atanh(xs)
                   + torch.round(q) + q.sign() * torch.floor(q.abs() + 0.5) + torch.trunc(q)
                   + torch.copysign(y, x) + x ** 3 + x ** 3.0
                   + torch.isnan(log_x) * 1.0 + torch.isinf(log_x) * 2.0
                   + torch.isfinite(log_x) * 4.0 + (x != 0) * 8.0)
    return torch.atan(s) + y1 ** (0.2 * s) + 0.01 * index_terms


@triton.jit
def _evaluate_score_mod(score_mod: tl.constexpr, Raw, Out, N, BLOCK: tl.constexpr):
    rows, cols = tl.arange(0, BLOCK)[:, None], tl.arange(0, BLOCK)[None, :]
    inside = (rows < N) & (cols < N)
    raw = tl.load(Raw + rows * N + cols, mask=inside, other=0.0)
    tl.store(Out + rows * N + cols, score_mod(raw, 0, 0, rows, cols), mask=inside)


def test_math_ops_from_the_prelude():
    """atan and powf of the score (O and every gradient through them), and sinh, cosh,
    tan, cbrt, log10, erfc, atan2 (on the axis too), asin, acos, asinh, acosh, atanh,
    roundeven, round and trunc (exact halves), copysign, fpowi, powf of a negative base and
    the float classes of the indices, against float64 torch."""
    B, H, N = 1, 2, 37
    q, k, v, dout, _ = helpers.make_inputs("softmax", B, H, N, N, D, D,
                                           helpers.seed_of("triton-math-ops"))
    kern = kernel(MATH_OPS)
    i, j = torch.arange(N).view(N, 1).double(), torch.arange(N).view(1, N).double()
    # The score mod alone, elementwise: within float32's rounding of each term.
    raw = 3 * torch.randn(N, N, generator=torch.Generator().manual_seed(7))
    out = torch.empty(N, N, device=DEVICE)
    _evaluate_score_mod[(1,)](kern.module.score_mod, raw.to(DEVICE), out, N, 64)
    out = out.cpu()
    want_score = _math_ops_score(raw.double(), i, j)
    err = ((out.double() - want_score).abs() / (1 + want_score.abs())).max().item()
    assert err < 2e-6, f"score mod off by {err:.1e} (relative to 1 + |score|)"
    got = run(kern, q, k, v, torch.zeros(0), dout)
    keep = torch.ones(N, N, dtype=torch.bool)
    want = general.attention_and_grads(
        _softmax_with(lambda s: _math_ops_score(s, i, j), keep), q, k, v, dout)
    assert_close(got, {n: want[n] for n in ("O", "dq", "dk", "dv")}, context="math ops")


def test_tensor_inputs_are_checked():
    kern = kernel(SINKS_DOCUMENTS)
    q = torch.zeros(1, 2, 8, D)
    doc = torch.zeros(1, 8, dtype=torch.int64)
    with pytest.raises(ValueError, match="exactly the tensor inputs \\(sinks, doc\\)"):
        kern(q, q, q, inputs={"doc": doc})
    with pytest.raises(ValueError, match="input doc must be a 2-D integer tensor"):
        kern(q, q, q, inputs={"sinks": torch.zeros(2), "doc": doc.float()})
    with pytest.raises(ValueError, match="input sinks must have extent at least 1"):
        kern(q, q, q, inputs={"sinks": torch.zeros(0), "doc": doc})


# --- block sparsity -----------------------------------------------------------------------


def test_causal_as_mask_skips_tiles():
    """examples/families/causal.mlir (j <= i as an attn.mask): tiles above the diagonal are
    skipped, tiles below it skip the mask; Nq != Nk and N not a multiple of the tile."""
    q, k, v, dout, _ = helpers.make_inputs("softmax", 1, 2, 37, 45, D, D,
                                           helpers.seed_of("triton-causal-mask"))
    got = run(kernel(FAMILIES / "causal.mlir"), q, k, v, torch.zeros(0), dout)
    want = helpers.reference_grads("softmax", q, k, v, torch.zeros(0), dout, is_causal=True)
    assert_close(got, want, context="causal as mask")


def test_sliding_window_with_sinks():
    """examples/families/sliding_window_sinks.mlir: causal window of 16 keys (tiles past
    the window skipped) and a learnable sink per head; dsinks too."""
    gen = torch.Generator().manual_seed(helpers.seed_of("triton-window-sinks"))
    B, H, N = 1, 2, 45
    q, k, v, dout = (torch.randn(B, H, N, D, generator=gen, dtype=torch.float64)
                     for _ in range(4))
    sinks = torch.randn(H, generator=gen, dtype=torch.float64)
    got = run_tables(kernel(FAMILIES / "sliding_window_sinks.mlir"), q, k, v, dout,
                     {"sinks": sinks}, ["sinks"])
    i, j = torch.arange(N).view(N, 1), torch.arange(N).view(1, N)
    keep = (j <= i) & (j + 16 > i)

    def reference(q_, k_, v_, sinks_):
        e = torch.where(keep, torch.exp(q_ @ k_.transpose(-1, -2) / D ** 0.5), 0.0)
        return (e / (torch.exp(sinks_).view(1, H, 1, 1) + e.sum(-1, keepdim=True))) @ v_

    want = general.attention_and_grads(reference, q, k, v, dout, leaves=(sinks,))
    want["dsinks"] = want.pop("d0")
    assert_close(got, want, context="window + sinks")


# --- absolute positions (docs/decoding.md) ------------------------------------------------


@pytest.mark.parametrize("name", ["causal", "alibi_heads", "ssmax", "sliding_window_sinks",
                                  "document_mask"])
def test_rows_at_their_positions(name):
    """The last rows of each batch entry's sequence (query_start a [B] tensor: 27 and 24 of
    37 positions) give the whole sequence's rows and gradients: the regions, causal, the
    skipped tiles (window, causal masks) and the row offsets see absolute positions."""
    from test_positions import family, rows_of, whole_sequence_reference

    gen = torch.Generator().manual_seed(helpers.seed_of("triton-positions", name))
    B, H, N, Nq = 2, 4, 37, 10
    q, k, v = (torch.randn(B, H, N, D, generator=gen, dtype=torch.float64) for _ in range(3))
    dout = torch.randn(B, H, Nq, D, generator=gen, dtype=torch.float64)
    tables, reference, is_causal = family(name, B, H, N, D, D, gen)
    first = [N - Nq, N - Nq - 3]
    want = whole_sequence_reference(reference, q, k, v, dout, tables, first, Nq)
    path = EXAMPLES / "softmax.mlir" if name == "causal" else FAMILIES / f"{name}.mlir"
    kern = kernel(path)
    learnable = [n for n, arg, _, _, is_learnable in kern.inputs if is_learnable]
    got = run_tables(kern, rows_of(q, first, Nq), k, v, dout, tables, learnable,
                     is_causal=is_causal, query_start=torch.tensor(first))
    want = {n: t for n, t in want.items() if n in got}
    assert_close(got, want, context=f"{name} at positions {first}")


@pytest.mark.parametrize("name,Nq", [("alibi_heads", 10), ("causal", 1)])
def test_keys_from_a_start_per_batch_entry(name, Nq):
    """key_start a [B] tensor (8 and 3) with key padding and 4 query heads over 2 kv
    heads, through attn_fwd (10 rows) and the decode forward (1 row, 3 key chunks): O and
    every gradient of the float64 reference (test_positions.keys_from_starts_case)."""
    from test_positions import keys_from_starts_case

    gen = torch.Generator().manual_seed(helpers.seed_of("triton-key-starts", name, Nq))
    q, k, v, dout, tables, is_causal, call, want = keys_from_starts_case(
        name, 2, 4, 2, 45, Nq, D, D, gen)
    path = EXAMPLES / "softmax.mlir" if name == "causal" else FAMILIES / f"{name}.mlir"
    kern = kernel(path) if Nq > 1 else split_kernel(path)
    got = run_tables(kern, q, k, v, dout, tables, [], is_causal=is_causal, **call)
    assert_close(got, want, context=f"{name} keys from {call['key_start'].tolist()}")


@FORWARDS
def test_causal_past_int32_differences_of_start(make):
    """is_causal with starts 3e9 apart: batch entry 0's queries start 3e9 after the keys
    (every key kept; full_stop once wrapped to int32 there, and the masked tiles read K
    and V before key 0), entry 1's 3e9 before them (none kept: O and gradients 0),
    entry 2's 5 after them. The tiles compare key row minus query row (int32) with
    q_start - key_start clamped to int32."""
    B, H, Nq, Nk = 3, 1, 19, 23
    q, k, v, dout, _ = helpers.make_inputs("softmax", B, H, Nq, Nk, D, D,
                                           helpers.seed_of("triton-causal-wide-starts"))
    query_start = torch.tensor([3_000_000_000, 0, 7])
    key_start = torch.tensor([0, 3_000_000_000, 2])
    got = run_tables(make(EXAMPLES / "softmax.mlir"), q, k, v, dout, {}, [], is_causal=True,
                     query_start=query_start, key_start=key_start)
    i = query_start.view(B, 1, 1, 1) + torch.arange(Nq).view(1, 1, Nq, 1)
    j = key_start.view(B, 1, 1, 1) + torch.arange(Nk).view(1, 1, 1, Nk)
    fn = lambda q_, k_, v_: general.attention(
        q_, k_, v_, lambda a, b, ix: a @ b.transpose(-1, -2) / D ** 0.5,
        lambda s, ix: torch.exp(s), lambda s, ix: torch.exp(s), keep=lambda ix: j <= i)
    want = general.attention_and_grads(fn, q, k, v, dout)
    assert got["O"][1].abs().max() == 0 and got["dq"][1].abs().max() == 0
    assert_close(got, {n: want[n] for n in ("O", "dq", "dk", "dv")}, context="wide starts")


def test_bad_positions_are_refused():
    kern = kernel(EXAMPLES / "softmax.mlir")
    q = torch.zeros(2, 1, 4, D)
    with pytest.raises(ValueError, match="query_start must be an int or an integer tensor \\[2\\]"):
        kern(q, q, q, query_start=torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="positions >= 0"):
        kern(q, q, q, query_start=-1)
    with pytest.raises(ValueError, match="key_start must be an int or an integer tensor \\[2\\]"):
        kern(q, q, q, key_start=torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="key_start must be positions >= 0"):
        kern(q, q, q, key_start=torch.tensor([1, -2]))
    older = triton_backend.emit_triton(str(EXAMPLES / "softmax.mlir")).replace("KeyStarts",
                                                                            "KEY_START")
    with pytest.raises(RuntimeError, match="older attn-compile .* KEY_START.*recompile"):
        triton_backend.load_triton(older)


def test_modules_without_a_backward_plan_are_refused():
    """A module an older attn-compile wrote (no BACKWARD_PLAN, kernels no launcher runs) is
    refused at load, not in the middle of a backward."""
    text = triton_backend.emit_triton(str(EXAMPLES / "softmax.mlir"))
    assert "\nBACKWARD_PLAN = " in text
    older = text.replace("\nBACKWARD_PLAN = ", "\nOLD_PLAN = ")
    with pytest.raises(RuntimeError, match="older attn-compile .*no BACKWARD_PLAN.*recompile"):
        triton_backend.load_triton(older)


# --- the decode forward: attn_fwd_split over key chunks, attn_fwd_merge (docs/decoding.md) --

def with_gqa(fn, group):
    """fn over k and v of H_kv heads, each read by `group` query heads."""
    return lambda q, k, v, *rest: fn(q, k.repeat_interleave(group, 1),
                                     v.repeat_interleave(group, 1), *rest)


def assert_log_normaliser(row_max, row_sum, want_c, context):
    """The saved statistics' C = row_sum·e^row_max (whatever m the kernel shifted by)
    against the reference's C, row by row."""
    got = torch.log(row_sum.double()) + row_max.double()
    assert torch.allclose(got, torch.log(want_c), rtol=0, atol=1e-5), (
        f"{context}: log C off by {(got - torch.log(want_c)).abs().max().item():.2e}")


@pytest.mark.parametrize("name", ["softmax", "tanhmax", "sigmoid", "relu"])
@pytest.mark.parametrize("Nq", [1, 5])
def test_decode_forward_normalizers(name, Nq):
    """Online (softmax, tanhmax), plain with a constant (sigmoid) and a count (relu)
    denominator: 4 query heads over 2 kv heads packed into one tile of rows, keys padded
    per batch entry (45 and 30 of Nk = 45, three chunks); O and the saved C against the
    reference, then one backward from the split forward's statistics."""
    B, H, H_KV, Nk = 2, 4, 2, 45
    q, k, v, dout, _ = helpers.make_inputs(name, B, H, Nq, Nk, D, D,
                                           helpers.seed_of("triton-decode", name, Nq))
    k, v = k[:, :H_KV].contiguous(), v[:, :H_KV].contiguous()
    lengths = torch.tensor([45, 30])
    params = helpers.case_params(name)
    kern = split_kernel(EXAMPLES / f"{name}.mlir")
    if DEVICE == "cpu":
        _, row_max, row_sum = kern.forward(q.float(), k.float(), v.float(), params.float(),
                                           key_lengths=lengths)
        _, _, _, want_c = ref.attention_with_stats(name, q, k.repeat_interleave(2, 1),
                                                   v.repeat_interleave(2, 1), params,
                                                   key_lengths=lengths)
        assert_log_normaliser(row_max, row_sum, want_c, f"{name} Nq={Nq}")
    got = run(kern, q, k, v, params, dout, key_lengths=lengths)
    fn = lambda q_, k_, v_, p_: ref.attention(name, q_, k_, v_, p_, key_lengths=lengths)
    want = general.attention_and_grads(with_gqa(fn, H // H_KV), q, k, v, dout,
                                       leaves=(params,))
    want["dparams"] = want.pop("d0")
    assert_close(got, want, context=f"{name} decode Nq={Nq}")


@pytest.mark.parametrize("name", ["offset_params", "plain_offset"])
def test_decode_forward_adds_the_row_offset_once(name):
    """An offset region (online: β = e^(t + 0.1·h), its exponent the merge's first max;
    plain: β = t² + 0.5) over three chunks: β joins C once, in attn_fwd_merge; O, dθ and
    the saved C (the float64 C of the reference computed here)."""
    import test_row_offsets as row_offsets

    gen = torch.Generator().manual_seed(helpers.seed_of("triton-decode-offsets", name))
    B, H, Nq, Nk = 2, 2, 3, 45
    q = torch.randn(B, H, Nq, D, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(B, H, Nk, D, generator=gen, dtype=torch.float64) for _ in range(2))
    dout = torch.randn(B, H, Nq, D, generator=gen, dtype=torch.float64)
    params, _, reference = row_offsets.case(name, gen, H, Nq)
    kern = split_kernel(row_offsets.SOURCES[name])
    got = run(kern, q, k, v, params, dout)
    want = general.attention_and_grads(reference, q, k, v, dout, [params])
    want["dparams"] = want.pop("d0")
    assert_close(got, want, context=f"{name} decode")
    if DEVICE == "cpu":
        _, row_max, row_sum = kern.forward(q.float(), k.float(), v.float(), params.float())
        s = q @ k.transpose(-1, -2) / D ** 0.5
        p, h = params[0], torch.arange(H, dtype=torch.float64).view(1, H, 1)
        want_c = (torch.exp(s).sum(-1) + torch.exp(p + 0.1 * h) if name == "offset_params"
                  else (s * s).sum(-1) + p * p + 0.5)
        assert_log_normaliser(row_max, row_sum, want_c, f"{name} decode")


@pytest.mark.parametrize("name,Nq", [("alibi_heads", 1), ("alibi_heads", 5), ("causal", 5),
                                     ("sliding_window_sinks", 5)])
def test_decode_forward_at_positions(name, Nq):
    """The last Nq rows of 45 positions (query_start a [B] tensor, per batch entry; 45
    keys in three chunks, not a multiple of the chunk's 16): ALiBi's slopes per head
    (tensor input), causal bottom-right (query_start = Nk - Nq), a window with sinks
    (skipped tiles for every head of the packed rows, the sink added once), with 4
    query heads over 2 kv heads; O and every gradient of the whole sequence's rows."""
    from test_positions import family, rows_of, whole_sequence_reference

    gen = torch.Generator().manual_seed(helpers.seed_of("triton-decode-positions", name, Nq))
    B, H, H_KV, N = 2, 4, 2, 45
    q = torch.randn(B, H, N, D, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(B, H_KV, N, D, generator=gen, dtype=torch.float64) for _ in range(2))
    dout = torch.randn(B, H, Nq, D, generator=gen, dtype=torch.float64)
    tables, reference, is_causal = family(name, B, H, N, D, D, gen)
    first = [N - Nq, N - Nq - 3]
    group = H // H_KV
    want = whole_sequence_reference(reference, q, k.repeat_interleave(group, 1),
                                    v.repeat_interleave(group, 1), dout, tables, first, Nq)
    for n in ("dk", "dv"):  # each kv head's gradient: the sum over its query heads'
        want[n] = want[n].view(B, H_KV, group, N, D).sum(2)
    path = EXAMPLES / "softmax.mlir" if name == "causal" else FAMILIES / f"{name}.mlir"
    kern = split_kernel(path)
    learnable = [n for n, arg, _, _, is_learnable in kern.inputs if is_learnable]
    got = run_tables(kern, rows_of(q, first, Nq), k, v, dout, tables, learnable,
                     is_causal=is_causal, query_start=torch.tensor(first))
    want = {n: t for n, t in want.items() if n in got}
    assert_close(got, want, context=f"{name} decode at positions {first}")



# --- scan normalizers (stick-breaking): key tiles from the last to the first -------------

def _shifted_stick_breaking():
    """stick_breaking_left_over with a learnable shift of every share, σ(s + bias) over
    −softplus(s + bias) (test_stick_breaking's "shifted", with the mask j < i and the
    left-over): dθ of both regions."""
    import attn
    from attn import sigmoid, softplus

    return attn.kernel(
        attn.normalizer(numerator=lambda s, bias: sigmoid(s + bias),
                        log_survival=lambda s, bias: -softplus(s + bias), params={"bias": -1.0},
                        left_over="current", name="shifted_stick_breaking"),
        mask=attn.mask(lambda i, j: j < i, name="before")).text


def _stick_breaking_source(name):
    return _shifted_stick_breaking() if name == "shifted" else EXAMPLES / f"{name}.mlir"


def _stick_breaking_case(name, B, H, Nq, Nk, query_start, key_lengths, dtype, seed, H_KV=None):
    """Inputs (rounded to `dtype`, float64) and test_stick_breaking's float64 reference:
    O and its gradients by q, k, v (and the shift `bias` of "shifted"), mask j < i."""
    from test_stick_breaking import reference as stick_breaking_reference

    H_KV = H_KV or H
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, Nq, D, generator=g, dtype=torch.float64)
    k, v = (torch.randn(B, H_KV, Nk, D, generator=g, dtype=torch.float64) for _ in range(2))
    dout = torch.randn(B, H, Nq, D, generator=g, dtype=torch.float64)
    q, k, v, dout = (t.to(dtype).double() for t in (q, k, v, dout))
    i = query_start + torch.arange(Nq)[:, None]
    keep = (torch.arange(Nk)[None, :] < i).expand(B, 1, Nq, Nk)
    if key_lengths is not None:
        keep = keep & (torch.arange(Nk) < key_lengths[:, None, None, None])
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    bias = torch.tensor(-1.0, dtype=torch.float64, requires_grad=True)
    expand = lambda t: t.repeat_interleave(H // H_KV, dim=1)
    out = stick_breaking_reference(leaves[0], expand(leaves[1]), expand(leaves[2]), keep,
                                   name != "stick_breaking", bias if name == "shifted" else None,
                                   key_lengths=key_lengths, query_start=query_start)
    wrt = leaves + ([bias] if name == "shifted" else [])
    grads = torch.autograd.grad(out, wrt, dout)
    want = {"O": out.detach(), "dq": grads[0], "dk": grads[1], "dv": grads[2]}
    if name == "shifted":
        want["dparams"] = grads[3].reshape(1)
    return (q, k, v, dout), want


def _run_with_params(kern, inputs, dtype, **options):
    """O and the gradients of the Triton kernel (run), with query_start and key_start."""
    q, k, v, dout = inputs
    leaves = [t.to(dtype).requires_grad_(True) for t in (q, k, v)]
    params = kern.initial_params().requires_grad_(True)
    out = kern(*leaves, params, **options)
    out.backward(dout.to(dtype))
    got = {"O": out.detach().double(), "dq": leaves[0].grad.double(),
           "dk": leaves[1].grad.double(), "dv": leaves[2].grad.double()}
    if params.numel():
        got["dparams"] = params.grad.double()
    return got


STICK_BREAKING = pytest.mark.parametrize(
    "name", ["stick_breaking", "stick_breaking_left_over", "shifted"])


@STICK_BREAKING
@pytest.mark.parametrize("Nq,Nk,query_start,causal,padded", [
    (40, 40, 0, False, True),    # key padding, N a multiple of neither tile
    (40, 40, 0, True, False),    # causal on top of the mask: the same pairs, fewer tiles
    (21, 37, 16, True, True),    # Nq != Nk at a query start (the left-over's key moves)
    (1, 37, 36, False, False),   # a decoder step: Nq = 1 against every key
])
def test_stick_breaking_forward_and_gradients(name, Nq, Nk, query_start, causal, padded):
    """A scan's kernels (f32): O, dq, dk, dv (and dbias) against the float64 reference;
    attn_fwd stores row_max = S = log r <= 0 and row_sum = 1."""
    lengths = torch.tensor([Nk, Nk - 9]) if padded else None
    inputs, want = _stick_breaking_case(name, 2, 2, Nq, Nk, query_start, lengths,
                                        torch.float32, helpers.seed_of(f"sb-{Nq}-{Nk}"))
    kern = kernel(_stick_breaking_source(name))
    got = _run_with_params(kern, inputs, torch.float32, is_causal=causal, key_lengths=lengths,
                              query_start=query_start)
    assert_close(got, want, context=f"{name} {Nq}x{Nk}")
    starts = (torch.full((2,), query_start), torch.zeros(2, dtype=torch.int64))
    q, k, v, _ = (t.float().to(DEVICE) for t in inputs)
    _, row_max, row_sum = getattr(kern, "kern", kern).forward(
        q, k, v, kern.initial_params(device=DEVICE), causal, lengths, positions=starts)
    assert torch.equal(row_sum.cpu(), torch.ones_like(row_sum.cpu()))
    assert bool((row_max.cpu() <= 0).all())


@STICK_BREAKING
def test_stick_breaking_bfloat16(name):
    """bf16 q, k, v (w and dS rounded to bf16 for the dots), GQA: within four of bf16's
    eps of the reference on the rounded inputs."""
    inputs, want = _stick_breaking_case(name, 1, 4, 29, 29, 0, None, torch.bfloat16,
                                        helpers.seed_of("sb-bf16"), H_KV=2)
    got = _run_with_params(kernel(_stick_breaking_source(name)), inputs, torch.bfloat16,
                              is_causal=True)
    assert_close(got, want, tolerance=4 * torch.finfo(torch.bfloat16).eps,
                 context=f"{name} bf16")


def test_stick_breaking_gradients_are_deterministic():
    """dθ from per-program slots, S and B per key tile: the same bits twice."""
    inputs, _ = _stick_breaking_case("shifted", 2, 2, 40, 40, 0, None, torch.float32, 5)
    kern = kernel(_stick_breaking_source("shifted"))
    first, second = (_run_with_params(kern, inputs, torch.float32) for _ in range(2))
    for name in first:
        assert torch.equal(first[name], second[name]), name


def test_stick_breaking_decode_split_combines_chunks_nearest_first():
    """attn_fwd_split's chunks of 16 keys (S from 0 each) and attn_fwd_merge's scanCombine
    (O = O_near + e^(S_near)·O_far): a decoder step over 45 keys in 3 chunks, GQA."""
    inputs, want = _stick_breaking_case("stick_breaking", 1, 4, 1, 45, 45, None, torch.float32,
                                        helpers.seed_of("sb-split"), H_KV=2)
    kern = split_kernel(EXAMPLES / "stick_breaking.mlir")
    assert kern.key_split(*inputs[:2]) == (SPLITS, TILE)
    got = _run_with_params(kern, inputs, torch.float32, query_start=45)
    assert_close(got, want, context="stick_breaking decode split")


def test_stick_breaking_left_over_runs_unsplit():
    """A left-over's r_i·v_i needs V where attn_fwd_merge has none: its DECODE has no rows,
    so even forced chunks run attn_fwd (and stay exact)."""
    inputs, want = _stick_breaking_case("stick_breaking_left_over", 1, 2, 1, 37, 20, None,
                                        torch.float32, helpers.seed_of("sb-left-over"))
    kern = split_kernel(EXAMPLES / "stick_breaking_left_over.mlir")
    assert kern.module.DECODE["max_rows"] == 0 and kern.key_split(*inputs[:2]) is None
    assert_close(_run_with_params(kern, inputs, torch.float32, query_start=20), want,
                 context="left-over, forced split")


# --- implicit normalizers (sparsemax, α-entmax): τ_i solved per row ----------------------

IMPLICIT = pytest.mark.parametrize("name", ["sparsemax", "entmax15", "entmax_alpha"])


def _implicit_case(name, B, H, Nq, Nk, causal, key_lengths, dtype, seed, H_KV=None,
                   query_start=0):
    """Inputs (rounded to `dtype`, as float64) and test_implicit_normalizers' float64
    reference: O and its gradients by q, k, v (and α of entmax_alpha at its initial 1.5);
    causal: key j kept up to query row i's position query_start + i."""
    from test_implicit_normalizers import weights

    H_KV = H_KV or H
    g = torch.Generator().manual_seed(seed)
    q = 1.5 * torch.randn(B, H, Nq, D, generator=g, dtype=torch.float64)
    k = 1.5 * torch.randn(B, H_KV, Nk, D, generator=g, dtype=torch.float64)
    v = torch.randn(B, H_KV, Nk, D, generator=g, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, D, generator=g, dtype=torch.float64)
    q, k, v, dout = (t.to(dtype).double() for t in (q, k, v, dout))
    ix = general.indices(B, H, Nq, Nk)
    keep = torch.ones(B, H, Nq, Nk, dtype=torch.bool)
    if causal:
        keep = keep & (ix.j <= ix.i + query_start)
    if key_lengths is not None:
        keep = keep & (ix.j < key_lengths.view(B, 1, 1, 1))
    expand = lambda t: t.repeat_interleave(H // H_KV, dim=1)

    def attention(q_, k_, v_, alpha=1.5):
        s = q_ @ expand(k_).transpose(-1, -2) / D ** 0.5
        return weights(name, s, keep, alpha if name == "entmax_alpha" else None) @ expand(v_)

    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    out = attention(*leaves)
    grads = torch.autograd.grad(out, leaves, dout)
    want = {"O": out.detach(), "dq": grads[0], "dk": grads[1], "dv": grads[2]}
    if name == "entmax_alpha":  # dα by a central difference (the reference's α is a float)
        loss = lambda alpha: (attention(q, k, v, alpha) * dout).sum()
        want["dparams"] = ((loss(1.5 + 1e-5) - loss(1.5 - 1e-5)) / 2e-5).reshape(1)
    return (q, k, v, dout), want


@pytest.mark.parametrize("name", ["sparsemax", "entmax_alpha"])  # entmax15: bf16 below
@pytest.mark.parametrize("Nq,Nk,causal,padded", [
    (40, 40, False, True),   # key padding (one batch entry without keys), N not a multiple of 16
    (40, 40, True, False),   # causal: row 0 puts all its weight on its one key
    (21, 37, True, True),    # Nq != Nk
    (1, 37, False, False),   # a decoder step: Nq = 1 against every key
])
def test_implicit_forward_and_gradients(name, Nq, Nk, causal, padded):
    """τ_i by the bracket and Newton passes over the key tiles (attn_fwd), r_i by
    attn_bwd_dq's first pass: O, dq, dk, dv (and dα) against the float64 reference; a row
    without keys stores O = 0, row_max = row_sum = 0 and gets no gradient."""
    lengths = torch.tensor([Nk - 3, 0]) if padded else None
    inputs, want = _implicit_case(name, 2, 2, Nq, Nk, causal, lengths, torch.float32,
                                  helpers.seed_of(f"implicit-{name}-{Nq}-{Nk}-{causal}"))
    kern = kernel(EXAMPLES / f"{name}.mlir")
    got = _run_with_params(kern, inputs, torch.float32, is_causal=causal, key_lengths=lengths)
    assert_close(got, want, context=f"{name} {Nq}x{Nk}")
    q, k, v, _ = (t.float().to(DEVICE) for t in inputs)
    _, row_max, row_sum = getattr(kern, "kern", kern).forward(
        q, k, v, kern.initial_params(device=DEVICE), causal, lengths)
    if padded:
        assert (row_max.cpu()[1] == 0).all() and (row_sum.cpu()[1] == 0).all()
        assert (got["O"][1] == 0).all() and (got["dq"][1] == 0).all()
    live = row_sum.cpu()[0]
    assert torch.allclose(live, torch.ones_like(live), atol=1e-5)  # Σ_j w_ij = c = 1


def test_implicit_rows_at_a_query_start():
    """KV-cache rows: 5 queries at positions 30..34 over 37 keys, causal, key padding."""
    lengths = torch.tensor([37, 32])
    inputs, want = _implicit_case("entmax_alpha", 2, 2, 5, 37, True, lengths, torch.float32,
                                  helpers.seed_of("implicit-query-start"), query_start=30)
    got = _run_with_params(kernel(EXAMPLES / "entmax_alpha.mlir"), inputs, torch.float32,
                           is_causal=True, key_lengths=lengths, query_start=30)
    assert_close(got, want, context="entmax_alpha at a query start")


@IMPLICIT
def test_implicit_bfloat16(name):
    """bf16 q, k, v (w and dS rounded to bf16 for the dots), GQA, causal."""
    inputs, want = _implicit_case(name, 1, 4, 29, 29, True, None, torch.bfloat16,
                                  helpers.seed_of(f"implicit-bf16-{name}"), H_KV=2)
    got = _run_with_params(kernel(EXAMPLES / f"{name}.mlir"), inputs, torch.bfloat16,
                              is_causal=True)
    assert_close(got, want, tolerance=4 * torch.finfo(torch.bfloat16).eps,
                 context=f"{name} bf16")


def test_implicit_gradients_are_deterministic():
    """dα from per-program slots, r_i from one pass per row block: the same bits twice."""
    inputs, _ = _implicit_case("entmax_alpha", 2, 2, 40, 40, False, None, torch.float32, 7)
    kern = kernel(EXAMPLES / "entmax_alpha.mlir")
    first, second = (_run_with_params(kern, inputs, torch.float32) for _ in range(2))
    for name in first:
        assert torch.equal(first[name], second[name]), name


def test_implicit_runs_unsplit():
    """τ_i needs every key of its row, which no chunk has: DECODE has no rows, so even
    forced chunks run attn_fwd (and stay exact); the module has no decode kernels."""
    inputs, want = _implicit_case("sparsemax", 1, 2, 1, 40, False, None, torch.float32,
                                  helpers.seed_of("implicit-split"))
    kern = split_kernel(EXAMPLES / "sparsemax.mlir")
    assert kern.module.DECODE["max_rows"] == 0 and kern.key_split(*inputs[:2]) is None
    assert not hasattr(kern.module, "attn_fwd_split")
    assert_close(_run_with_params(kern, inputs, torch.float32), want,
                 context="sparsemax, forced split")
