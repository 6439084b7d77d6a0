"""Absolute positions (issue 35, docs/decoding.md): a call with query_start and key_start
sees the positions of its rows in the whole sequence.

For each position-dependent family, the last Nq queries of a sequence of N, called alone
with query_start = N - Nq (an int, or one start per batch entry with key_lengths ending
each entry's sequence), give the rows of the float64 reference of the whole sequence:
O, dq, dk, dv and every learnable table's gradient (the reference's gradients with the
earlier rows' dO zero), float64 and float32, on the generic loops (dv != d) and the
tiled kernels (d = dv = 32). The same rows called at position 0 differ (the test could
fail). Since dk, dv and the tables' gradients are those of the whole sequence with dO on
the queried rows, a sequence trained in chunks of queries gets the whole sequence's
gradients. Then: keys from key_start (a chunk of the keys; an int, or one start per
batch entry), the extents of tables named Nq, and the errors for bad starts.
"""
import math

import pytest
import torch

import general
from conftest import REPO, kernels_from
from helpers import check_close, seed_of
from test_table_families import make, scaled_dot, softmax_g

DTYPES = {"f64": torch.float64, "f32": torch.float32}
# (B, H, N, Nq, d, dv): N positions in all, the last Nq of them queried.
SHAPES = {"generic": (2, 4, 37, 5, 8, 5), "tiled": (2, 4, 80, 19, 32, 32)}


def _source(name):
    if name == "causal":
        return REPO / "examples" / "normalizers" / "softmax.mlir"
    return REPO / "examples" / "families" / f"{name}.mlir"


compiled = kernels_from(_source)


def sinks_reference(H, gen):
    sinks = 0.5 * torch.randn(H, generator=gen, dtype=torch.float64)

    def ref(q, k, v, sinks):
        keep = lambda ix: (ix.j <= ix.i) & (ix.j + 16 > ix.i)
        O_unnormalised = general.attention(q, k, v, lambda q, k, ix: scaled_dot(q, k),
                                           softmax_g, softmax_g, keep, denominator="constant")
        s = torch.where(keep(general.indices(*q.shape[:3], k.shape[2])),
                        scaled_dot(q, k), torch.tensor(-math.inf, dtype=q.dtype))
        C = torch.exp(s).sum(-1, keepdim=True) + torch.exp(sinks).view(1, -1, 1, 1)
        return O_unnormalised / C
    return {"sinks": sinks}, ref, False


def causal_reference():
    def ref(q, k, v):
        return general.attention(q, k, v, lambda q, k, ix: scaled_dot(q, k), softmax_g,
                                 softmax_g, is_causal=True)
    return {}, ref, True


def family(name, B, H, N, d, dv, gen):
    """(tables over the N positions, reference fn(q, k, v, *tables), is_causal)."""
    if name == "sliding_window_sinks":
        return sinks_reference(H, gen)
    if name == "causal":
        return causal_reference()
    return make(name, (B, H, N, N, d, dv), gen)


def run(kernel, q, k, v, dout, tables, is_causal, dtype, **call):
    """O and the gradients of an attn call (floats of `dtype`)."""
    learnable = [i["name"] for i in kernel.inputs if i["learnable"]]
    leaves = [t.to(dtype).clone().requires_grad_() for t in (q, k, v)]
    given = {n: (t.to(dtype).clone().requires_grad_(n in learnable) if t.is_floating_point()
                 else t) for n, t in tables.items()}
    O = kernel(*leaves, None, is_causal, call.pop("key_lengths", None),
               inputs=given or None, **call)
    grads = torch.autograd.grad(O, leaves + [given[n] for n in learnable],
                                grad_outputs=dout.to(dtype))
    got = {"O": O.detach(), "dq": grads[0], "dk": grads[1], "dv": grads[2]}
    got.update({f"d{n}": g for n, g in zip(learnable, grads[3:])})
    return got


def rows_of(full, starts, Nq):
    """Each batch entry's rows [starts[b], starts[b] + Nq) of a [B, H, N, E] tensor."""
    return torch.stack([full[b, :, s:s + Nq] for b, s in enumerate(starts)])


FAMILIES = ["alibi_heads", "ssmax", "sliding_window_sinks", "document_mask", "t5_bias",
            "causal", "fox"]


def whole_sequence_reference(ref, q, k, v, dout, tables, first, Nq):
    """The reference over all N positions with dO on each entry's rows [first[b],
    first[b] + Nq) only: those rows' O and dq, and dk, dv and the tables' gradients."""
    B, H, _, dv = dout.shape
    full_dout = torch.zeros(B, H, v.shape[2], dv, dtype=torch.float64)
    for b, s in enumerate(first):
        full_dout[b, :, s:s + Nq] = dout[b]
    names = list(tables)
    whole = general.attention_and_grads(ref, q, k, v, full_dout, [tables[t] for t in names])
    want = {"O": rows_of(whole["O"], first, Nq), "dq": rows_of(whole["dq"], first, Nq),
            "dk": whole["dk"], "dv": whole["dv"]}
    for index, t in enumerate(names):
        if whole.get(f"d{index}") is not None:
            want[f"d{t}"] = whole[f"d{index}"]
    return want


# (starts, schedule, dtype): both schedules, both dtypes and both kinds of starts.
CASES = [("per_batch", "generic", "f64"), ("per_batch", "tiled", "f32"), ("int", "tiled", "f64")]


@pytest.mark.parametrize("starts,shape,dt", CASES)
@pytest.mark.parametrize("name", FAMILIES)
def test_rows_at_their_positions_are_the_whole_sequences(compiled, name, starts, shape, dt):
    """query_start = N - Nq (int), or a [B] tensor of starts (entry b's rows end 3·b
    before the last position): the whole sequence's rows and gradients."""
    kernel, dtype = compiled(name), DTYPES[dt]
    B, H, N, Nq, d, dv = SHAPES[shape]
    gen = torch.Generator().manual_seed(seed_of("positions", name, shape, starts))
    q = torch.randn(B, H, N, d, generator=gen, dtype=torch.float64)
    k = torch.randn(B, H, N, d, generator=gen, dtype=torch.float64)
    v = torch.randn(B, H, N, dv, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, dv, generator=gen, dtype=torch.float64)
    tables, ref, is_causal = family(name, B, H, N, d, dv, gen)
    first = [N - Nq] * B if starts == "int" else [N - Nq - 3 * b for b in range(B)]
    want = whole_sequence_reference(ref, q, k, v, dout, tables, first, Nq)
    learnable = {i["name"] for i in kernel.inputs if i["learnable"]}
    want = {n: t for n, t in want.items() if n[1:] not in tables or n[1:] in learnable}

    rows = rows_of(q, first, Nq)
    query_start = first[0] if starts == "int" else torch.tensor(first)
    got = run(kernel, rows, k, v, dout, tables, is_causal, dtype, query_start=query_start)
    context = f"{name} {shape} {starts} {dt}"
    check_close(got, want, dtype, context=context, names=list(got))
    if name != "fox":  # FoX's c spans the positions: position 0 needs a shorter one
        at_zero = run(kernel, rows, k, v, dout, tables, is_causal, dtype)
        assert (at_zero["O"] - want["O"].to(dtype)).abs().max() > 1e-3, context


@pytest.mark.parametrize("shape", list(SHAPES))
def test_keys_from_key_start(compiled, shape):
    """ALiBi (its mask region keeps j <= i) with only the keys from position 8 on, given
    as k[8:] with key_start = 8, and the last Nq queries: the reference keeps j >= 8."""
    kernel = compiled("alibi_heads")
    B, H, N, Nq, d, dv = SHAPES[shape]
    gen = torch.Generator().manual_seed(seed_of("key_start", shape))
    q, k = (torch.randn(B, H, N, d, generator=gen, dtype=torch.float64) for _ in range(2))
    v = torch.randn(B, H, N, dv, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, dv, generator=gen, dtype=torch.float64)
    slopes = attn_slopes(H)
    first, key_start = N - Nq, 8

    def ref(q, k, v):
        score = lambda q, k, ix: scaled_dot(q, k) - slopes[ix.h] * (ix.i - ix.j).to(q.dtype)
        keep = lambda ix: (ix.j <= ix.i) & (ix.j >= key_start)
        return general.attention(q, k, v, score, softmax_g, softmax_g, keep=keep)
    want = whole_sequence_reference(ref, q, k, v, dout, {}, [first] * B, Nq)
    want["dk"], want["dv"] = want["dk"][:, :, key_start:], want["dv"][:, :, key_start:]
    got = run(kernel, q[:, :, first:], k[:, :, key_start:], v[:, :, key_start:], dout,
              {"slopes": slopes}, False, torch.float64, query_start=first, key_start=key_start)
    check_close(got, want, torch.float64, context=f"key_start {shape}", names=list(got))


def keys_from_starts_case(name, B, H, H_KV, N, Nq, d, dv, gen):
    """Each batch entry's keys start at its own position (key_start a [B] tensor: 8 and 3,
    as a sliding-window cache that dropped different numbers of old keys) and end early
    by key padding (key_lengths: the last 4 keys of entry 1), its last queries at
    query_start [N - Nq, N - Nq - 3], with H query heads over H_KV kv heads: ALiBi (its
    mask keeps j <= i; slopes a table) or causal softmax. Returns (q rows, k, v, dout,
    tables, is_causal, the call's positions and key_lengths, the float64 reference's O and
    gradients: the whole sequence's, each entry keeping only its keys)."""
    group, key_first = H // H_KV, [8, 3]
    Nk = N - max(key_first)
    lengths = [Nk, Nk - 4]
    q = torch.randn(B, H, N, d, generator=gen, dtype=torch.float64)
    k = torch.randn(B, H_KV, N, d, generator=gen, dtype=torch.float64)
    v = torch.randn(B, H_KV, N, dv, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, dv, generator=gen, dtype=torch.float64)
    first = [N - Nq, N - Nq - 3]
    key_lo = torch.tensor(key_first).view(B, 1, 1, 1)
    key_hi = key_lo + torch.tensor(lengths).view(B, 1, 1, 1)
    slopes = attn_slopes(H) if name == "alibi_heads" else None

    def ref(q, k, v):
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        if slopes is None:
            score = lambda q, k, ix: scaled_dot(q, k)
        else:
            score = lambda q, k, ix: scaled_dot(q, k) - slopes[ix.h] * (ix.i - ix.j).to(q.dtype)
        keep = lambda ix: (ix.j <= ix.i) & (ix.j >= key_lo) & (ix.j < key_hi)
        return general.attention(q, k, v, score, softmax_g, softmax_g, keep=keep)
    want = whole_sequence_reference(ref, q, k, v, dout, {}, first, Nq)
    want["dk"], want["dv"] = rows_of(want["dk"], key_first, Nk), rows_of(want["dv"], key_first, Nk)
    call = {"query_start": torch.tensor(first), "key_start": torch.tensor(key_first),
            "key_lengths": torch.tensor(lengths)}
    tables = {} if slopes is None else {"slopes": slopes}
    return (rows_of(q, first, Nq), rows_of(k, key_first, Nk), rows_of(v, key_first, Nk), dout,
            tables, slopes is None, call, want)


@pytest.mark.parametrize("name", ["alibi_heads", "causal"])
@pytest.mark.parametrize("shape,dt", [("generic", "f64"), ("tiled", "f32")])
def test_keys_from_a_start_per_batch_entry(compiled, name, shape, dt):
    """key_start a [B] tensor, with key padding and grouped-query attention: O and every
    gradient of the float64 reference; one int key_start for both entries differs."""
    kernel, dtype = compiled(name), DTYPES[dt]
    B, H, N, Nq, d, dv = SHAPES[shape]
    gen = torch.Generator().manual_seed(seed_of("key_start per batch", name, shape))
    q, k, v, dout, tables, is_causal, call, want = keys_from_starts_case(
        name, B, H, H // 2, N, Nq, d, dv, gen)
    got = run(kernel, q, k, v, dout, tables, is_causal, dtype, **call)
    context = f"key_start per batch entry {name} {shape} {dt}"
    check_close(got, want, dtype, context=context, names=list(got))
    one_start = run(kernel, q, k, v, dout, tables, is_causal, dtype,
                    **{**call, "key_start": int(call["key_start"][0])})
    assert (one_start["O"][1] - want["O"][1].to(dtype)).abs().max() > 1e-3, context


def test_key_start_tensor_of_equal_starts_is_the_int(compiled):
    """The same start for every entry, as a [B] or 0-d tensor, gives the int's bits."""
    kernel = compiled("alibi_heads")
    gen = torch.Generator().manual_seed(seed_of("key_start equal"))
    q, k, v = (torch.randn(2, 4, 6, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    inputs = {"slopes": attn_slopes(4)}
    want = kernel(q, k, v, inputs=inputs, query_start=9, key_start=5)
    for key_start in (torch.tensor([5, 5]), torch.tensor(5)):
        assert torch.equal(kernel(q, k, v, inputs=inputs, query_start=9, key_start=key_start),
                           want)


def test_key_start_of_every_batch_entry_through_attention_and_the_module(compiled, attn_mod):
    """attn.attention takes key_start of query's batch shape and MultiheadAttention a [B]
    one: each batch entry's output is that of a call of its own with int starts."""
    kernel = compiled("causal")
    gen = torch.Generator().manual_seed(seed_of("key_start functional"))
    q = torch.randn(2, 3, 2, 4, 8, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(2, 3, 2, 6, 8, generator=gen, dtype=torch.float64) for _ in range(2))
    starts = torch.tensor([[0, 4, 1], [7, 2, 3]])
    out = attn_mod.attention(q, k, v, kernel, is_causal=True, query_start=5, key_start=starts)
    for a in range(2):
        for b in range(3):
            alone = kernel(q[a, b][None], k[a, b][None], v[a, b][None], None, True,
                           query_start=5, key_start=int(starts[a, b]))
            torch.testing.assert_close(out[a, b], alone[0], rtol=0, atol=0)
    with pytest.raises(RuntimeError, match=r"key_start must be an int or have the batch shape "
                                           r"\(2, 3\) of query, got \(6,\)"):
        attn_mod.attention(q, k, v, kernel, key_start=starts.reshape(-1))
    mha = attn_mod.MultiheadAttention(16, 2, batch_first=True, dtype=torch.float64,
                                      normalizer=kernel)
    x = torch.randn(2, 6, 16, generator=gen, dtype=torch.float64)
    key_starts = torch.tensor([4, 0])
    out, _ = mha(x, x, x, need_weights=False, is_causal=True, query_start=6,
                 key_start=key_starts)
    for b in range(2):
        alone, _ = mha(x[b:b + 1], x[b:b + 1], x[b:b + 1], need_weights=False, is_causal=True,
                       query_start=6, key_start=int(key_starts[b]))
        # The module's projections are BLAS products, which need not give a batch entry
        # the same bits alone and in a batch (1 ulp on an AVX2 EPYC); the attention is
        # compared bit for bit above.
        torch.testing.assert_close(out[b:b + 1], alone, rtol=1e-14, atol=1e-15)


def attn_slopes(H):
    import attn
    return attn.alibi_slopes(H, torch.float64)


def test_tables_named_nq_span_the_positions(compiled):
    """FoX's c [B, H, Nq] is read at i and j: with query_start its extent must reach the
    last query's position; the runtime names what it expected."""
    kernel = compiled("fox")
    q = torch.randn(1, 2, 3, 8, dtype=torch.float64)
    k = torch.randn(1, 2, 10, 8, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=r"input c has extent 3 in dim 2, expected Nq = 10 "
                                           r"\(the positions up to q's last query"):
        kernel(q, k, k, inputs={"c": torch.zeros(1, 2, 3, dtype=torch.float64)}, query_start=7)
    kernel(q, k, k, inputs={"c": torch.zeros(1, 2, 10, dtype=torch.float64)}, query_start=7)


def test_bad_starts_are_refused(compiled):
    kernel = compiled("causal")
    q = torch.randn(2, 1, 3, 8, dtype=torch.float64)
    cases = [
        (-1, 0, r"query_start\[0\] = -1, expected a position >= 0"),
        (torch.tensor([0, -2]), 0, r"query_start\[1\] = -2, expected a position >= 0"),
        (torch.tensor([1, 2, 3]), 0, r"query_start must be 0-d or have shape \[B\] = \[2\], "
                                     r"got shape \[3\]"),
        (torch.tensor([1.0, 2.0]), 0, "query_start has dtype float32, expected int64"),
        (None, -3, "key_start = -3, expected a position >= 0"),
        (None, torch.tensor([0, -2]), r"key_start\[1\] = -2, expected a position >= 0"),
        (None, torch.tensor([1, 2, 3]), r"key_start must be 0-d or have shape \[B\] = \[2\], "
                                        r"got shape \[3\]"),
        (None, torch.tensor([1.0, 2.0]), "key_start has dtype float32, expected int64"),
        (None, torch.tensor([1, 2], dtype=torch.int32), "key_start has dtype int32, expected "
                                                        "int64"),
    ]
    for query_start, key_start, message in cases:
        with pytest.raises(RuntimeError, match=message):
            kernel(q, q, q, query_start=query_start, key_start=key_start)
    with pytest.raises(TypeError, match="query_start must be an int or an int64 tensor"):
        kernel(q, q, q, query_start=1.5)
    with pytest.raises(TypeError, match="key_start must be an int or an int64 tensor"):
        kernel(q, q, q, key_start=1.5)
    with pytest.raises(RuntimeError, match="key_start = 2 and key_starts .* both given"):
        torch.ops.attn.attention(kernel.path, q, q, q, q.new_empty(0), False, None, None, None,
                                 2, torch.tensor([1, 1]))


def test_kernelised_kernels_refuse_positions(attn_mod, tmp_path):
    from conftest import compile_source
    kernel = attn_mod.load(compile_source(REPO / "examples" / "normalizers" / "linear.mlir",
                                          tmp_path, "linear"))
    q = torch.rand(1, 1, 4, 8, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="is kernelised .* takes no query_start or key_start"):
        kernel(q, q, q, query_start=2)
