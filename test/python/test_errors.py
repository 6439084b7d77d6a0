"""Bad inputs to torch.ops.attn.attention raise RuntimeError naming the problem:
never a crash, never a silent wrong answer."""
import re

import pytest
import torch

from helpers import case_params


def _inputs(B=2, H=2, Nq=5, Nk=6, d=8, dv=4, dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(B, H, Nq, d, generator=g, dtype=dtype),
            torch.randn(B, H, Nk, d, generator=g, dtype=dtype),
            torch.randn(B, H, Nk, dv, generator=g, dtype=dtype))


def _raises(pattern, path, q, k, v, params, is_causal=False, key_lengths=None):
    with pytest.raises(RuntimeError) as ei:
        torch.ops.attn.attention(path, q, k, v, params, is_causal, key_lengths)
    msg = str(ei.value)
    assert re.search(pattern, msg, re.I | re.S), \
        f"error message does not name the problem (want /{pattern}/):\n{msg}"
    return msg


EMPTY = torch.zeros(0, dtype=torch.float64)


@pytest.fixture(scope="module")
def softmax(artifacts):
    return artifacts("softmax")


@pytest.fixture(scope="module")
def multimax(artifacts):
    return artifacts("multimax")


def test_valid_call_works(softmax):
    q, k, v = _inputs()
    out = torch.ops.attn.attention(softmax, q, k, v, EMPTY, False, None)
    assert out.shape == (2, 2, 5, 4)


# ---------------------------------------------------------------------- rank
@pytest.mark.parametrize("which", ["q", "k", "v"])
@pytest.mark.parametrize("rank", [3, 5])
def test_wrong_rank(softmax, which, rank):
    t = dict(zip("qkv", _inputs()))
    x = t[which]
    t[which] = x[0] if rank == 3 else x.unsqueeze(0)
    msg = _raises(r"dim|rank|4-?d|\[B, ?H", softmax, t["q"], t["k"], t["v"], EMPTY)
    assert re.search(rf"\b{which}\b", msg), f"message does not say which tensor: {msg}"


# ------------------------------------------------------------------- shapes
@pytest.mark.parametrize("case", ["head_dim", "kv_len", "batch", "heads"])
def test_mismatched_shapes(softmax, case):
    q, k, v = _inputs()
    if case == "head_dim":          # k's d != q's d
        k = torch.randn(2, 2, 6, 7, dtype=torch.float64)
    elif case == "kv_len":          # v's Nk != k's Nk
        v = torch.randn(2, 2, 5, 4, dtype=torch.float64)
    elif case == "batch":
        k = torch.randn(3, 2, 6, 8, dtype=torch.float64)
        v = torch.randn(3, 2, 6, 4, dtype=torch.float64)
    elif case == "heads":
        v = torch.randn(2, 1, 6, 4, dtype=torch.float64)
    _raises(r"shape|size|match", softmax, q, k, v, EMPTY)


def test_empty_head_dim(softmax):
    q, k, v = _inputs(d=0)
    with pytest.raises(RuntimeError):
        torch.ops.attn.attention(softmax, q, k, v, EMPTY, False, None)


# ------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("dtype", [torch.float16, torch.int32, torch.int64, torch.bfloat16])
def test_unsupported_dtype(softmax, dtype):
    q, k, v = (t.to(dtype) for t in _inputs())
    _raises(r"dtype|float|type|half|int", softmax, q, k, v, EMPTY.to(dtype))


def test_mixed_dtypes(softmax):
    q, k, v = _inputs()
    _raises(r"dtype|float|type", softmax, q, k.float(), v, EMPTY)


def test_params_dtype_mismatch(multimax):
    q, k, v = _inputs()
    _raises(r"dtype|float|type|param", multimax, q, k, v,
            case_params("multimax", torch.float32))


# ------------------------------------------------------------------- params
@pytest.mark.parametrize("n", [0, 7, 9])
def test_wrong_param_count_multimax(multimax, n):
    q, k, v = _inputs()
    msg = _raises(r"param", multimax, q, k, v, torch.ones(n, dtype=torch.float64))
    assert "8" in msg, f"message should say 8 params are expected: {msg}"


def test_wrong_param_count_softmax(softmax):
    q, k, v = _inputs()
    _raises(r"param", softmax, q, k, v, torch.ones(1, dtype=torch.float64))


def test_none_arguments_are_named(softmax, multimax):
    """None for a tensor argument is named (torch's autograd would say "tensor does not
    have a device"); a kernel without params takes None for them."""
    q, k, v = _inputs()
    with pytest.raises(RuntimeError, match=r"attn::attention: params is None \(an undefined "
                       r"tensor\), expected a float64 tensor \[8\] \(kernel multimax_attention"):
        torch.ops.attn.attention(multimax, q, k, v, None, False, None, None)
    with pytest.raises(RuntimeError, match=r"attn::attention: q is None \(an undefined tensor\), "
                       r"expected a tensor \[B, H, Nq, d\]"):
        torch.ops.attn.attention(softmax, None, k, v, None, False, None, None)
    q.requires_grad_()
    out = torch.ops.attn.attention(softmax, q, k, v, None, False, None, None)
    torch.testing.assert_close(out, torch.ops.attn.attention(softmax, q, k, v, EMPTY, False, None))
    out.sum().backward()
    assert q.grad is not None and q.grad.abs().sum() > 0


def test_params_wrong_rank(multimax):
    q, k, v = _inputs()
    _raises(r"param", multimax, q, k, v, torch.ones(2, 4, dtype=torch.float64))


# ----------------------------------------------------------------- artifact
def test_missing_artifact(tmp_path):
    path = str(tmp_path / "does_not_exist.so")
    q, k, v = _inputs()
    msg = _raises(r"no such file|not found|does not exist|cannot open|could not|fail",
                  path, q, k, v, EMPTY)
    assert "does_not_exist.so" in msg, f"message should name the path: {msg}"


def test_not_an_artifact(tmp_path):
    path = tmp_path / "garbage.so"
    path.write_bytes(b"this is not a shared object\n")
    q, k, v = _inputs()
    msg = _raises(r"garbage\.so", str(path), q, k, v, EMPTY)
    assert "garbage.so" in msg


def test_load_of_empty_path(attn_mod):
    with pytest.raises(RuntimeError, match=r"attn: artifact path is empty, expected the path "
                       r"of a \.so produced by attn-compile"):
        attn_mod.load("")


def test_manifest_of_missing_artifact(tmp_path):
    with pytest.raises(RuntimeError):
        torch.ops.attn.manifest(str(tmp_path / "nope.so"))


# -------------------------------------------------------------- key_lengths
@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.bool])
def test_key_lengths_wrong_dtype(softmax, dtype):
    q, k, v = _inputs()
    _raises(r"key_lengths", softmax, q, k, v, EMPTY, False, torch.tensor([3, 4]).to(dtype))


@pytest.mark.parametrize("shape", [(3,), (1,), (2, 1), ()])
def test_key_lengths_wrong_shape(softmax, shape):
    q, k, v = _inputs()
    lens = torch.full(shape, 3, dtype=torch.int64)
    _raises(r"key_lengths", softmax, q, k, v, EMPTY, False, lens)


@pytest.mark.parametrize("vals", [[-1, 3], [3, 7], [100, 2]])
def test_key_lengths_out_of_range(softmax, vals):
    q, k, v = _inputs()                      # Nk = 6
    _raises(r"key_lengths", softmax, q, k, v, EMPTY, False, torch.tensor(vals))


def test_wrapper_reports_errors_too(attn_mod, softmax):
    kern = attn_mod.load(softmax)
    q, k, v = _inputs()
    with pytest.raises(RuntimeError, match=r"(?i)param"):
        kern(q, k, v, params=torch.ones(3, dtype=torch.float64))


# -------------------------------------------------------- empty dimensions
@pytest.mark.parametrize("B,H,Nq,Nk", [(0, 2, 3, 4), (1, 0, 3, 4), (1, 1, 0, 4), (1, 1, 3, 0)])
def test_empty_dimensions_never_crash(softmax, B, H, Nq, Nk):
    """An empty batch/head dim gives empty results; Nq = 0 or Nk = 0 either gives the
    mathematically right result (empty / zeros: every row fully masked) or a clean
    RuntimeError -- never a crash or NaN."""
    q = torch.randn(B, H, Nq, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(B, H, Nk, 8, dtype=torch.float64, requires_grad=True)
    v = torch.randn(B, H, Nk, 4, dtype=torch.float64, requires_grad=True)
    try:
        out = torch.ops.attn.attention(softmax, q, k, v, EMPTY, True, None)
    except RuntimeError as e:
        assert Nq == 0 or Nk == 0, f"unexpected error for B={B}, H={H}: {e}"
        assert re.search(r"Nq|Nk|quer|key", str(e)), str(e)
        return
    assert out.shape == (B, H, Nq, 4)
    assert (out == 0).all()
    out.sum().backward()
    for t in (q, k, v):
        assert t.grad is None or (t.grad == 0).all()


def test_double_backward_is_refused(softmax):
    """The compiled backward is not differentiable: create_graph=True must raise, never
    return a silently wrong (e.g. zero) second derivative."""
    q, k, v = (t.requires_grad_(True) for t in _inputs())
    out = torch.ops.attn.attention(softmax, q, k, v, EMPTY, False, None)
    with pytest.raises(RuntimeError, match=r"(?i)double backward|create_graph|differentiab"):
        g, = torch.autograd.grad(out.sum(), q, create_graph=True)
        torch.autograd.grad(g.sum(), k)
