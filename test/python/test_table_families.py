"""The families of issue 14 that read tensor inputs, against eager float64 references
written from their papers (test/reference/general.py; nothing hand-derived): O, dq, dk,
dv and every learnable table's gradient, float64 and float32, on the generic loops
(dv != d) and the tiled kernels (d = dv = 32).

    alibi_heads     ALiBi with the paper's geometric per-head slopes, one kernel, causal
    t5_bias         T5's bidirectional relative-position buckets, learnable bias [H, 32]
    document_mask   packed sequences: doc [B, N] int64, a query sees its own document
    prefix_lm       prefix [B] int64: bidirectional prefix, causal after it
    ssmax           Scalable-Softmax: s·scale[h]·log(i + 1), learnable scale [H], causal
    fox             Forgetting Transformer: s + c[b, h, i] − c[b, h, j], learnable c [B, H, Nq]

SSMax and FoX also train a few steps in attn.MultiheadAttention (the loss decreases):
SSMax's scale as the module's parameter (initialised from the IR), FoX's c from a
forget-gate projection through the kernel's gradient.
"""
import math

import pytest
import torch

import attn
import general
from conftest import REPO, kernels_from
from helpers import check_tables_kernel, seed_of

FAMILIES = REPO / "examples" / "families"
DTYPES = {"f64": torch.float64, "f32": torch.float32}
SHAPES = {"generic": (2, 4, 13, 17, 8, 5), "tiled": (2, 4, 40, 40, 32, 32)}
# FoX reads c at queries and keys alike: self-attention, Nq = Nk.
SELF_SHAPES = {"generic": (2, 4, 13, 13, 8, 5), "tiled": (2, 4, 40, 40, 32, 32)}


compiled = kernels_from(lambda name: FAMILIES / f"{name}.mlir")


def scaled_dot(q, k):
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])


def softmax_g(s, ix):
    return torch.exp(s)


def t5_bucket(relative, buckets=32, max_distance=128):
    """T5's _relative_position_bucket (bidirectional) of relative = j - i."""
    buckets //= 2
    bucket = (relative > 0).to(torch.int64) * buckets
    n = relative.abs()
    exact = buckets // 2
    small = n < exact
    large = exact + (torch.log(n.double().clamp(min=1) / exact) / math.log(max_distance / exact)
                     * (buckets - exact)).to(torch.int64)
    large = torch.minimum(large, torch.full_like(large, buckets - 1))
    return bucket + torch.where(small, n, large)


def make(name, shape, gen):
    """(tables dict, reference fn(q, k, v, *tables) -> O, is_causal at the call)."""
    B, H, Nq, Nk, d, dv = shape
    N = max(Nq, Nk)
    if name == "alibi_heads":
        slopes = attn.alibi_slopes(H, torch.float64)

        def ref(q, k, v, slopes):
            score = lambda q, k, ix: scaled_dot(q, k) - slopes[ix.h] * (ix.i - ix.j).to(q.dtype)
            return general.attention(q, k, v, score, softmax_g, softmax_g,
                                     keep=lambda ix: ix.j <= ix.i)
        return {"slopes": slopes}, ref, False
    if name == "t5_bias":
        bias = 0.5 * torch.randn(H, 32, generator=gen, dtype=torch.float64)

        def ref(q, k, v, bias):
            score = lambda q, k, ix: q @ k.transpose(-1, -2) + bias[ix.h, t5_bucket(ix.j - ix.i)]
            return general.attention(q, k, v, score, softmax_g, softmax_g)
        return {"bias": bias}, ref, False
    if name == "document_mask":
        doc = torch.cumsum((torch.rand(B, N, generator=gen) < 0.2).to(torch.int64), dim=1)

        def ref(q, k, v, doc):
            keep = lambda ix: doc[ix.b, ix.i] == doc[ix.b, ix.j]
            return general.attention(q, k, v, lambda q, k, ix: scaled_dot(q, k), softmax_g,
                                     softmax_g, keep, is_causal=True)
        return {"doc": doc}, ref, True
    if name == "prefix_lm":
        prefix = torch.randint(0, Nk + 1, (B,), generator=gen)

        def ref(q, k, v, prefix):
            keep = lambda ix: (ix.j <= ix.i) | (ix.j < prefix[ix.b])
            return general.attention(q, k, v, lambda q, k, ix: scaled_dot(q, k), softmax_g,
                                     softmax_g, keep)
        return {"prefix": prefix}, ref, False
    if name == "ssmax":
        scale = 0.43 + 0.2 * torch.randn(H, generator=gen, dtype=torch.float64)

        def ref(q, k, v, scale):
            def score(q, k, ix):
                return scaled_dot(q, k) * scale[ix.h] * torch.log(ix.i.to(q.dtype) + 1)
            return general.attention(q, k, v, score, softmax_g, softmax_g,
                                     keep=lambda ix: ix.j <= ix.i)
        return {"scale": scale}, ref, False
    if name == "fox":
        gates = torch.sigmoid(torch.randn(B, H, Nq, generator=gen, dtype=torch.float64) + 2)
        c = torch.cumsum(torch.log(gates), dim=-1)

        def ref(q, k, v, c):
            def score(q, k, ix):
                return scaled_dot(q, k) + c[ix.b, ix.h, ix.i] - c[ix.b, ix.h, ix.j]
            return general.attention(q, k, v, score, softmax_g, softmax_g,
                                     keep=lambda ix: ix.j <= ix.i)
        return {"c": c}, ref, False
    raise KeyError(name)


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("name", ["alibi_heads", "t5_bias", "document_mask", "prefix_lm",
                                  "ssmax", "fox"])
def test_family_matches_reference(compiled, name, shape, dt):
    kernel, dtype = compiled(name), DTYPES[dt]
    sizes = (SELF_SHAPES if name == "fox" else SHAPES)[shape]
    B, H, Nq, Nk, d, dv = sizes
    gen = torch.Generator().manual_seed(seed_of("table_families", name, shape))
    q, k = (torch.randn(B, H, n, d, generator=gen, dtype=torch.float64) for n in (Nq, Nk))
    v = torch.randn(B, H, Nk, dv, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, dv, generator=gen, dtype=torch.float64)
    tables, ref, is_causal = make(name, sizes, gen)
    check_tables_kernel(kernel, q, k, v, dout, tables, ref, is_causal, dtype,
                        context=f"{name} {shape} {dt}")


def test_alibi_slopes_follow_the_paper():
    """2^(-8/n), 2^(-16/n), ... for n a power of two; otherwise the slopes of the largest
    power of two below, then every other slope of twice that (the paper's code)."""
    assert torch.allclose(attn.alibi_slopes(8, torch.float64),
                          torch.tensor([2.0 ** -(k + 1) for k in range(8)], dtype=torch.float64))
    six = attn.alibi_slopes(6, torch.float64)
    four = [2.0 ** (-2 * (k + 1)) for k in range(4)]
    eight = [2.0 ** -(k + 1) for k in range(8)]
    assert torch.allclose(six, torch.tensor(four + eight[0::2][:2], dtype=torch.float64))


def train(mha, parameters, x, target, inputs=lambda: None, steps=20):
    """Losses of `steps` Adam steps on `parameters` fitting mha(x) to target (mean squared
    error), with inputs() as forward's inputs= at each step."""
    optimiser = torch.optim.Adam(parameters, lr=1e-2)
    losses = []
    for _ in range(steps):
        optimiser.zero_grad()
        out, _ = mha(x, x, x, need_weights=False, inputs=inputs())
        loss = (out - target).pow(2).mean()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    return losses


def test_ssmax_trains_from_its_initial_scale(compiled, attn_mod):
    """attn.MultiheadAttention creates SSMax's scale [H] as a parameter at the IR's 0.43
    (or a given input_inits tensor); training moves it and the loss decreases."""
    kernel = compiled("ssmax")
    torch.manual_seed(3)
    mha = attn_mod.MultiheadAttention(16, 4, batch_first=True, normalizer=kernel)
    assert torch.equal(mha.inputs["scale"].detach(), torch.full((4,), 0.43))
    x, target = torch.randn(2, 12, 16), torch.randn(2, 12, 16)
    losses = train(mha, list(mha.parameters()), x, target)
    assert losses[-1] < 0.9 * losses[0], losses
    assert not torch.allclose(mha.inputs["scale"].detach(), torch.full((4,), 0.43))
    given = torch.tensor([0.1, 0.2, 0.3, 0.4])
    again = attn_mod.MultiheadAttention(16, 4, batch_first=True, normalizer=kernel,
                                        input_inits={"scale": given})
    assert torch.equal(again.inputs["scale"].detach(), given)


def test_fox_trains_its_forget_gate(compiled, attn_mod):
    """FoX in a module: the forget gate f = sigmoid(x·W_f + b_f) per head, c = cumsum(log f)
    passed as the kernel's table; the gate's projection trains through dc."""
    kernel = compiled("fox")
    torch.manual_seed(4)
    mha = attn_mod.MultiheadAttention(16, 4, batch_first=True, normalizer=kernel)
    assert list(mha.inputs) == []  # c [B, H, Nq] is the caller's
    gate = torch.nn.Linear(16, 4)
    torch.nn.init.constant_(gate.bias, 2.0)
    x, target = torch.randn(2, 12, 16), torch.randn(2, 12, 16)

    def tables():
        log_f = torch.nn.functional.logsigmoid(gate(x)).transpose(1, 2)  # [B, H, N]
        return {"c": torch.cumsum(log_f, dim=-1)}

    weight = gate.weight.detach().clone()
    losses = train(mha, list(mha.parameters()) + list(gate.parameters()), x, target, tables)
    assert losses[-1] < 0.9 * losses[0], losses
    assert not torch.equal(gate.weight.detach(), weight)
