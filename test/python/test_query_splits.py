"""Work splits that fill every core: the backward over one slice's queries
(runtime: backward_query_splits) and the forward over keys (split-K:
forward_key_splits, attn_merge_T).

With B·H = 1 on 2 threads the runtime runs a slice's backward as two calls, each
writing its own dq rows and adding its share of dk, dv and the params' and tensor
inputs' gradients to its own buffers (abi.h, q_begin). Checked against the float64
reference for example normalizers (tiled d = 64 and generic d = 7, causal, padded keys),
and, for the kernels that transform rows (cosine, projections, additive score, weights)
or read learnable tables (T5 bias, sinks), against the same kernel on one thread, which
makes a single call and is itself checked against references elsewhere.

With Nq = 1..3 queries of one slice against thousands of keys the forward runs each
call's keys in two chunks whose states the kernel's merge entry folds: checked against
the reference for every denominator kind (sum, with an offset, count, constant; online
and plain), causal and padded keys, and for the sinks' offset region against one thread.
"""
import pytest
import torch

import helpers
from conftest import REPO, kernels_from

NQ = NK = 200  # > 2 query blocks of 64: two calls per slice on 2 threads


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


def test_split_backward_is_deterministic(artifacts):
    q, k, v, dout, key_lengths = helpers.make_inputs("softmax", 1, 1, 333, 257, 64, 64, 7,
                                                     padding=True, dtype=torch.float32)
    params = helpers.case_params("softmax", torch.float32)
    runs = [helpers.compiled_grads(artifacts("softmax"), q, k, v, params, dout, True, key_lengths)
            for _ in range(3)]
    for run in runs[1:]:
        for n in helpers.GRAD_NAMES:
            assert torch.equal(run[n], runs[0][n]), n


family = kernels_from(lambda name: REPO / "examples" / "families" / f"{name}.mlir")

# name -> the tensor inputs it takes ([H, ...] for H = 1 heads) and its head dim
FAMILIES = {
    "cosine": ({}, 16),
    "luong_general": ({}, None),
    "bahdanau": ({}, None),
    "t5_bias": ({"bias": lambda g: torch.randn(1, 32, generator=g, dtype=torch.float64)}, 16),
    "sliding_window_sinks": ({"sinks": lambda g: torch.randn(1, generator=g,
                                                             dtype=torch.float64)}, 16),
}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_split_backward_matches_one_call(family, name):
    kernel = family(name)
    inputs_of, d = FAMILIES[name]
    d = d or int(kernel.manifest["head-dim"])
    g = torch.Generator().manual_seed(helpers.seed_of(name))
    q, k, v, dout = (torch.randn(1, 1, n, d, generator=g, dtype=torch.float64) * 0.5
                     for n in (NQ, NK, NK, NQ))
    params = kernel.initial_params(torch.float64)
    params = params + 0.01 * torch.randn(params.shape, generator=g, dtype=torch.float64)
    tables = {n: make(g) for n, make in inputs_of.items()}
    learnable = [i["name"] for i in kernel.inputs if i["learnable"]]

    def grads(threads):
        torch.set_num_threads(threads)
        leaves = [t.clone().requires_grad_() for t in (q, k, v, params)]
        given = {n: t.clone().requires_grad_(n in learnable) for n, t in tables.items()}
        out = kernel(*leaves, True, None, inputs=given)
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
def test_split_keys_forward_matches_reference(artifacts, name, nq, causal, dtype):
    nk = 2600  # 5 key blocks of 512 (and a partial one): two chunks on 2 threads
    q, k, v, dout, key_lengths = helpers.make_inputs(
        name, 1, 1, nq, nk, 64, 64, helpers.seed_of("keys", name, nq, causal), dtype=dtype)
    # Causal with Nq < Nk: query i sees keys j <= i, so give it the last queries' view.
    key_lengths = torch.tensor([nk - 300]) if not causal else None
    helpers.check_example_against_reference(
        artifacts(name), name, q, k, v, helpers.case_params(name, dtype), dout, causal,
        key_lengths, dtype, names=["O"], context=f"{name} Nq={nq} causal={causal}")


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
