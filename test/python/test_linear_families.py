"""examples/families/ (linear attention causal, ReLU-kernel, cosFormer, LDN diffusion)
against the eager float64 reference (test/reference/reference.py): O, dq, dk, dv and
every param gradient (LDN: Δt and σ), with runtime causal flags, key padding and
shapes that cross the linear form's 64-key chunks. Tolerances as in test_numerics.py.

The non-causal elu+1 linear attention is examples/normalizers/linear.mlir, covered
(kernelised as well) by test_numerics.py.
"""
import ctypes

import pytest
import torch

import reference as ref
from conftest import REPO, compile_source
from helpers import (case_params, check_close, compiled_grads, eager_f32, make_inputs,
                     memref_of, reference_grads, seed_of)

FAMILIES = REPO / "examples" / "families"
KERNELISED = ["linear_causal", "relu_kernel", "cosformer", "linear_params", "nonlocal"]
NAMES = KERNELISED + ["ldn"]
DTYPES = {"f64": torch.float64, "f32": torch.float32}

# (B, H, Nq, Nk, d, dv)
SHAPES = {
    "sq17": (2, 3, 17, 17, 16, 16),
    "nq<nk": (1, 2, 5, 9, 8, 8),
    "nq>nk": (2, 1, 13, 6, 8, 8),
    "n1d3": (1, 1, 1, 1, 3, 3),
    "d3dv5": (2, 2, 7, 11, 3, 5),
    "chunks": (1, 2, 150, 140, 24, 12),      # several 64-key chunks, Nq != Nk
    "chunks_nk>nq": (1, 1, 70, 200, 8, 4),
    "d64": (1, 2, 130, 130, 64, 64),
}
MASKS = {"none": (False, False), "causal": (True, False), "pad": (False, True),
         "causal+pad": (True, True)}


# Kernelised kernels that exercise what the examples do not: learnable a, b in
# g = a·s, h = b·s (their gradients), and identity features with a scale and a
# count denominator (the non-local dot product of DESIGN.md's table).
TEST_KERNELS = {
    "linear_params": """
attn.score @elu contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = math.exp %x : f32
  %neg = arith.cmpf olt, %x, %zero : f32
  %xp1 = arith.addf %x, %one : f32
  %phi = arith.select %neg, %e, %xp1 : f32
  attn.yield %phi : f32
}
attn.normalizer @weighted params(alpha = 1.5, beta = 0.8) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %alpha: f32, %beta: f32):
    %g = arith.mulf %alpha, %s : f32
    attn.yield %g : f32
  }
  denominator epsilon 1.0e-06 {
  ^bb0(%s: f32, %b: index, %hx: index, %i: index, %j: index, %alpha: f32, %beta: f32):
    %h = arith.mulf %s, %beta : f32
    attn.yield %h : f32
  }
}
attn.kernel @linear_params normalizer(@weighted) score(@elu)
""",
    "nonlocal": """
attn.normalizer @identity {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @nonlocal normalizer(@identity)
""",
}


@pytest.fixture(scope="module")
def family(tmp_path_factory, attn_mod):
    out = tmp_path_factory.mktemp("families")
    built = {}

    def compile_family(name):
        if name not in built:
            source = TEST_KERNELS.get(name, FAMILIES / f"{name}.mlir")
            built[name] = str(compile_source(source, out, name))
        return built[name]
    return compile_family


FEATURES = {"linear_causal": ref.elu_plus_one, "relu_kernel": ref.pos, "cosformer": ref.pos,
            "linear_params": ref.elu_plus_one, "nonlocal": lambda x: x / x.shape[-1] ** 0.25}


def _kernelised_term_scale(name, q, k, v, params, dout, is_causal, lens):
    """{tensor: term scale} for the float32 allowance of quantities that cancel
    (helpers.TOL_F32_TERMS): dq_i = φ'(q_i)·Σ_j ds_ij w_j with every factor in
    absolute value, |ds_ij| <= (|dO_i|·|v_j| + |D_i|)/C_i, |φ'| <= 1 and |cos| <= 1."""
    f = lambda t: t.detach().to(torch.float64)
    q, k, v, dout = f(q), f(k), f(v), f(dout)
    nz = ref.NORMALIZERS[name]
    O, _, _, C = ref.attention_with_stats(name, q, k, v, f(params), is_causal, lens)
    B, H, Nq, _ = q.shape
    keep = ref.keep_mask(B, Nq, k.shape[2], is_causal or nz.causal, lens)
    C = torch.where(C != 0, C, torch.ones_like(C)).abs().unsqueeze(-1)
    D = (dout * O).sum(-1, keepdim=True).abs()
    ds = (torch.matmul(dout.abs(), v.abs().transpose(-1, -2)) + D) / C * keep
    phi = FEATURES[name]
    return {"O": 0.0, "dv": 0.0, "dparams": 0.0,
            "dq": torch.matmul(ds, phi(k).abs()).max().item(),
            "dk": torch.matmul(ds.transpose(-1, -2), phi(q).abs()).max().item()}


def _run(family, name, shape, mask, dt):
    B, H, Nq, Nk, d, dv = shape
    is_causal, padding = MASKS[mask]
    dtype = DTYPES[dt]
    q, k, v, dout, lens = make_inputs(name, B, H, Nq, Nk, d, dv, seed_of(name, shape, mask),
                                      padding, dtype)
    params = case_params(name, dtype)
    got = compiled_grads(family(name), q, k, v, params, dout, is_causal, lens)
    want = reference_grads(name, q, k, v, params, dout, is_causal, lens)
    eager = terms = None
    if dtype == torch.float32:
        eager = eager_f32(name, q, k, v, params, dout, is_causal, lens)
        if name in KERNELISED:
            terms = _kernelised_term_scale(name, q, k, v, params, dout, is_causal, lens)
    check_close(got, want, dtype, eager=eager, terms=terms, context=f"{name} shape={shape} mask={mask} {dt}",
                log_key=(name, dt))


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("name", NAMES)
def test_family_matches_reference(family, name, shape, mask, dt):
    _run(family, name, SHAPES[shape], mask, dt)


@pytest.mark.parametrize("name", NAMES)
def test_family_algorithm(attn_mod, family, name):
    """The linear-attention kernels take the linear-time form; LDN (e^s of a
    position-only score) is plain accumulation."""
    manifest = attn_mod.parse_manifest(torch.ops.attn.manifest(family(name)))
    want = "kernelised" if name in KERNELISED else "plain"
    assert manifest["algorithm"] == want, manifest


@pytest.mark.parametrize("name", NAMES)
def test_family_fully_masked_rows(family, name):
    q, k, v, dout, _ = make_inputs(name, 3, 2, 9, 12, 8, 4, seed_of("masked", name))
    lens = torch.tensor([0, 5, 0], dtype=torch.int64)
    params = case_params(name)
    got = compiled_grads(family(name), q, k, v, params, dout, False, lens)
    for n in ["O", "dq", "dk", "dv"]:
        for b in (0, 2):
            assert (got[n][b] == 0).all(), f"{name}: {n}[b={b}] not zero (key_lengths=0)"
    want = reference_grads(name, q, k, v, params, dout, False, lens)
    check_close(got, want, torch.float64, context=f"{name} fully masked rows")


@pytest.mark.parametrize("name", KERNELISED)
def test_kernelised_row_statistics(family, name):
    """The kernelised form keeps the ABI: row_max = 0 and row_sum = C_i."""
    q, k, v, _, lens = make_inputs(name, 2, 2, 70, 75, 8, 8, seed_of("stats", name), True)
    params = case_params(name)
    O, row_max, row_sum = torch.ops.attn.attention_forward(family(name), q, k, v, params,
                                                           True, lens)
    O_ref, _, _, C_ref = ref.attention_with_stats(name, q, k, v, params, True, lens)
    assert (O - O_ref).abs().max().item() <= 1e-9
    assert (row_max == 0).all()
    assert ((row_sum - C_ref).abs() / C_ref.abs()).max().item() <= 1e-9


def test_ldn_params_learnable(attn_mod, family):
    """σ and Δt of the LDN kernel get gradients that lower a loss under SGD."""
    kern = attn_mod.load(family("ldn"))
    assert list(kern.param_names) == ["dt", "sigma"]
    q, k, v, _, _ = make_inputs("ldn", 1, 2, 24, 24, 4, 8, seed_of("ldn-learn"))
    target = ref.attention("ldn", q, k, v, torch.tensor([0.3, 3.0], dtype=torch.float64))
    p = torch.nn.Parameter(kern.initial_params(torch.float64))
    opt = torch.optim.SGD([p], lr=2e-4)   # |dLoss/dΔt| ~ 400 at the start
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = ((kern(q, k, v, params=p) - target) ** 2).sum()
        loss.backward()
        assert p.grad is not None and (p.grad != 0).all()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses


# ------------------------------------------------ the ABI's query-block forward
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("name", ["linear_causal", "cosformer", "linear_params"])
def test_kernelised_forward_of_a_query_block(family, name, is_causal):
    """The runtime calls a kernelised forward with whole heads, but the ABI allows any
    [q_begin, q_end): rows 37..100 (causal: the key state of rows < 37 is built first)
    with key padding, called directly through the C entry point."""
    q, k, v, _, _ = make_inputs(name, 1, 1, 150, 140, 8, 5, seed_of("block", name))
    params = case_params(name)
    kv_len, begin, end = 120, 37, 101
    lib = ctypes.CDLL(family(name))
    fn = lib._mlir_ciface_attn_forward_f64
    o = torch.full((150, 5), float("nan"), dtype=torch.float64)
    row_max = torch.full((150,), float("nan"), dtype=torch.float64)
    row_sum = row_max.clone()
    args = [memref_of(t.contiguous()) for t in (q[0, 0], k[0, 0], v[0, 0])]
    no_count = torch.empty(0, dtype=torch.float64)                  # read only when partial
    args += [memref_of(o), memref_of(row_max), memref_of(row_sum), memref_of(no_count), memref_of(params)]
    no_tables = ctypes.c_void_p(None)                                 # no tensor inputs
    batch, head = ctypes.c_int64(0), ctypes.c_int64(0)                # ABI 5
    kv_begin, partial = ctypes.c_int64(0), ctypes.c_int64(0)          # whole rows
    fn(*[ctypes.byref(a) for a in args], no_tables, batch, head, ctypes.c_int64(begin),
       ctypes.c_int64(end), kv_begin, ctypes.c_int64(kv_len), ctypes.c_int64(int(is_causal)),
       partial, ctypes.c_int64(0), ctypes.c_int64(0))                 # ABI 8: positions
    want = ref.attention(name, q, k, v, params, is_causal, torch.tensor([kv_len]))[0, 0]
    assert (o[begin:end] - want[begin:end]).abs().max().item() <= 1e-9
    assert torch.isnan(o[:begin]).all() and torch.isnan(o[end:]).all(), "rows outside the block written"
    assert (row_max[begin:end] == 0).all()


@pytest.mark.parametrize("mask", ["causal", "pad", "causal+pad"])
@pytest.mark.parametrize("name", NAMES)
def test_unseen_keys_take_no_nan(family, name, mask):
    """Keys no query sees (causal with Nq < Nk: j >= Nq; padded: j >= key_lengths)
    holding NaN in k and v: every output and gradient stays finite, the unseen keys'
    dk, dv are 0, and the rest equals the run with finite values there. 150 keys
    span several 64-key chunks of the linear form, 70 queries end inside one."""
    is_causal, padding = MASKS[mask]
    q, k, v, dout, _ = make_inputs(name, 2, 2, 70, 150, 8, 6, seed_of("unseen", name, mask))
    lens = torch.tensor([150, 100], dtype=torch.int64) if padding else None
    seen = torch.zeros(2, 1, 150, 1, dtype=torch.bool)
    for b in range(2):
        end = 150 if lens is None else int(lens[b])
        seen[b, :, :min(end, 70) if is_causal else end] = True
    params = case_params(name)
    finite = compiled_grads(family(name), q, k, v, params, dout, is_causal, lens)
    poisoned = compiled_grads(family(name), q, k.masked_fill(~seen, float("nan")),
                              v.masked_fill(~seen, float("nan")), params, dout, is_causal, lens)
    for n, got in poisoned.items():
        assert torch.isfinite(got).all(), f"{name} {mask}: NaN reached {n}"
        assert torch.equal(got, finite[n]), f"{name} {mask}: {n} depends on unseen keys"
    for n in ("dk", "dv"):
        assert (poisoned[n].masked_select(~seen) == 0).all(), f"{name} {mask}: {n} of unseen keys"
