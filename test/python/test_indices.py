"""Every region sees the batch, head, query and key indices (b, h, i, j): a score mod, a
mask and normalizers (online and plain) that read all four, against the eager float64
reference of test/reference/general.py: O, dq, dk, dv and the params' gradients, f32
and f64, on the generic loops (dv != d) and the tiled kernels (d = dv = 32), with and
without causal masking and key padding."""

import pytest
import torch

import general
from conftest import compile_source
from helpers import check_close, compiled_grads, seed_of

# A score mod and a mask that read b, h, i and j. Converting an index to a float:
# arith.index_cast to i64, then arith.sitofp.
SCORE_AND_MASK = """
attn.score @indexed contract scaled_dot params(tilt = 0.3) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %tilt: f32):
  %b64 = arith.index_cast %b : index to i64
  %bf = arith.sitofp %b64 : i64 to f32
  %h64 = arith.index_cast %h : index to i64
  %hf = arith.sitofp %h64 : i64 to f32
  %d = arith.subi %i, %j : index
  %d64 = arith.index_cast %d : index to i64
  %df = arith.sitofp %d64 : i64 to f32
  %quarter = arith.constant 0.25 : f32
  %one = arith.constant 1.0 : f32
  %hs = arith.mulf %hf, %quarter : f32
  %temperature = arith.addf %one, %hs : f32
  %scaled = arith.mulf %s, %temperature : f32
  %bt = arith.mulf %bf, %tilt : f32
  %shifted = arith.addf %scaled, %bt : f32
  %step = arith.constant 0.02 : f32
  %dd = arith.mulf %df, %step : f32
  %distance = math.absf %dd : f32
  %t = arith.subf %shifted, %distance : f32
  attn.yield %t : f32
}

// keeps (b, h, i, j) unless (b + h + i + 2j) mod 5 == 4
attn.mask @indexed_mask {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %bh = arith.addi %b, %h : index
  %bhi = arith.addi %bh, %i : index
  %jj = arith.addi %j, %j : index
  %sum = arith.addi %bhi, %jj : index
  %five = arith.constant 5 : index
  %r = arith.remui %sum, %five : index
  %four = arith.constant 4 : index
  %keep = arith.cmpi ne, %r, %four : index
  attn.yield %keep : i1
}
"""

# Online: g = e^(s + 0.05·(j - i)), h = e^s·(1 + 0.5·h + 0.25·b); the index terms are
# constants of the pair for the classifier (one exp factor each) and for the gradients.
ONLINE = SCORE_AND_MASK + """
// h = e^s·(1 + w·h + b/4) is > 0 for the w these tests use, which the compiler cannot
// prove of a learnable w: the normalizer states it.
attn.normalizer @indexed_online params(w = 0.5) attributes {assume_nonzero_denominator} {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %w: f32):
    %d = arith.subi %j, %i : index
    %d64 = arith.index_cast %d : index to i64
    %df = arith.sitofp %d64 : i64 to f32
    %c = arith.constant 0.05 : f32
    %tilt = arith.mulf %df, %c : f32
    %x = arith.addf %s, %tilt : f32
    %e = math.exp %x : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %w: f32):
    %h64 = arith.index_cast %h : index to i64
    %hf = arith.sitofp %h64 : i64 to f32
    %b64 = arith.index_cast %b : index to i64
    %bf = arith.sitofp %b64 : i64 to f32
    %one = arith.constant 1.0 : f32
    %quarter = arith.constant 0.25 : f32
    %wh = arith.mulf %w, %hf : f32
    %bq = arith.mulf %bf, %quarter : f32
    %f0 = arith.addf %one, %wh : f32
    %f = arith.addf %f0, %bq : f32
    %e = math.exp %s : f32
    %weight = arith.mulf %e, %f : f32
    attn.yield %weight : f32
  }
}
attn.kernel @indexed_online_attention normalizer(@indexed_online) score(@indexed) mask(@indexed_mask)
"""

# Plain: g = sigmoid(s + 0.2·b - 0.1·h + 0.01·(i - j)), C = 1.
PLAIN = SCORE_AND_MASK + """
attn.normalizer @indexed_plain {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %b64 = arith.index_cast %b : index to i64
    %bf = arith.sitofp %b64 : i64 to f32
    %h64 = arith.index_cast %h : index to i64
    %hf = arith.sitofp %h64 : i64 to f32
    %d = arith.subi %i, %j : index
    %d64 = arith.index_cast %d : index to i64
    %df = arith.sitofp %d64 : i64 to f32
    %cb = arith.constant 0.2 : f32
    %ch = arith.constant -0.1 : f32
    %cd = arith.constant 0.01 : f32
    %tb = arith.mulf %bf, %cb : f32
    %th = arith.mulf %hf, %ch : f32
    %td = arith.mulf %df, %cd : f32
    %x0 = arith.addf %s, %tb : f32
    %x1 = arith.addf %x0, %th : f32
    %x = arith.addf %x1, %td : f32
    %one = arith.constant 1.0 : f32
    %nx = arith.negf %x : f32
    %e = math.exp %nx : f32
    %den = arith.addf %one, %e : f32
    %sig = arith.divf %one, %den : f32
    attn.yield %sig : f32
  }
  denominator constant 1.0
}
attn.kernel @indexed_plain_attention normalizer(@indexed_plain) score(@indexed) mask(@indexed_mask)
"""


def score(q, k, ix, tilt):
    b, h, i, j = (t.to(q.dtype) for t in (ix.b, ix.h, ix.i, ix.j))
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    return s * (1 + 0.25 * h) + tilt * b - (0.02 * (i - j)).abs()


def keep(ix):
    return (ix.b + ix.h + ix.i + 2 * ix.j) % 5 != 4


def online_reference(q, k, v, params, is_causal, lengths):
    w, tilt = params[0], params[1]                        # kernel order: normalizer, score
    g = lambda s, ix: torch.exp(s + 0.05 * (ix.j - ix.i).to(s.dtype))
    h = lambda s, ix: torch.exp(s) * (1 + w * ix.h.to(s.dtype) + 0.25 * ix.b.to(s.dtype))
    return general.attention(q, k, v, lambda q, k, ix: score(q, k, ix, tilt), g, h, keep,
                             is_causal=is_causal, key_lengths=lengths)


def plain_reference(q, k, v, params, is_causal, lengths):
    tilt = params[0]
    g = lambda s, ix: torch.sigmoid(s + 0.2 * ix.b.to(s.dtype) - 0.1 * ix.h.to(s.dtype)
                                    + 0.01 * (ix.i - ix.j).to(s.dtype))
    return general.attention(q, k, v, lambda q, k, ix: score(q, k, ix, tilt), g, keep=keep,
                             denominator="constant", is_causal=is_causal, key_lengths=lengths)


KERNELS = {
    "online": (ONLINE, online_reference, [0.5, 0.3]),
    "plain": (PLAIN, plain_reference, [0.3]),
}
SHAPES = {"generic": (2, 3, 7, 11, 8, 5), "tiled": (2, 3, 37, 41, 32, 32)}


@pytest.fixture(scope="module")
def artifacts(attn_mod, tmp_path_factory):
    out = tmp_path_factory.mktemp("indices")
    paths = {}
    for name, (ir, _, _) in KERNELS.items():
        paths[name] = str(compile_source(ir, out, name))
    return paths


@pytest.mark.parametrize("dt", [torch.float64, torch.float32])
@pytest.mark.parametrize("masks", ["none", "causal+pad"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_indices_match_reference(artifacts, kernel, shape, masks, dt):
    _, reference, params = KERNELS[kernel]
    B, H, Nq, Nk, d, dv = SHAPES[shape]
    gen = torch.Generator().manual_seed(seed_of("indices", kernel, shape, masks))
    q, k = (torch.randn(B, H, n, d, generator=gen, dtype=torch.float64) for n in (Nq, Nk))
    v = torch.randn(B, H, Nk, dv, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, dv, generator=gen, dtype=torch.float64)
    is_causal = masks != "none"
    lengths = torch.tensor([Nk, Nk - 3]) if is_causal else None
    p = torch.tensor(params, dtype=torch.float64)
    cast = lambda t: t.to(dt)
    got = compiled_grads(artifacts[kernel], cast(q), cast(k), cast(v), cast(p), cast(dout),
                         is_causal, lengths)
    want = general.attention_and_grads(
        lambda q, k, v, p: reference(q, k, v, p, is_causal, lengths), q, k, v, dout, [p])
    want["dparams"] = want.pop("d0")
    check_close(got, want, dt, context=f"{kernel} {shape} {masks} {dt}")
