"""Grouped-query attention (issue 14, part 5): k and v with H_kv heads, H a multiple of
H_kv; query head h reads key/value head h // (H // H_kv) without copies, dk and dv sum
over the group, and the tensor inputs indexed by the query head get their gradients.
Against the eager float64 references of the families (test_row_offsets.case,
test_table_families.make) on k and v repeated per query head: O, dq, dk, dv, dparams and
every learnable table's gradient, f32 and f64, generic loops (GQA, H_kv = 2) and tiled
kernels (MQA, H_kv = 1). The runtime's errors for head counts that do not divide."""

import pytest
import torch

import general
import test_row_offsets as offsets
import test_table_families as table_families
from conftest import EXAMPLES, REPO, kernels_from
from helpers import check_close, seed_of

DTYPES = {"f64": torch.float64, "f32": torch.float32}
# (B, H, H_kv, Nq, Nk, d, dv)
SHAPES = {"generic": (2, 4, 2, 13, 17, 8, 5), "tiled": (2, 4, 1, 40, 40, 32, 32)}
FAMILIES = REPO / "examples" / "families"
SOURCES = {"sinks": FAMILIES / "sliding_window_sinks.mlir",
           "luong_local_post": FAMILIES / "luong_local_post.mlir",
           "t5_bias": FAMILIES / "t5_bias.mlir",
           "alibi_heads": FAMILIES / "alibi_heads.mlir",
           "softmax": EXAMPLES / "softmax.mlir"}


compiled = kernels_from(SOURCES.__getitem__)


def case(name, shape, gen):
    """(params [P], tables {name: tensor}, ref(q, k, v, params, *tables), is_causal)."""
    B, H, _, Nq, Nk, d, dv = shape
    if name in ("sinks", "luong_local_post"):
        params, tables, ref = offsets.case(name, gen, H, Nq)
        return params, tables, ref, False
    tables, ref, is_causal = table_families.make(name, (B, H, Nq, Nk, d, dv), gen)
    return (torch.zeros(0, dtype=torch.float64), tables,
            lambda q, k, v, params, *rest: ref(q, k, v, *rest), is_causal)


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("name", ["sinks", "luong_local_post", "t5_bias", "alibi_heads"])
def test_grouped_heads_match_reference(compiled, name, shape, dt):
    kernel, dtype = compiled(name), DTYPES[dt]
    B, H, H_kv, Nq, Nk, d, dv = SHAPES[shape]
    group = H // H_kv
    gen = torch.Generator().manual_seed(seed_of("gqa", name, shape))
    scale = 0.3 if name == "luong_local_post" else 1.0
    q = scale * torch.randn(B, H, Nq, d, generator=gen, dtype=torch.float64)
    k = scale * torch.randn(B, H_kv, Nk, d, generator=gen, dtype=torch.float64)
    v = torch.randn(B, H_kv, Nk, dv, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, dv, generator=gen, dtype=torch.float64)
    params, tables, ref, is_causal = case(name, SHAPES[shape], gen)
    learnable = [i["name"] for i in kernel.inputs if i["learnable"]]

    leaves = [t.to(dtype).clone().requires_grad_() for t in (q, k, v)]
    p = params.to(dtype).clone().requires_grad_(params.numel() > 0)
    given = {n: (t.to(dtype).clone().requires_grad_(n in learnable) if t.is_floating_point()
                 else t) for n, t in tables.items()}
    O = kernel(*leaves, p, is_causal, None, inputs=given)
    wanted = leaves + ([p] if params.numel() else []) + [given[n] for n in learnable]
    grads = list(torch.autograd.grad(O, wanted, grad_outputs=dout.to(dtype)))
    got = {"O": O.detach(), "dq": grads.pop(0), "dk": grads.pop(0), "dv": grads.pop(0)}
    assert got["dk"].shape == k.shape and got["dv"].shape == v.shape
    if params.numel():
        got["dparams"] = grads.pop(0)
    got.update({f"d{n}": grads.pop(0) for n in learnable})

    repeated = lambda q, k, v, *rest: ref(q, k.repeat_interleave(group, dim=1),
                                          v.repeat_interleave(group, dim=1), *rest)
    want = general.attention_and_grads(repeated, q, k, v, dout, [params, *tables.values()])
    if params.numel():
        want["dparams"] = want["d0"]
    for index, n in enumerate(tables, start=1):
        if n in learnable:
            want[f"d{n}"] = want[f"d{index}"]
    check_close(got, want, dtype, context=f"{name} {shape} {dt} H={H} H_kv={H_kv}",
                names=list(got))


def test_grouped_gradients_are_deterministic(compiled):
    """dk, dv summed over the group and dsinks: the same bits run to run."""
    kernel = compiled("sinks")
    gen = torch.Generator().manual_seed(11)
    q = torch.randn(2, 8, 33, 16, generator=gen)
    k, v = (torch.randn(2, 2, 33, 16, generator=gen) for _ in range(2))
    sinks = torch.randn(8, generator=gen)

    def run():
        leaves = [t.clone().requires_grad_() for t in (q, k, v, sinks)]
        out = kernel(*leaves[:3], None, inputs={"sinks": leaves[3]})
        return torch.autograd.grad(out.sum(), leaves)

    first = run()
    for _ in range(3):
        assert all(torch.equal(a, b) for a, b in zip(first, run()))


def test_head_counts_that_do_not_divide_are_refused(compiled):
    kernel = compiled("softmax")
    q = torch.randn(1, 6, 5, 8)
    k = torch.randn(1, 4, 5, 8)
    with pytest.raises(RuntimeError, match=r"q has 6 heads and k and v have 4 \(dim 1\): the "
                       r"query heads must be a multiple of the key/value heads"):
        kernel(q, k, k)
    with pytest.raises(RuntimeError, match=r"head count \(dim 1\) of k and v must agree"):
        kernel(q, k[:, :3], k[:, :2])


@pytest.mark.parametrize("pass_", ["forward", "backward"])
def test_no_query_heads_against_key_heads_is_refused(compiled, pass_):
    # 0 is a multiple of every head count, but no group: H / H_kv = 0 once divided the
    # backward's per-group sum by zero (SIGFPE; found by scripts/fuzz.sh's runtime fuzzer).
    kernel = compiled("softmax")
    q = torch.randn(1, 0, 5, 8, requires_grad=pass_ == "backward")
    k = torch.randn(1, 2, 5, 8)
    with pytest.raises(RuntimeError, match=r"q has 0 heads and k and v have 2 \(dim 1\)"):
        out = kernel(q, k, k)
        out.sum().backward()
