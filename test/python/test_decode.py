"""The decode schedule: f32 forward calls of at most 16 query rows at a tiled head dim read
K row by row, one row per tile (#attn.cpu_schedule<variant = decode>, chosen in the entry
point by q_end - q_begin; test/Passes/select-schedule-decode.mlir checks the selection).
In f32 (f64 has no decode variant; test_query_splits covers its splits).

Checked against the float64 reference, forward and every gradient (the backward keeps the
tiled schedule, fed by the decode forward's row statistics), at Nq = 1, 3 and 16 (the
most the schedule takes) and 17 (the tiled schedule, beside it) against odd key counts,
on one thread (one call) and two (split-K: key chunks merged by attn_merge), for every
denominator kind (online sum: softmax, tanhmax; plain sum with ε: expressive; constant:
sigmoid; count: relu), key padding and is_causal, a documents mask and an online row
offset read from tensor inputs (sinks), and the same bits run to run on two threads.
"""
import time

import pytest
import torch

import helpers
from conftest import kernels_from
from triton_table_kernels import SINKS_DOCUMENTS

NAMES = ["softmax", "tanhmax", "expressive", "sigmoid", "relu"]


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    if torch.get_num_threads() != request.param:
        pytest.skip(f"LibTorch's intra-op pool cannot take {request.param} threads")
    yield request.param
    torch.set_num_threads(before)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("nq,nk", [(1, 2049), (3, 1537), (16, 1111), (17, 613)])
def test_decode_matches_reference(artifacts, threads, name, nq, nk):
    dtype = torch.float32
    q, k, v, dout, key_lengths = helpers.make_inputs(
        name, 2, 1, nq, nk, 64, 64, helpers.seed_of("decode", name, nq, nk), padding=True,
        dtype=dtype)
    helpers.check_example_against_reference(
        artifacts(name), name, q, k, v, helpers.case_params(name, dtype), dout, False,
        key_lengths, dtype, context=f"{name} Nq={nq} Nk={nk} threads={threads}")


@pytest.mark.parametrize("name", ["softmax", "sigmoid"])
@pytest.mark.parametrize("d", [32, 128])
def test_decode_causal_matches_reference(artifacts, threads, name, d):
    # Queries at positions 0..Nq-1 see keys j <= i: a tile's span ends inside it.
    nq, nk = 16, 301
    q, k, v, dout, _ = helpers.make_inputs(name, 1, 2, nq, nk, d, d,
                                           helpers.seed_of("causal", name, d), dtype=torch.float32)
    helpers.check_example_against_reference(
        artifacts(name), name, q, k, v, helpers.case_params(name, torch.float32), dout, True,
        None, torch.float32, context=f"{name} causal d={d}")


# Online softmax with a learnable sink per head (a row offset from a tensor input) and a
# documents mask (document ids as a tensor input): runs of 97 keys in documents 0, 1, 2
# in turn, so a query keeps every third run, in whole, partial and empty tiles.
compiled = kernels_from(lambda name: {"sinks_documents": SINKS_DOCUMENTS}[name])


@pytest.mark.parametrize("nq", [1, 3, 16])
def test_decode_documents_and_sinks_match_reference(compiled, threads, nq):
    dtype = torch.float32
    B, H, nk = 2, 2, 2305
    gen = torch.Generator().manual_seed(helpers.seed_of("documents", nq))
    q, k, v = (torch.randn(B, H, n, 64, generator=gen, dtype=torch.float64)
               for n in (nq, nk, nk))
    dout = torch.randn(B, H, nq, 64, generator=gen, dtype=torch.float64)
    sinks = torch.randn(H, generator=gen, dtype=torch.float64)
    doc = (torch.arange(nk) // 97 % 3 + torch.arange(B).view(B, 1)) % 3

    def reference(q_, k_, v_, sinks_, doc_):
        s = q_ @ k_.transpose(-1, -2) / 64 ** 0.5
        keep = doc_[:, None, :nq, None] == doc_[:, None, None, :]
        e = torch.where(keep, torch.exp(s), 0.0)
        return (e @ v_) / (torch.exp(sinks_).view(1, H, 1, 1) + e.sum(-1, keepdim=True))

    helpers.check_tables_kernel(compiled("sinks_documents"), q, k, v, dout,
                                {"sinks": sinks, "doc": doc}, reference, False, dtype,
                                context=f"sinks + documents Nq={nq} threads={threads}")


@pytest.mark.parametrize("nq", [1, 16])
def test_decode_is_deterministic(artifacts, nq):
    """Key chunks taken by whichever thread is free, merged (and their dq summed) in chunk
    order: the same bits every run on two threads, whether the runtime's helpers take
    the chunks or, right after a matrix product, ATen's OpenMP threads spinning after it
    (runtime/work_sharing.cpp)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        q, k, v, dout, key_lengths = helpers.make_inputs(
            "softmax", 1, 1, nq, 9001, 64, 64, helpers.seed_of("bits", nq), padding=True,
            dtype=torch.float32)
        params = helpers.case_params("softmax", torch.float32)
        product = torch.randn(256, 256)
        runs = []
        for run in range(4):
            if run % 2:
                torch.mm(product, product)
            else:
                time.sleep(0.3)  # libgomp's threads asleep again
            runs.append(helpers.compiled_grads(artifacts("softmax"), q, k, v, params, dout,
                                               False, key_lengths))
    finally:
        torch.set_num_threads(before)
    for run in runs[1:]:
        for n in helpers.GRAD_NAMES:
            assert torch.equal(run[n], runs[0][n]), n
