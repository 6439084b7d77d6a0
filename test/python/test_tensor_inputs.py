"""Tensor inputs (attn.input / attn.read): a kernel reading a float table in its score mod
(slopes[h]), a learnable table at a clamped index (bias[h, j - i + 2]), an integer table
in its mask (doc[b, i] == doc[b, j]) and learnable tables in its numerator (w[h]) and
denominator (c[b, h, i]), against the eager float64 reference of test/reference/general.py:
O, dq, dk, dv, dparams and every learnable table's gradient, f32 and f64, generic loops
and tiled kernels. Also: broadcast (stride-0) tables, gradients that are the same bits
run to run, and the runtime's checks of the tables it is given."""

import pytest
import torch

import general
from conftest import REPO, compile_source
from helpers import check_close, seed_of

IR = """
attn.input @slopes : tensor<?xf32>
attn.input @bias learnable : tensor<?x5xf32>
attn.input @doc : tensor<?x?xi64>
attn.input @w learnable : tensor<?xf32>
attn.input @c learnable : tensor<?x?x?xf32>

// s = q·k/sqrt(d) - slopes[h]·|i - j| + bias[h, j - i + 2] (the bucket index clamped
// to [0, 4] by the read)
attn.score @s contract scaled_dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %slope = attn.read @slopes[%h] : f32
  %d = arith.subi %i, %j : index
  %d64 = arith.index_cast %d : index to i64
  %df = arith.sitofp %d64 : i64 to f32
  %distance = math.absf %df : f32
  %penalty = arith.mulf %slope, %distance : f32
  %t = arith.subf %s, %penalty : f32
  %ji = arith.subi %j, %i : index
  %two = arith.constant 2 : index
  %bucket = arith.addi %ji, %two : index
  %bias = attn.read @bias[%h, %bucket] : f32
  %u = arith.addf %t, %bias : f32
  attn.yield %u : f32
}

// packed sequences: a query sees the keys of its own document
attn.mask @same_doc {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %di = attn.read @doc[%b, %i] : i64
  %dj = attn.read @doc[%b, %j] : i64
  %keep = arith.cmpi eq, %di, %dj : i64
  attn.yield %keep : i1
}

// g = e^(s + w[h]), h = e^s·(1 + c[b, h, i]²)
attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %w = attn.read @w[%h] : f32
    %x = arith.addf %s, %w : f32
    %e = math.exp %x : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c = attn.read @c[%b, %h, %i] : f32
    %cc = arith.mulf %c, %c : f32
    %one = arith.constant 1.0 : f32
    %f = arith.addf %one, %cc : f32
    %e = math.exp %s : f32
    %r = arith.mulf %e, %f : f32
    attn.yield %r : f32
  }
}
attn.kernel @tables normalizer(@n) score(@s) mask(@same_doc)
"""

NAMES = ["slopes", "bias", "doc", "w", "c"]
LEARNABLE = ["bias", "w", "c"]


def reference(q, k, v, slopes, bias, doc, w, c, is_causal=False, lengths=None):
    def score(q, k, ix):
        s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        distance = (ix.i - ix.j).abs().to(q.dtype)
        bucket = torch.clamp(ix.j - ix.i + 2, 0, 4)
        return s - slopes[ix.h] * distance + bias[ix.h, bucket]

    keep = lambda ix: doc[ix.b, ix.i] == doc[ix.b, ix.j]
    g = lambda s, ix: torch.exp(s + w[ix.h])
    h = lambda s, ix: torch.exp(s) * (1 + c[ix.b, ix.h, ix.i] ** 2)
    return general.attention(q, k, v, score, g, h, keep, is_causal=is_causal,
                             key_lengths=lengths)


@pytest.fixture(scope="module")
def kernel(attn_mod, tmp_path_factory):
    return attn_mod.load(compile_source(IR, tmp_path_factory.mktemp("tables"), "tables"))


def make_case(B, H, Nq, Nk, d, dv, seed):
    gen = torch.Generator().manual_seed(seed)
    rnd = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)
    q, k, v, dout = rnd(B, H, Nq, d), rnd(B, H, Nk, d), rnd(B, H, Nk, dv), rnd(B, H, Nq, dv)
    N = max(Nq, Nk)
    # documents of random lengths packed along the sequence
    doc = torch.cumsum((torch.rand(B, N, generator=gen) < 0.15).to(torch.int64), dim=1)
    tables = {"slopes": 2.0 ** (-8 * torch.arange(1, H + 1, dtype=torch.float64) / H),
              "bias": 0.5 * rnd(H, 5), "doc": doc, "w": 0.3 * rnd(H), "c": 0.7 * rnd(B, H, Nq)}
    return q, k, v, dout, tables


def run(kernel, q, k, v, dout, tables, dt, is_causal=False, lengths=None):
    leaves = [t.detach().to(dt).clone().requires_grad_(True) for t in (q, k, v)]
    given = {n: (t.to(dt).clone().requires_grad_(n in LEARNABLE) if t.is_floating_point()
                 else t.clone()) for n, t in tables.items()}
    O = kernel(*leaves, None, is_causal, lengths, inputs=given)
    wanted = leaves + [given[n] for n in LEARNABLE]
    grads = torch.autograd.grad(O, wanted, grad_outputs=dout.to(dt))
    got = {"O": O.detach(), "dq": grads[0], "dk": grads[1], "dv": grads[2]}
    got.update({f"d{n}": g for n, g in zip(LEARNABLE, grads[3:])})
    return got


SHAPES = {"generic": (2, 3, 9, 12, 8, 5), "tiled": (2, 2, 37, 41, 32, 32)}


@pytest.mark.parametrize("dt", [torch.float64, torch.float32])
@pytest.mark.parametrize("masks", ["none", "causal+pad"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_tables_match_reference(kernel, shape, masks, dt):
    B, H, Nq, Nk, d, dv = SHAPES[shape]
    q, k, v, dout, tables = make_case(B, H, Nq, Nk, d, dv, seed_of("tables", shape, masks))
    is_causal = masks != "none"
    lengths = torch.tensor([Nk, Nk - 4]) if is_causal else None
    got = run(kernel, q, k, v, dout, tables, dt, is_causal, lengths)
    want = general.attention_and_grads(
        lambda q, k, v, *t: reference(q, k, v, *t, is_causal=is_causal, lengths=lengths),
        q, k, v, dout, [tables[n] for n in NAMES])
    for n, name in enumerate(NAMES):
        grad = want.pop(f"d{n}")
        if name in LEARNABLE:
            want[f"d{name}"] = grad
    names = ["O", "dq", "dk", "dv"] + [f"d{n}" for n in LEARNABLE]
    check_close(got, want, dt, context=f"tables {shape} {masks} {dt}", names=names)
    for n in LEARNABLE:   # every learnable table really gets a gradient
        assert got[f"d{n}"].abs().sum() > 0, n


def test_manifest_lists_the_inputs(kernel):
    assert kernel.input_names == NAMES
    assert [(i["element"], i["shape"], i["learnable"]) for i in kernel.inputs] == [
        ("float", (None,), False), ("float", (None, 5), True), ("i64", (None, None), False),
        ("float", (None,), True), ("float", (None, None, None), True)]


def test_broadcast_tables(kernel):
    """Stride-0 views are read without a copy and their gradients summed by autograd
    over the broadcast dims: the same as the materialised tables."""
    B, H, Nq, Nk, d, dv = 2, 3, 9, 12, 8, 8
    q, k, v, dout, tables = make_case(B, H, Nq, Nk, d, dv, seed_of("broadcast"))
    row = tables["c"][:1, :1, :].clone()                          # [1, 1, Nq]
    expanded = dict(tables, c=row.expand(B, H, Nq))
    dense = dict(tables, c=row.expand(B, H, Nq).clone())
    got = run(kernel, q, k, v, dout, expanded, torch.float64)
    want = run(kernel, q, k, v, dout, dense, torch.float64)
    for n in got:
        assert torch.allclose(got[n], want[n], rtol=1e-12, atol=1e-12), n


def test_table_gradients_are_deterministic(kernel):
    """Per-thread partial gradients reduced in a fixed order: the same bits run to run."""
    B, H, Nq, Nk, d, dv = 4, 4, 33, 33, 32, 32
    q, k, v, dout, tables = make_case(B, H, Nq, Nk, d, dv, seed_of("determinism"))
    first = run(kernel, q, k, v, dout, tables, torch.float32)
    for _ in range(3):
        again = run(kernel, q, k, v, dout, tables, torch.float32)
        for n in LEARNABLE:
            assert torch.equal(first[f"d{n}"], again[f"d{n}"]), n


def test_table_errors(kernel):
    q = torch.randn(2, 3, 5, 8)
    _, _, _, _, tables = make_case(2, 3, 5, 5, 8, 8, 0)
    ok = {n: (t.float() if t.is_floating_point() else t) for n, t in tables.items()}
    with pytest.raises(RuntimeError, match=r"input bias has extent 4 in dim 1, expected bias "
                                           r"\(float \[\?, 5\], learnable\)"):
        kernel(q, q, q, inputs=dict(ok, bias=torch.zeros(3, 4)))
    with pytest.raises(RuntimeError, match=r"input doc has dtype int32, expected int64 "
                                           r"\(the manifest's i64\)"):
        kernel(q, q, q, inputs=dict(ok, doc=ok["doc"].int()))
    with pytest.raises(RuntimeError, match=r"input slopes requires grad but kernel tables "
                                           r"declares it without 'learnable'"):
        kernel(q, q, q, inputs=dict(ok, slopes=ok["slopes"].requires_grad_()))
    with pytest.raises(RuntimeError, match=r"missing: \['c'\]"):
        kernel(q, q, q, inputs={n: t for n, t in ok.items() if n != "c"})


NAMED_IR = """
attn.input @rows learnable : tensor<?x?x?xf32> dims(B, H, Nq)
attn.input @kv : tensor<?x?xf32> dims(Hkv, Nk)
attn.input @fixed : tensor<?x3xf32> dims(H, 3)

attn.score @s contract scaled_dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %r = attn.read @rows[%b, %h, %i] : f32
  %k = attn.read @kv[%h, %j] : f32
  %zero = arith.constant 0 : index
  %f = attn.read @fixed[%h, %zero] : f32
  %t = arith.addf %s, %r : f32
  %u = arith.addf %t, %k : f32
  %w = arith.addf %u, %f : f32
  attn.yield %w : f32
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @named_attention normalizer(@softmax) score(@s)
"""


@pytest.fixture(scope="module")
def named(attn_mod, tmp_path_factory):
    return attn_mod.load(compile_source(NAMED_IR, tmp_path_factory.mktemp("named"), "named"))


def test_named_extents_are_checked_at_every_call(named):
    """Each extent named B, H, Hkv, Nq or Nk must equal that dimension of the call
    (grouped-query: H = 4 query heads, Hkv = 2); a wrong one is an error naming the
    input, the dim, the expected size with its name and the size given."""
    B, H, Hkv, Nq, Nk = 2, 4, 2, 5, 7
    q = torch.randn(B, H, Nq, 8)
    k, v = torch.randn(B, Hkv, Nk, 8), torch.randn(B, Hkv, Nk, 8)
    ok = {"rows": torch.randn(B, H, Nq), "kv": torch.randn(Hkv, Nk), "fixed": torch.randn(H, 3)}
    assert named(q, k, v, inputs=ok).shape == (B, H, Nq, 8)
    assert [i["shape"] for i in named.inputs] == [("B", "H", "Nq"), ("Hkv", "Nk"), ("H", 3)]
    wrong = {"rows": (torch.randn(B + 1, H, Nq), 0, "B = 2", 3),
             "kv": (torch.randn(H, Nk), 0, "Hkv = 2", 4)}
    wrong["rows_h"] = (torch.randn(B, Hkv, Nq), 1, "H = 4", 2)
    wrong["rows_nq"] = (torch.randn(B, H, Nk), 2, "Nq = 5", 7)
    wrong["kv_nk"] = (torch.randn(Hkv, Nq), 1, "Nk = 7", 5)
    for key, (table, dim, expected, given) in wrong.items():
        name = key.split("_")[0]
        with pytest.raises(RuntimeError, match=rf"input {name} has extent {given} in dim {dim}, "
                                               rf"expected {expected} \("):
            named(q, k, v, inputs=dict(ok, **{name: table}))


def test_fox_table_in_the_wrong_layout_is_an_error(attn_mod, tmp_path_factory):
    """FoX's c declared [B, H, Nq] and passed as [B, N, H] (a transpose away from right)
    is refused naming the dim, where clamped reads used to give a wrong output."""
    fox = attn_mod.load(compile_source(REPO / "examples" / "families" / "fox.mlir",
                                       tmp_path_factory.mktemp("fox"), "fox"))
    B, H, N = 2, 4, 37
    q = torch.randn(B, H, N, 16)
    c = torch.cumsum(torch.nn.functional.logsigmoid(torch.randn(B, H, N)), dim=-1)
    assert torch.isfinite(fox(q, q, q, inputs={"c": c})).all()
    with pytest.raises(RuntimeError, match=r"attn::attention_forward: input c has extent 37 in "
                                           r"dim 1, expected H = 4 \(the heads of q; declared c "
                                           r"\(float \[B, H, Nq\], learnable\)\), got shape "
                                           r"\[2, 37, 4\]"):
        fox(q, q, q, inputs={"c": c.transpose(1, 2).contiguous()})
