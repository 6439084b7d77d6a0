"""Stick-breaking attention, a scan normalizer (`denominator log_survival`,
docs/normalizer-classes.md), against the float64 reference of
test/reference/row_normalizers.py: the output and every gradient (q, k, v, params) in
float64 and float32, without and with the paper's left-over weight (r_i·v_i), under a
mask region, the built-in causal rule, key padding, Nq != Nk and large |s|; the Python
front-end traces the same kernel as the .mlir file; what cannot run a scan refuses it."""
import ctypes
import importlib.util
import sys

import pytest
import torch

import attn
from attn import sigmoid, softplus
from conftest import EXAMPLES, REPO
from helpers import memref_of

sys.path.insert(0, str(REPO / "test" / "reference"))
import row_normalizers as rn  # noqa: E402

F64 = torch.float64


@pytest.fixture(scope="module")
def kernels(attn_mod):
    compiled = {name: attn.compile(str(EXAMPLES / f"{name}.mlir"))
                for name in ("stick_breaking", "stick_breaking_left_over")}
    # σ(s + bias) over −softplus(s + bias): a learnable shift of every share.
    compiled["shifted"] = attn.kernel(attn.normalizer(
        numerator=lambda s, bias: sigmoid(s + bias),
        log_survival=lambda s, bias: -softplus(s + bias),
        params={"bias": -1.0}, name="shifted_stick_breaking")).compile()
    return compiled


def reference(q, k, v, keep, left_over, bias=None, key_lengths=None, query_start=0):
    """O of stick-breaking in float64 autograd: w from row_normalizers.stick_breaking,
    plus r_i·v_i with `left_over` where the query's own key query_start + i is within
    the keys (below Nk and key_lengths[b])."""
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if bias is not None:
        s = s + bias
    w, r = rn.stick_breaking(s, keep)
    out = w @ v
    if left_over:
        nq, nk = q.shape[-2], k.shape[-2]
        lengths = torch.full((q.shape[0],), nk) if key_lengths is None else key_lengths
        position = query_start + torch.arange(nq)
        own = position[None, :] < lengths.clamp(max=nk)[:, None]              # [B, Nq]
        own_value = torch.zeros_like(out)
        n = max(0, min(nq, nk - query_start))
        own_value[..., :n, :] = v[..., query_start:query_start + n, :]
        out = out + r * own[:, None, :, None] * own_value
    return out


def keep_mask(nq, nk, rule, key_lengths=None, batch=1):
    i = torch.arange(nq)[:, None]
    j = torch.arange(nk)[None, :]
    keep = {"before": j < i, "causal": j <= i, "none": torch.ones(nq, nk, dtype=torch.bool)}[rule]
    keep = keep.expand(batch, 1, nq, nk)
    if key_lengths is not None:
        keep = keep & (j < key_lengths[:, None, None, None])
    return keep


def compare(kernel, dtype, *, nq, nk, rule, is_causal=False, key_lengths=None, left_over=False,
            magnitude=1.0, with_params=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    B, H, d = 2, 2, 8
    q, k = (magnitude * torch.randn(B, H, n, d, generator=g, dtype=F64) for n in (nq, nk))
    v = torch.randn(B, H, nk, d, generator=g, dtype=F64)
    dout = torch.randn(B, H, nq, d, generator=g, dtype=F64)

    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    bias = torch.tensor(-1.0, dtype=F64, requires_grad=True) if with_params else None
    want_out = reference(*leaves, keep_mask(nq, nk, rule, key_lengths, B), left_over, bias,
                         key_lengths)
    wrt = leaves + ([bias] if with_params else [])
    want = [want_out, *torch.autograd.grad(want_out, wrt, dout)]

    ours = [t.to(dtype).clone().requires_grad_() for t in (q, k, v)]
    params = kernel.initial_params(dtype).requires_grad_() if with_params else None
    out = kernel(*ours, params, is_causal=is_causal, key_lengths=key_lengths)
    got = [out, *torch.autograd.grad(out, ours + ([params] if with_params else []),
                                     dout.to(dtype))]
    tol = 1e-11 if dtype == F64 else 2e-5 * max(1.0, magnitude)
    names = ["O", "dq", "dk", "dv", "dbias"]
    for name, a, b in zip(names, got, want):
        a = a.reshape(b.shape).to(F64)
        assert torch.isfinite(a).all(), name
        err = (a - b).abs().max().item()
        assert err <= tol * (1 + b.abs().max().item()), f"{name}: max error {err:.3g}"


DTYPES = pytest.mark.parametrize("dtype", [F64, torch.float32], ids=["f64", "f32"])


@DTYPES
@pytest.mark.parametrize("name", ["stick_breaking", "stick_breaking_left_over"])
def test_mask_region_keys_before_the_query(kernels, dtype, name):
    compare(kernels[name], dtype, nq=13, nk=13, rule="before",
            left_over=name.endswith("left_over"))


@DTYPES
def test_left_over_with_causal_rule_and_key_padding(kernels, dtype):
    """The built-in causal rule adds nothing to j < i; padded keys take no share, and a
    query whose own key is padding (i >= key_lengths[b]) gets no left-over."""
    lengths = torch.tensor([13, 7])
    compare(kernels["stick_breaking_left_over"], dtype, nq=13, nk=13, rule="before",
            is_causal=True, key_lengths=lengths, left_over=True)


@DTYPES
def test_params_causal_padding_and_more_keys_than_queries(kernels, dtype):
    compare(kernels["shifted"], dtype, nq=9, nk=70, rule="causal", is_causal=True,
            key_lengths=torch.tensor([70, 41]), with_params=True)
    compare(kernels["shifted"], dtype, nq=9, nk=70, rule="none", with_params=True, seed=1)


@DTYPES
def test_large_scores(kernels, dtype):
    """|s| in the hundreds: σ saturates to 0 or 1 and the log-survival sum reaches -1e4;
    the log-space scan stays finite and exact where the product of survivals underflows."""
    compare(kernels["stick_breaking_left_over"], dtype, nq=40, nk=40, rule="before",
            left_over=True, magnitude=12.0)


def test_front_end_traces_the_example(attn_mod):
    """examples/frontend/normalizers.py's stick-breaking is the .mlir example's kernel."""
    spec = importlib.util.spec_from_file_location(
        "frontend_normalizers", REPO / "examples" / "frontend" / "normalizers.py")
    examples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(examples)
    expand = "--attn-expand-shared-regions"
    assert (attn.opt(examples.KERNELS["stick_breaking_left_over"], expand) ==
            attn.opt(str(EXAMPLES / "stick_breaking_left_over.mlir"), expand))


@pytest.mark.parametrize("kwargs,message", [
    (dict(denominator="sum", log_survival=lambda s: -softplus(s)),
     "denominator= and log_survival= exclude each other"),
    (dict(left_over="current"), "left_over= applies to a scan normalizer"),
    (dict(log_survival=lambda s: -softplus(s), left_over="first"),
     "left_over='first': expected \"current\""),
])
def test_front_end_errors(kwargs, message):
    with pytest.raises(attn.TraceError, match=message):
        attn.normalizer(numerator=lambda s: sigmoid(s), name="sb", **kwargs)


def test_context_parallel_refuses_a_scan(kernels):
    from attn.context_parallel import context_parallel_attention
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(RuntimeError, match="is a scan normalizer"):
        context_parallel_attention(q, q, q, kernels["stick_breaking"])


def test_runtime_refuses_key_blocks_of_a_scan(kernels):
    """The runtime's partial (key block) calls refuse a scan: a key block's backward
    needs the suffix sums of the blocks after it."""
    q = torch.randn(1, 2, 4, 8)
    path = kernels["stick_breaking"].path
    with pytest.raises(RuntimeError, match=r"is a scan \(stick-breaking\): the backward of a "
                                           r"key block needs the suffix sums"):
        torch.ops.attn.attention_partial_forward(path, q, q, q, torch.empty(0), False, None,
                                                 [], 0, 0)


def test_decoding_rows_match_the_whole_sequence(kernels):
    """A KV-cache step: the last 3 queries at query_start = N - 3 against every key give
    the whole sequence's last rows; the left-over goes to the value at each query's own
    position (key row query_start + i), and the built-in causal rule follows positions."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 20, 8, generator=g, dtype=F64) for _ in range(3))
    for name, causal in (("stick_breaking_left_over", False), ("shifted", True)):
        whole = kernels[name](q, k, v, is_causal=causal)
        step = kernels[name](q[..., -3:, :], k, v, is_causal=causal, query_start=17)
        assert torch.allclose(step, whole[..., -3:, :], rtol=0, atol=1e-13), name


def faint(q, k):
    """q, k whose scores are about -5: σ(s) ≈ 0.007 and d(s) = -softplus(s) ≈ -0.007, so
    hundreds of keys survive and the far keys' weights are not lost in rounding."""
    return -(1 + q.abs()), k.abs()


def test_a_merge_entry_exactly_without_a_left_over(kernels):
    """The forward of a scan without a left-over splits its keys (attn_merge_T combines
    the chunks); with one, the farthest chunk could not tell whether the query's own
    key is padding, so the artifact has no merge and its calls take whole rows."""
    for name, merges in (("stick_breaking", True), ("shifted", True),
                         ("stick_breaking_left_over", False)):
        library = ctypes.CDLL(kernels[name].path)
        assert hasattr(library, "_mlir_ciface_attn_merge_f64") == merges, name


@pytest.mark.parametrize("name", ["stick_breaking", "shifted"])
def test_merge_entry_combines_key_chunks(kernels, name):
    """abi.h, called through ctypes: partial forwards over the key chunks [0, 512) and
    [512, kv_len) (row_max the chunk's log-survival S) merged by attn_merge_f64 give the
    unsplit call's O, row_max = log r and row_sum = 1, bit for bit up to rounding."""
    F = F64
    nk, kv_len, d, rows, query_start = 1300, 1100, 8, 3, 1097
    g = torch.Generator().manual_seed(7)
    q = torch.randn(rows, d, generator=g, dtype=F)
    k, v = (torch.randn(nk, d, generator=g, dtype=F) for _ in range(2))
    q, k = faint(q, k)
    params = kernels[name].initial_params(F).reshape(-1).contiguous() \
        if name == "shifted" else torch.empty(0, dtype=F)
    library = ctypes.CDLL(kernels[name].path)
    forward, merge = library._mlir_ciface_attn_forward_f64, library._mlir_ciface_attn_merge_f64

    def call_forward(o, row_max, row_sum, row_count, kv_begin, kv_end, partial):
        refs = [ctypes.byref(memref_of(t)) for t in (q, k, v, o, row_max, row_sum, row_count,
                                                     params)]
        forward(*refs, ctypes.c_void_p(None), *(ctypes.c_int64(x) for x in (
            0, 0, 0, rows, kv_begin, kv_end, 1, partial, query_start, 0)))

    whole = [torch.zeros(rows, d, dtype=F), torch.zeros(rows, dtype=F), torch.zeros(rows, dtype=F)]
    call_forward(*whole, torch.zeros(rows, dtype=F), 0, kv_len, 0)
    chunks = [(0, 512), (512, kv_len)]
    o_parts = torch.full((len(chunks) * rows, d), float("nan"), dtype=F)
    max_parts, sum_parts, count_parts = (torch.full((len(chunks) * rows,), float("nan"),
                                                    dtype=F) for _ in range(3))
    for split, (begin, end) in enumerate(chunks):
        part = slice(split * rows, (split + 1) * rows)
        call_forward(o_parts[part], max_parts[part], sum_parts[part], count_parts[part],
                     begin, end, 1)
    # Causal at positions query_start + i (the example's mask: keys before the query):
    # chunk 0 keeps its 512 keys, chunk 1 the rest.
    own = 1 if name == "shifted" else 0
    assert count_parts.tolist() == [512.0] * rows + [query_start + i + own - 512.0
                                                     for i in range(rows)]
    merged = [torch.full((rows, d), float("nan"), dtype=F),
              torch.full((rows,), float("nan"), dtype=F), torch.full((rows,), float("nan"), dtype=F)]
    refs = [ctypes.byref(memref_of(t)) for t in (o_parts, max_parts, sum_parts, count_parts,
                                                 *merged, params)]
    merge(*refs, ctypes.c_void_p(None), *(ctypes.c_int64(x) for x in (0, 0, 0, rows, query_start)))
    assert (merged[2] == 1).all()
    for what, a, b in zip(("O", "row_max"), merged, whole):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-13), f"{what}: {(a - b).abs().max()}"
    # The far chunk's share is no rounding error: e^(S_near) is far from 0 and 1.
    assert ((max_parts[rows:] < -1) & (max_parts[rows:] > -20)).all()


@pytest.mark.parametrize("name,left_over", [("stick_breaking", False), ("shifted", False),
                                            ("stick_breaking_left_over", True)])
@pytest.mark.parametrize("causal", [False, True])
def test_decoder_step_over_key_chunks(kernels, name, left_over, causal):
    """A decoder step (Nq = 1 at query_start = Nk - 1 against 4100 keys, B·H = 4 slices
    on 2 threads: key_splits gives 2 chunks) against the float64 reference, with key
    padding, the example's mask (keys before the query) or none, and is_causal; the
    forward of a kernel without a left-over runs in key chunks merged by attn_merge,
    the backward over whole rows."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        B, H, nk, d = 2, 2, 4100, 8
        query_start = nk - 1
        key_lengths = torch.tensor([nk, 3001])
        g = torch.Generator().manual_seed(11)
        q = torch.randn(B, H, 1, d, generator=g, dtype=F64)
        k, v = (torch.randn(B, H, nk, d, generator=g, dtype=F64) for _ in range(2))
        q, k = faint(q, k)
        dout = torch.randn(B, H, 1, d, generator=g, dtype=F64)
        j = torch.arange(nk)
        keep = (j < key_lengths[:, None]) & ((j < query_start) if name != "shifted"
                                            else (j <= query_start) if causal else True)
        keep = keep[:, None, None, :].expand(B, 1, 1, nk)
        with_params = name == "shifted"
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        bias = torch.tensor(-1.0, dtype=F64, requires_grad=True) if with_params else None
        want_out = reference(*leaves, keep, left_over, bias, key_lengths, query_start)
        wrt = leaves + ([bias] if with_params else [])
        want = [want_out, *torch.autograd.grad(want_out, wrt, dout)]
        ours = [t.clone().requires_grad_() for t in (q, k, v)]
        params = kernels[name].initial_params(F64).requires_grad_() if with_params else None
        out = kernels[name](*ours, params, is_causal=causal, key_lengths=key_lengths,
                            query_start=query_start)
        got = [out, *torch.autograd.grad(out, ours + ([params] if with_params else []), dout)]
        for what, a, b in zip(["O", "dq", "dk", "dv", "dbias"], got, want):
            a = a.reshape(b.shape)
            err = (a - b).abs().max().item()
            assert err <= 1e-11 * (1 + b.abs().max().item()), f"{what}: max error {err:.3g}"
    finally:
        torch.set_num_threads(threads)
