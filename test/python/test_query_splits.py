"""Work splits that fill every core: the backward over one slice's queries
(runtime: backward_query_splits) and, for few queries, the forward and the backward
over keys (split-K: key_splits, attn_merge_T).

With B·H = 1 on 2 threads the runtime runs a slice's backward as several calls (up to
kItemsPerThread per thread, as the rows allow), each writing its own dq rows and adding
its share of dk, dv and the params' and tensor inputs' gradients to its own buffers (abi.h, q_begin). Checked against the float64
reference for example normalizers (tiled d = 64 and generic d = 7, causal, padded keys),
and, for the kernels that transform rows (cosine, projections, additive score, weights)
or read learnable tables (T5 bias, sinks), against the same kernel on one thread, which
makes a single call and is itself checked against references elsewhere.

With Nq = 1..3 queries of one slice against thousands of keys the forward runs each
call's keys in several chunks whose states the kernel's merge entry folds, and the
backward runs them as several calls, each writing its keys' dk, dv rows and its share of
dq (summed in chunk order), the row offset's share from the first chunk only (abi.h, kv_begin):
checked against the reference, forward and every gradient, for every denominator kind
(sum, with an offset, count, constant; online and plain), causal and padded keys, and
for the families above and the sinks' offset region against one thread.
"""
import pytest
import torch

import helpers
from conftest import REPO, kernels_from

NQ = NK = 200  # 3 query blocks of 64: three calls per slice on 2 threads


@pytest.fixture(autouse=True)
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    if torch.get_num_threads() < 2:
        pytest.skip("LibTorch's intra-op pool has one thread")
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("name", ["softmax", "tanhmax", "multimax", "sigmoid"])
@pytest.mark.parametrize("d", [64, 7])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_split_backward_matches_reference(artifacts, name, d, causal, dtype):
    q, k, v, dout, key_lengths = helpers.make_inputs(
        name, 1, 1, NQ, NK, d, d, helpers.seed_of(name, d, causal), padding=True, dtype=dtype)
    helpers.check_example_against_reference(
        artifacts(name), name, q, k, v, helpers.case_params(name, dtype), dout, causal,
        key_lengths, dtype, context=f"{name} d={d} causal={causal}")


@pytest.mark.parametrize("nq,nk", [(333, 257), (2, 1500)], ids=["queries", "keys"])
def test_split_backward_is_deterministic(artifacts, nq, nk):
    q, k, v, dout, key_lengths = helpers.make_inputs("softmax", 1, 1, nq, nk, 64, 64, 7,
                                                     padding=True, dtype=torch.float32)
    params = helpers.case_params("softmax", torch.float32)
    runs = [helpers.compiled_grads(artifacts("softmax"), q, k, v, params, dout, True, key_lengths)
            for _ in range(3)]
    for run in runs[1:]:
        for n in helpers.GRAD_NAMES:
            assert torch.equal(run[n], runs[0][n]), n


family = kernels_from(lambda name: REPO / "examples" / "families" / f"{name}.mlir")

# name -> the tensor inputs it takes ([H, ...] for H = 1 heads), its head dim and value
# dim (None: the head dim)
FAMILIES = {
    "cosine": ({}, 16),
    "luong_general": ({}, None),
    "bahdanau": ({}, None),
    "t5_bias": ({"bias": lambda g: torch.randn(1, 32, generator=g, dtype=torch.float64)}, 16),
    "sliding_window_sinks": ({"sinks": lambda g: torch.randn(1, generator=g,
                                                             dtype=torch.float64)}, 16),
    # tiled on W q, W k (width 32 = dv) with a feature map: packed φ(k) rows, dφ chained
    "nested_tanh": ({}, 16, 32),
}


@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.parametrize("nq,nk,causal", [(NQ, NK, True), (2, 1100, False)],
                         ids=["queries", "keys"])
def test_split_backward_matches_one_call(family, name, nq, nk, causal):
    kernel = family(name)
    inputs_of, d, *value_dim = FAMILIES[name]
    d = d or kernel.manifest["head_dim"]
    dv = value_dim[0] if value_dim else d
    g = torch.Generator().manual_seed(helpers.seed_of(name))
    q, k, v, dout = (torch.randn(1, 1, n, width, generator=g, dtype=torch.float64) * 0.5
                     for n, width in ((nq, d), (nk, d), (nk, dv), (nq, dv)))
    params = kernel.initial_params(torch.float64)
    params = params + 0.01 * torch.randn(params.shape, generator=g, dtype=torch.float64)
    tables = {n: make(g) for n, make in inputs_of.items()}
    learnable = [i["name"] for i in kernel.inputs if i["learnable"]]

    def grads(threads):
        torch.set_num_threads(threads)
        leaves = [t.clone().requires_grad_() for t in (q, k, v, params)]
        given = {n: t.clone().requires_grad_(n in learnable) for n, t in tables.items()}
        out = kernel(*leaves, causal, None, inputs=given)
        wrt = leaves + [given[n] for n in learnable]
        grads = torch.autograd.grad(out, wrt, grad_outputs=dout, allow_unused=True)
        return [out.detach()] + [torch.zeros_like(x) if g is None else g
                                 for x, g in zip(wrt, grads)]

    one_call, split = grads(1), grads(2)
    names = ["O", "dq", "dk", "dv", "dparams"] + [f"d{n}" for n in learnable]
    for n, a, b in zip(names, one_call, split):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12), \
            f"{name} {n}: max diff {(a - b).abs().max().item():.3e}"


@pytest.mark.parametrize("name", ["softmax", "tanhmax", "multimax", "expressive", "relu",
                                  "sigmoid", "softplus"])
@pytest.mark.parametrize("nq", [1, 3])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_split_keys_match_reference(artifacts, name, nq, causal, dtype):
    nk = 2600  # 5 key blocks of 512 (and a partial one): five chunks on 2 threads
    q, k, v, dout, key_lengths = helpers.make_inputs(
        name, 1, 1, nq, nk, 64, 64, helpers.seed_of("keys", name, nq, causal), dtype=dtype)
    key_lengths = torch.tensor([nk - 300]) if not causal else None
    # Causal with Nq < Nk: query i sees keys j <= i, one to three keys, whose gradients
    # vanish (P(dP - D) = 0 for one key) up to rounding: its forward is checked.
    helpers.check_example_against_reference(
        artifacts(name), name, q, k, v, helpers.case_params(name, dtype), dout, causal,
        key_lengths, dtype, names=["O"] if causal else None,
        context=f"{name} Nq={nq} causal={causal}")


def test_split_keys_forward_statistics(artifacts):
    """row_max and row_sum of a split forward are the unsplit forward's (they feed the
    backward)."""
    import attn
    kernel = attn.load(artifacts("softmax"))
    q, k, v, _, _ = helpers.make_inputs("softmax", 1, 1, 2, 5000, 64, 64, 11)
    split = kernel.forward_with_stats(q, k, v)
    torch.set_num_threads(1)
    whole = kernel.forward_with_stats(q, k, v)
    for a, b in zip(split, whole):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-14), (a - b).abs().max()


@pytest.mark.parametrize("nq", [1, 70])
def test_split_keys_with_an_offset_region(family, nq):
    """The sinks' offset β = e^(sinks[h]) joins C once, not once per chunk."""
    kernel = family("sliding_window_sinks")
    g = torch.Generator().manual_seed(nq)
    q = torch.randn(1, 1, nq, 16, generator=g, dtype=torch.float64)
    k, v = (torch.randn(1, 1, 4000, 16, generator=g, dtype=torch.float64) for _ in range(2))
    sinks = torch.tensor([0.7], dtype=torch.float64)
    outs = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        outs.append(kernel.forward_with_stats(q, k, v, None, False, None,
                                              inputs={"sinks": sinks}))
    for a, b in zip(*outs):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-14), (a - b).abs().max()
