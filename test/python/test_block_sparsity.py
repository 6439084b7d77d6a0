"""Block-sparse tiles (issue 14, part 6): the tiled kernels skip the (row block, key tile)
pairs a mask keeps nothing of and run those it keeps whole without evaluating it
(attn-analyze-block-sparsity, lib/Analysis/MaskIntervals.h). Against the eager float64
references of test/reference/general.py, O and every gradient (q, k, v, learnable
tables), f32 and f64, at shapes whose tiles are masked, kept whole and partial, with
ragged tails (odd N, Nq != Nk; the tiles are 4 rows by 16 to 64 keys at d = 32, one row
by 64 keys in the generic loops at d = 24). At d = 64 over 1300 keys (key blocks of 512
keys in f32, 256 in f64), the tiled forward's calls of one query panel (128 rows: a
decoder step, a short prompt) pack each key block as they reach it, skipping blocks the
mask keeps nothing of, and those of several panels pack every key first:

    causal           the mask j <= i (indices)
    window_sinks     gpt-oss sliding window of 16 with learnable sinks (indices, offset)
    chunked          blocks of 48 positions see their own block (indices: i / 48 == j / 48)
    dilated          causal, every third key: (i - j) % 3 == 0 (indices; remainders within
                     one quotient, else partial)
    prefix_lm        prefix [B] int64 (tables: one element per call)
    document_mask    doc [B, N] int64 in long documents (tables: per-block min/max of the
                     ids), with and without is_causal
"""
import ctypes
import math

import pytest
import torch

import general
import test_row_offsets
from conftest import REPO, kernels_from
from helpers import check_tables_kernel, memref_of, seed_of

FAMILIES = REPO / "examples" / "families"
DTYPES = {"f64": torch.float64, "f32": torch.float32}
# (B, H, Nq, Nk, d = dv): odd and unequal lengths leave partial row blocks and key tiles;
# d = 24 runs the generic loops, whose rows classify blocks of 64 keys.
SHAPES = {"ragged": (2, 2, 203, 197, 32), "square": (1, 2, 160, 160, 32),
          "generic": (2, 1, 203, 197, 24),
          # A few rows, as in decoding (more than one: causal and dilated keep one key of
          # each of the first rows, whose dq is 0 up to f32 rounding, below the tolerance)
          "few_rows": (2, 2, 5, 1300, 64),
          # One head's 600 rows go to calls of at most 128 on 2 or more threads, whose
          # masks keep keys of several blocks (forward_rows_per_call)
          "one_panel": (1, 1, 600, 1300, 64),
          # B·H = 16 gives each call all 300 rows on up to 4 threads
          "panels": (4, 4, 300, 1300, 64)}

CHUNKED = """
attn.mask @chunk {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %size = arith.constant 48 : index
  %ci = arith.divui %i, %size : index
  %cj = arith.divui %j, %size : index
  %keep = arith.cmpi eq, %ci, %cj : index
  attn.yield %keep : i1
}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
attn.kernel @chunked normalizer(@softmax) mask(@chunk)
"""

DILATED = CHUNKED.replace("""  %size = arith.constant 48 : index
  %ci = arith.divui %i, %size : index
  %cj = arith.divui %j, %size : index
  %keep = arith.cmpi eq, %ci, %cj : index""", """  %three = arith.constant 3 : index
  %zero = arith.constant 0 : index
  %causal = arith.cmpi ule, %j, %i : index
  %distance = arith.subi %i, %j : index
  %phase = arith.remui %distance, %three : index
  %on = arith.cmpi eq, %phase, %zero : index
  %keep = arith.andi %causal, %on : i1""").replace("@chunked", "@dilated")

SOURCES = {
    "causal": FAMILIES / "causal.mlir",
    "window_sinks": FAMILIES / "sliding_window_sinks.mlir",
    "chunked": CHUNKED,
    "dilated": DILATED,
    "prefix_lm": FAMILIES / "prefix_lm.mlir",
    "document_mask": FAMILIES / "document_mask.mlir",
}


compiled = kernels_from(SOURCES.__getitem__)


def softmax_g(s, ix):
    return torch.exp(s)


def masked_softmax(keep, is_causal=False):
    """ref(q, k, v, *tables) of softmax attention under keep(ix, *tables)."""
    def ref(q, k, v, *tables):
        score = lambda q, k, ix: q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        return general.attention(q, k, v, score, softmax_g, softmax_g,
                                 keep=lambda ix: keep(ix, *tables), is_causal=is_causal)
    return ref


def case(name, gen, B, H, Nq, Nk):
    """(tables {name: tensor}, reference(q, k, v, *tables), is_causal at the call)."""
    N = max(Nq, Nk)
    if name == "causal":
        return {}, masked_softmax(lambda ix: ix.j <= ix.i), False
    if name == "window_sinks":
        _, tables, ref = test_row_offsets.case("sinks", gen, H, Nq)
        no_params = torch.zeros(0, dtype=torch.float64)
        return tables, lambda q, k, v, sinks: ref(q, k, v, no_params, sinks), False
    if name == "chunked":
        return {}, masked_softmax(lambda ix: ix.i // 48 == ix.j // 48), False
    if name == "dilated":
        return {}, masked_softmax(lambda ix: (ix.j <= ix.i) & ((ix.i - ix.j) % 3 == 0)), False
    if name == "prefix_lm":
        # No prefix, one inside the first key tile, one across several, one past the end.
        prefix = torch.tensor([0, 7, 100, N + 5][:B], dtype=torch.int64)
        return {"prefix": prefix}, masked_softmax(
            lambda ix, prefix: (ix.j <= ix.i) | (ix.j < prefix[ix.b])), False
    if name.startswith("document_mask"):
        # Documents of 20 to 90 positions: tiles inside one, across two, and apart.
        starts = (torch.rand(B, N, generator=gen) < 1 / 55).to(torch.int64)
        doc = torch.cumsum(starts, dim=1) + 3
        is_causal = name.endswith("causal")
        return {"doc": doc}, masked_softmax(
            lambda ix, doc: doc[ix.b, ix.i] == doc[ix.b, ix.j], is_causal), is_causal
    raise KeyError(name)


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("name", ["causal", "window_sinks", "chunked", "dilated", "prefix_lm",
                                  "document_mask", "document_mask_causal"])
def test_block_sparse_kernel_matches_reference(compiled, name, shape, dt):
    kernel = compiled(name.removesuffix("_causal"))
    dtype = DTYPES[dt]
    B, H, Nq, Nk, d = SHAPES[shape]
    gen = torch.Generator().manual_seed(seed_of("block_sparsity", name, shape))
    q, k = (torch.randn(B, H, n, d, generator=gen, dtype=torch.float64) for n in (Nq, Nk))
    v = torch.randn(B, H, Nk, d, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, d, generator=gen, dtype=torch.float64)
    tables, ref, is_causal = case(name, gen, B, H, Nq, Nk)
    check_tables_kernel(kernel, q, k, v, dout, tables, ref, is_causal, dtype,
                        context=f"{name} {shape} {dt}")


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("name,d,is_causal", [("causal", 64, False), ("chunked", 64, False),
                                              ("chunked", 64, True), ("chunked", 24, False)])
def test_backward_writes_exactly_the_rows_it_owns(compiled, name, d, is_causal, dt):
    """abi.h: a backward call overwrites dq's rows [q_begin, q_end) and dk's and dv's
    rows [kv_begin, kv_len), also those of key blocks its mask or is_causal skips; the
    runtime zeroes only the keys past kv_len and sums the calls' parts. Called through
    the C entry point with NaN-filled outputs, split by queries (a dk, dv buffer per
    split) and by keys (a dq buffer per chunk) as the runtime splits, each call of the
    tiled and generic loops writes exactly its rows, and the parts sum to the runtime's
    gradients, whose dk, dv rows past kv_len are 0."""
    dtype = DTYPES[dt]
    kernel = compiled(name)
    # Rows see keys on both sides of the chunk boundary 512; with is_causal, no row
    # reaches the last chunk [1024, 1100), which still owns its rows.
    Nq, Nk, kv_len = 700, 1300, 1100
    gen = torch.Generator().manual_seed(seed_of("ownership", name, d, is_causal, dt))
    q, dout = (torch.randn(1, 1, Nq, d, generator=gen, dtype=dtype) for _ in range(2))
    k, v = (torch.randn(1, 1, Nk, d, generator=gen, dtype=dtype) for _ in range(2))
    key_lengths = torch.tensor([kv_len])
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    kernel(*leaves, None, is_causal, key_lengths).backward(dout)
    want_dq, want_dk, want_dv = (t.grad[0, 0] for t in leaves)
    assert (want_dk[kv_len:] == 0).all() and (want_dv[kv_len:] == 0).all()

    o, row_max, row_sum = (t[0, 0] for t in kernel.forward_with_stats(
        q, k, v, None, is_causal, key_lengths))
    entry = getattr(ctypes.CDLL(kernel.path), f"_mlir_ciface_attn_backward_{dt}")
    no_params = torch.empty(0, dtype=dtype)
    inputs = [memref_of(t) for t in (q[0, 0], k[0, 0], v[0, 0], o, dout[0, 0], row_max,
                                     row_sum, no_params)]

    def call(dq, dk, dv, q_begin, q_end, kv_begin, kv_end):
        args = [ctypes.byref(m) for m in inputs]
        args.insert(8, ctypes.c_void_p(None))  # no tensor inputs
        args += [ctypes.byref(memref_of(t)) for t in (dq, dk, dv, no_params)]
        entry(*args, ctypes.c_void_p(None), *(ctypes.c_int64(x) for x in (
            0, 0, q_begin, q_end, kv_begin, kv_end, int(is_causal), 0, 0)))

    def nans(rows):
        return torch.full((rows, d), math.nan, dtype=dtype)

    def only_rows(grad, begin, end, what):
        assert grad[begin:end].isfinite().all(), f"{what}: a row the call owns was not written"
        assert grad[:begin].isnan().all() and grad[end:].isnan().all(), \
            f"{what}: a row outside [{begin}, {end}) was written"

    tol = 1e-10 if dtype == torch.float64 else 2e-5
    near = lambda got, want: (got - want).abs().max() <= tol * want.abs().max()  # noqa: E731

    # By queries: rows [0, 137) reach only the first key block when chunked or causal.
    dq, parts = nans(Nq), [(nans(Nk), nans(Nk)) for _ in range(2)]
    for (dk, dv), (q_begin, q_end) in zip(parts, [(0, 137), (137, Nq)]):
        call(dq, dk, dv, q_begin, q_end, 0, kv_len)
        only_rows(dk, 0, kv_len, f"dk of rows [{q_begin}, {q_end})")
        only_rows(dv, 0, kv_len, f"dv of rows [{q_begin}, {q_end})")
    assert near(dq, want_dq)
    assert near(parts[0][0][:kv_len] + parts[1][0][:kv_len], want_dk[:kv_len])
    assert near(parts[0][1][:kv_len] + parts[1][1][:kv_len], want_dv[:kv_len])

    # By keys, each chunk with its own dq, dk and dv.
    dq_sum = torch.zeros(Nq, d, dtype=dtype)
    for kv_begin, kv_end in [(0, 512), (512, 1024), (1024, kv_len)]:
        dq, dk, dv = nans(Nq), nans(Nk), nans(Nk)
        call(dq, dk, dv, 0, Nq, kv_begin, kv_end)
        assert dq.isfinite().all(), "a query row the call owns was not written"
        only_rows(dk, kv_begin, kv_end, f"dk of keys [{kv_begin}, {kv_end})")
        only_rows(dv, kv_begin, kv_end, f"dv of keys [{kv_begin}, {kv_end})")
        assert near(dk[kv_begin:kv_end], want_dk[kv_begin:kv_end])
        assert near(dv[kv_begin:kv_end], want_dv[kv_begin:kv_end])
        dq_sum += dq
    assert near(dq_sum, want_dq)
