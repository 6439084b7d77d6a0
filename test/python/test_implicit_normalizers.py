"""Implicit normalizers (issue 37 item 3; docs/normalizer-classes.md): w_ij = g(s_ij - τ_i)
with τ_i solved per row so that Σ_j w_ij = 1, against the eager float64 references of
test/reference/row_normalizers.py: O and every gradient, f32 and f64, no mask, causal,
key padding, a batch entry without keys, rows whose weight sits on one key, GQA, KV-cache
rows at their positions, and scores of ±1e4 (a common offset the threshold absorbs).

    sparsemax     examples/normalizers/sparsemax.mlir   (g = max(x, 0))
    entmax15      examples/normalizers/entmax15.mlir    (g = (max(x, 0)/2)²)
    entmax_alpha  examples/normalizers/entmax_alpha.mlir (α learnable; dα against a
                  central difference of the bisection reference)
(The front-end's sparsemax and entmax15, examples/frontend/normalizers.py, are checked
bit-identical to these files by test_frontend_examples.py.)
"""
import math

import pytest
import torch

import attn
import general
import row_normalizers
from conftest import REPO, kernels_from
from helpers import check_close, seed_of

DTYPES = {"f64": torch.float64, "f32": torch.float32}
EXAMPLES = REPO / "examples" / "normalizers"


# A score mod with a learnable param (ALiBi's slope) and a mask region (a window of
# |i - j| <= 70: the keys past 83 form a block the mask skips whole) around entmax15.
ALIBI_WINDOW = (EXAMPLES / "entmax15.mlir").read_text().split("attn.kernel")[0] + """
attn.score @alibi contract scaled_dot params(slope = 0.25) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %slope: f32):
  %delta = arith.subi %i, %j : index
  %delta64 = arith.index_cast %delta : index to i64
  %distance = arith.sitofp %delta64 : i64 to f32
  %absolute = math.absf %distance : f32
  %penalty = arith.mulf %slope, %absolute : f32
  %biased = arith.subf %s, %penalty : f32
  attn.yield %biased : f32
}
attn.mask @window {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %width = arith.constant 70 : index
  %j_reach = arith.addi %j, %width : index
  %i_reach = arith.addi %i, %width : index
  %after_start = arith.cmpi uge, %j_reach, %i : index
  %before_end = arith.cmpi uge, %i_reach, %j : index
  %keep = arith.andi %after_start, %before_end : i1
  attn.yield %keep : i1
}
attn.kernel @alibi_window_entmax15 normalizer(@entmax15) score(@alibi) mask(@window)
"""

SOURCES = {
    "sparsemax": lambda: EXAMPLES / "sparsemax.mlir",
    "entmax15": lambda: EXAMPLES / "entmax15.mlir",
    "entmax_alpha": lambda: EXAMPLES / "entmax_alpha.mlir",
    "alibi_window": lambda: ALIBI_WINDOW,
}
compiled = kernels_from(lambda name: SOURCES[name]())

ALPHA = 1.3  # entmax_alpha's α in the tests (its initial value is 1.5)


def weights(name, s, keep, alpha=None):
    if name == "sparsemax":
        return row_normalizers.sparsemax(s, keep)
    if name == "entmax15":
        return row_normalizers.entmax15(s, keep)
    return row_normalizers.entmax_bisect(s, keep, alpha)


def reference(name, is_causal, key_lengths, alpha=None, shifted=False):
    """ref(q, k, v) -> O in the inputs' dtype (float64 for the reference, float32 for the
    eager float32 comparison of extreme scores). `shifted`: the weights of s minus its row
    max (detached), the same function (w is shift-invariant, Σ_j ∂w/∂s_j = 0), whose
    sort-based float64 reference stays exact at |s| ~ 1e4 (entmax15's Σ x² of ~1e8
    otherwise loses τ to ~1e-8)."""
    def ref(q, k, v, *params):
        B, H, Nq, Nk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
        ix = general.indices(B, H, Nq, Nk)
        keep = torch.ones(B, H, Nq, Nk, dtype=torch.bool)
        if is_causal:
            keep = keep & (ix.j <= ix.i)
        if key_lengths is not None:
            keep = keep & (ix.j < key_lengths.view(B, 1, 1, 1))
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if shifted:
            s = s - s.amax(-1, keepdim=True).detach()
        return weights(name, s, keep, alpha) @ v
    return ref


def run(kernel, q, k, v, dout, params, is_causal, key_lengths, dtype):
    leaves = [t.to(dtype).clone().requires_grad_() for t in (q, k, v)]
    p = None if params is None else params.to(dtype).clone().requires_grad_()
    O = kernel(*leaves, p, is_causal, key_lengths)
    wanted = leaves + ([p] if p is not None else [])
    grads = torch.autograd.grad(O, wanted, grad_outputs=dout.to(dtype))
    got = dict(zip(("dq", "dk", "dv", "dparams"), grads), O=O.detach())
    return got


MASKS = {"none": (False, None), "causal": (True, None),
         "padding": (False, torch.tensor([150, 37])), "causal_padding": (True, torch.tensor([9, 0]))}


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("name", ["sparsemax", "entmax15", "entmax_alpha"])
def test_matches_reference(compiled, name, mask, dt):
    """Nk = 150 keys: three key blocks, of which the threshold skips some; causal rows of
    1 to 13 keys (row 0: all weight on its one key); causal_padding's second batch entry
    has no keys (O = 0, no gradient)."""
    kernel, dtype = compiled(name), DTYPES[dt]
    is_causal, key_lengths = MASKS[mask]
    B, H, Nq, Nk, d, dv = 2, 2, 13, 150, 8, 5
    gen = torch.Generator().manual_seed(seed_of("implicit", name, mask))
    q = 1.5 * torch.randn(B, H, Nq, d, generator=gen, dtype=torch.float64)
    k = 1.5 * torch.randn(B, H, Nk, d, generator=gen, dtype=torch.float64)
    v = torch.randn(B, H, Nk, dv, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, dv, generator=gen, dtype=torch.float64)
    alpha = ALPHA if name == "entmax_alpha" else None
    params = torch.tensor([ALPHA], dtype=torch.float64) if alpha else None
    got = run(kernel, q, k, v, dout, params, is_causal, key_lengths, dtype)
    ref = reference(name, is_causal, key_lengths, alpha)
    want = general.attention_and_grads(ref, q, k, v, dout)
    names = ["O", "dq", "dk", "dv"]
    check_close(got, want, dtype, context=f"{name} {mask} {dt}", names=names)
    if key_lengths is not None and (key_lengths == 0).any():
        assert (got["O"][1] == 0).all() and all(got[n][1].abs().max() == 0 for n in names[1:])
    # The weights are sparse (exact zeros) and sum to 1 on rows with keys.
    w = weights(name, q @ k.transpose(-1, -2) / math.sqrt(d),
                torch.ones(B, H, Nq, Nk, dtype=torch.bool), alpha)
    assert (w == 0).float().mean() > 0.5
    if alpha:
        def loss(a):
            f = reference(name, is_causal, key_lengths, a)
            return (f(q, k, v) * dout).sum().item()
        step = 1e-5
        dalpha = (loss(ALPHA + step) - loss(ALPHA - step)) / (2 * step)
        tol = 1e-6 if dtype == torch.float64 else 2e-3
        assert abs(got["dparams"].item() - dalpha) <= tol * max(1.0, abs(dalpha)), \
            (got["dparams"].item(), dalpha)


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
@pytest.mark.parametrize("offset", [1e4, -1e4])
def test_extreme_scores(compiled, name, offset, dt):
    """s_ij = offset·(q_i·u) + O(1): every row's scores sit near ±1e4 with O(1) gaps. The
    threshold absorbs the offset (w is shift-invariant): finite, and as close to the
    float64 reference as eager float32 gets (the gaps are resolved to 1e4's ulp)."""
    kernel, dtype = compiled(name), DTYPES[dt]
    B, H, Nq, Nk, d, dv = 1, 2, 6, 70, 8, 4
    gen = torch.Generator().manual_seed(seed_of("implicit-extreme", name, offset))
    q = torch.randn(B, H, Nq, d, generator=gen, dtype=torch.float64)
    q[..., 0] = 1.0
    u = torch.zeros(d, dtype=torch.float64)
    u[0] = offset * math.sqrt(d)
    k = torch.randn(B, H, Nk, d, generator=gen, dtype=torch.float64) + u
    v = torch.randn(B, H, Nk, dv, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, dv, generator=gen, dtype=torch.float64)
    got = run(kernel, q, k, v, dout, None, False, None, dtype)
    ref = reference(name, False, None, shifted=True)
    want = general.attention_and_grads(ref, q, k, v, dout)
    assert all(torch.isfinite(t).all() for t in got.values())
    eager = None
    if dtype == torch.float32:
        leaves = [t.to(dtype).clone().requires_grad_() for t in (q, k, v)]
        O = ref(*leaves)
        eager = dict(zip(("dq", "dk", "dv"),
                         torch.autograd.grad(O, leaves, grad_outputs=dout.to(dtype))),
                     O=O.detach())
    check_close(got, want, dtype, eager=eager, terms=abs(offset),
                context=f"{name} {offset} {dt}", names=["O", "dq", "dk", "dv"])


@pytest.mark.parametrize("dt", list(DTYPES))
def test_score_mod_and_mask_region(compiled, dt):
    """entmax15 behind ALiBi (learnable slope: its gradient flows through ds) and a window
    mask region, against the float64 reference."""
    kernel, dtype = compiled("alibi_window"), DTYPES[dt]
    B, H, Nq, Nk, d, dv = 1, 2, 13, 150, 8, 5
    gen = torch.Generator().manual_seed(seed_of("implicit-alibi-window"))
    q, k = (1.5 * torch.randn(B, H, n, d, generator=gen, dtype=torch.float64) for n in (Nq, Nk))
    v = torch.randn(B, H, Nk, dv, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, dv, generator=gen, dtype=torch.float64)
    slope = torch.tensor([0.05], dtype=torch.float64)
    got = run(kernel, q, k, v, dout, slope, False, None, dtype)

    def ref(q, k, v, slope):
        ix = general.indices(B, H, Nq, Nk)
        distance = (ix.i - ix.j).abs().to(q.dtype)
        s = q @ k.transpose(-1, -2) / math.sqrt(d) - slope[0] * distance
        return row_normalizers.entmax15(s, distance <= 70) @ v

    want = general.attention_and_grads(ref, q, k, v, dout, [slope])
    want["dparams"] = want["d0"]
    check_close(got, want, dtype, context=f"alibi_window {dt}")


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_one_key_takes_all_weight(compiled, name):
    """A key whose score exceeds the others by more than g⁻¹(1) takes weight exactly 1:
    O_i = v_j exactly, and ds = g'·(dP - r) = 0, so q and k get no gradient."""
    kernel = compiled(name)
    Nk, d = 40, 4
    q = torch.zeros(1, 1, 3, d, dtype=torch.float64)
    q[..., 0] = 1.0
    k = torch.zeros(1, 1, Nk, d, dtype=torch.float64)
    k[0, 0, 17, 0] = 10.0                      # s = 10/sqrt(d) = 5 against 0
    v = torch.randn(1, 1, Nk, 3, dtype=torch.float64)
    got = run(kernel, q, k, v, torch.ones(1, 1, 3, 3, dtype=torch.float64), None, False, None,
              torch.float64)
    assert torch.equal(got["O"], v[:, :, 17:18].expand(1, 1, 3, 3))
    assert got["dq"].abs().max() == 0 and got["dk"].abs().max() == 0
    assert torch.equal(got["dv"][0, 0, 17], torch.full((3,), 3.0, dtype=torch.float64))


def test_frontend_declaration():
    """The front-end writes `denominator threshold c`; attn.threshold refuses c <= 0."""
    n = attn.normalizer(numerator=lambda s: attn.relu(s), denominator=attn.threshold(2.5),
                        name="sparsemax")
    assert "denominator threshold 2.5" in str(attn.kernel(n))
    with pytest.raises(attn.TraceError, match="expected a number c > 0"):
        attn.threshold(0.0)


def test_context_parallel_refuses_implicit(compiled):
    from attn import context_parallel
    q = torch.zeros(1, 1, 4, 8)
    with pytest.raises(RuntimeError, match="is implicit"):
        context_parallel.context_parallel_attention(q, q, q, compiled("sparsemax"))


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_trains_in_the_demo_model(compiled, name):
    """The training demo's model (examples/train/train.py, causal) with sparsemax or
    1.5-entmax attention: the loss falls over 60 steps (from ln 8 ≈ 2.08 by about 0.1, as
    with eager softmax)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("attn_train_demo",
                                                  REPO / "examples" / "train" / "train.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    args = demo.parser().parse_args(
        ["--steps", "60", "--base", "8", "--tau", "2", "--seq-len", "16", "--batch", "16",
         "--d-model", "32", "--heads", "2", "--layers", "1", "--artifact",
         str(compiled(name).path)])
    history = demo.train(args, torch.float32, log=None)
    first = sum(loss for _, loss, _ in history[:10]) / 10
    last = sum(loss for _, loss, _ in history[-10:]) / 10
    assert math.isfinite(last) and last < first - 0.05, (name, first, last)


def test_attention_weights_are_the_sparse_weights(compiled):
    """Kernel.attention_weights (the kernel's own forward on one-hot values) gives the
    sparsemax weights: exact zeros below τ_i, rows summing to 1."""
    gen = torch.Generator().manual_seed(seed_of("implicit-weights"))
    q = 2 * torch.randn(1, 2, 5, 8, generator=gen, dtype=torch.float64)
    k = 2 * torch.randn(1, 2, 90, 8, generator=gen, dtype=torch.float64)
    w = compiled("sparsemax").attention_weights(q, k, is_causal=True)
    keep = torch.ones(1, 2, 5, 90, dtype=torch.bool).tril()
    want = row_normalizers.sparsemax(q @ k.transpose(-1, -2) / math.sqrt(8), keep)
    assert (w - want).abs().max() < 1e-12 and torch.equal(w == 0, want == 0)


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_gqa_and_decoding_rows_at_positions(compiled, name):
    """4 query heads over 2 kv heads, and a KV-cache step: the last 3 queries at
    query_start = N - 3 (a [B] tensor: N - 3 and N - 5), causal bottom-right, give the
    whole sequence's rows of those positions, forward and every gradient (dk, dv summed
    over each kv head's query heads), against the float64 reference."""
    kernel = compiled(name)
    B, H, H_KV, N, Nq, d = 2, 4, 2, 70, 3, 8
    gen = torch.Generator().manual_seed(seed_of("implicit-gqa-positions", name))
    q = 1.5 * torch.randn(B, H, N, d, generator=gen, dtype=torch.float64)
    k = 1.5 * torch.randn(B, H_KV, N, d, generator=gen, dtype=torch.float64)
    v = torch.randn(B, H_KV, N, d, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, d, generator=gen, dtype=torch.float64)
    first = torch.tensor([N - Nq, N - Nq - 2])
    rows = first.view(B, 1) + torch.arange(Nq).view(1, Nq)            # [B, Nq] positions
    pick = rows.view(B, 1, Nq, 1).expand(B, H, Nq, d)
    group = H // H_KV

    def ref(q_, k_, v_):
        whole = reference(name, True, None)(q_, k_.repeat_interleave(group, 1),
                                             v_.repeat_interleave(group, 1))
        return whole.gather(2, pick)
    want = general.attention_and_grads(ref, q, k, v, dout)

    leaves = [t.clone().requires_grad_() for t in (q.gather(2, pick), k, v)]
    O = kernel(*leaves, None, True, None, query_start=first)
    grads = torch.autograd.grad(O, leaves, grad_outputs=dout)
    got = dict(zip(("dq", "dk", "dv"), grads), O=O.detach())
    want["dq"] = want["dq"].gather(2, pick)
    check_close(got, want, torch.float64, context=f"{name} GQA at positions",
                names=["O", "dq", "dk", "dv"])
