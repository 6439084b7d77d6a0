"""torch's masks in kernels with the attn_mask input (attn.compile(..., attn_mask=KIND),
the pass attn-add-mask-input): attn.attention against F.scaled_dot_product_attention with
bool and float attn_masks of every broadcast shape, and attn.MultiheadAttention against
torch.nn.MultiheadAttention with attn_mask and key_padding_mask of any pattern; forward and
gradients (q, k, v, and a learnable mask's), float32 and float64; fully masked rows; the
errors that say how to get a kernel with the input."""
import re

import pytest
import torch
import torch.nn.functional as F

from conftest import EXAMPLES
from test_modules import _reference_mha

SOFTMAX = EXAMPLES / "softmax.mlir"
TOL = {torch.float64: 1e-12, torch.float32: 2e-5}


@pytest.fixture(scope="module")
def kernels(attn_mod):
    """The softmax example with each kind of mask input, and without one."""
    return {kind: attn_mod.compile(SOFTMAX, attn_mask=kind)
            for kind in ("bool", "additive", "learnable-additive")} | {
        None: attn_mod.compile(SOFTMAX)}


def _qkv(batch, heads, L, S, E, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    make = lambda n, e: torch.randn(*batch, *heads, n, e, generator=g,
                                    dtype=dtype).requires_grad_()
    return make(L, E), make(S, E), make(S, E + 1)


def _keep(shape, seed):
    """A random bool keep mask (True: takes part) whose every row keeps its last key, so
    that SDPA (NaN on fully masked rows) can be compared."""
    keep = torch.rand(shape, generator=torch.Generator().manual_seed(seed)) > 0.4
    keep[..., -1] = True
    return keep


def _bias(keep, dtype, seed):
    """A float mask: random values where `keep`, -inf elsewhere."""
    values = torch.randn(keep.shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    return values.masked_fill(~keep, float("-inf"))


def _grads(out, inputs, seed):
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=out.dtype)
    return torch.autograd.grad(out, inputs, dout)


def _assert_close(got, want, dtype):
    tol = TOL[dtype]
    assert got.shape == want.shape
    assert torch.allclose(got, want, rtol=tol, atol=tol), (got - want).abs().max()


# (query batch dims, heads) and the mask shapes that broadcast to [*batch, H, L, S]
# (L = 5, S = 7): every dim present or broadcast, fewer dims than q, batch dims flattened.
MASK_SHAPES = [
    ((2,), (3,), (5, 7)), ((2,), (3,), (1, 7)), ((2,), (3,), (3, 5, 7)), ((2,), (3,), (2, 1, 5, 7)),
    ((2,), (3,), (2, 3, 5, 7)), ((2,), (3,), (2, 3, 1, 7)), ((2,), (3,), (1, 1, 1, 7)),
    ((2, 2), (2,), (2, 1, 1, 5, 7)), ((2, 2), (2,), (1, 2, 2, 5, 7)), ((), (2,), (2, 5, 7)),
    ((), (), (5, 7)),
]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("batch,heads,mask_shape", MASK_SHAPES,
                         ids=[f"q{list(b + h)}-mask{list(m)}" for b, h, m in MASK_SHAPES])
@pytest.mark.parametrize("kind,mask_dtype", [("bool", "bool"), ("bool", "float01"),
                                             ("additive", "bool"), ("additive", "float")])
def test_attn_mask_matches_sdpa(attn_mod, kernels, dtype, batch, heads, mask_shape, kind,
                                mask_dtype):
    """Bool masks (True takes part) and float masks (added; 0 / -inf only for a bool
    kernel) of every broadcast shape: O, dq, dk, dv as SDPA's."""
    q, k, v = _qkv(batch, heads, 5, 7, 8, dtype, seed=len(mask_shape))
    keep = _keep(mask_shape, seed=sum(mask_shape))
    mask = {"bool": keep,
            "float01": torch.zeros(mask_shape, dtype=dtype).masked_fill(~keep, float("-inf")),
            "float": _bias(keep, dtype, seed=3)}[mask_dtype]
    got = attn_mod.attention(q, k, v, kernels[kind], attn_mask=mask)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    _assert_close(got, want, dtype)
    for g, w in zip(_grads(got, (q, k, v), 1), _grads(want, (q, k, v), 1)):
        _assert_close(g, w, dtype)


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_odd_lengths_and_scale(attn_mod, kernels, kind):
    """Nq != Nk, odd lengths, scale=: the mask is added after the scaled q·k, as in SDPA."""
    q, k, v = _qkv((3,), (2,), 9, 13, 5, torch.float64, seed=4)
    keep = _keep((3, 1, 9, 13), seed=5)
    mask = keep if kind == "bool" else _bias(keep, torch.float64, seed=6)
    got = attn_mod.attention(q, k, v, kernels[kind], attn_mask=mask, scale=0.3)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)
    _assert_close(got, want, torch.float64)
    for g, w in zip(_grads(got, (q, k, v), 2), _grads(want, (q, k, v), 2)):
        _assert_close(g, w, torch.float64)


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_is_causal_without_mask_and_no_mask(attn_mod, kernels, kind):
    """A kernel with the input runs is_causal and no mask at all like SDPA (its table then
    keeps every pair)."""
    q, k, v = _qkv((2,), (2,), 6, 6, 8, torch.float64, seed=7)
    for is_causal in (False, True):
        got = attn_mod.attention(q, k, v, kernels[kind], is_causal=is_causal)
        want = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        _assert_close(got, want, torch.float64)


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_fully_masked_rows_give_zero(attn_mod, kernels, kind):
    """A row whose every key is masked gives 0 and zero gradients, not NaN; the other
    rows are SDPA's."""
    q, k, v = _qkv((2,), (2,), 5, 6, 4, torch.float64, seed=8)
    keep = _keep((5, 6), seed=9)
    keep[2] = False
    mask = keep if kind == "bool" else _bias(keep, torch.float64, seed=10)
    got = attn_mod.attention(q, k, v, kernels[kind], attn_mask=mask)
    assert torch.equal(got[:, :, 2], torch.zeros_like(got[:, :, 2]))
    rows = [0, 1, 3, 4]
    want = F.scaled_dot_product_attention(q[:, :, rows], k, v, attn_mask=mask[rows])
    _assert_close(got[:, :, rows], want, torch.float64)
    dq, dk, dv = _grads(got, (q, k, v), 3)
    assert torch.isfinite(dk).all() and torch.isfinite(dv).all()
    assert torch.equal(dq[:, :, 2], torch.zeros_like(dq[:, :, 2]))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("mask_shape", [(5, 7), (2, 1, 5, 7), (2, 3, 5, 7), (3, 1, 7)])
def test_learnable_additive_mask_gets_sdpas_gradient(attn_mod, kernels, dtype, mask_shape):
    """A float attn_mask that requires grad, with a learnable-additive kernel: its gradient
    (summed over the dims it broadcasts along) is SDPA's, as are dq, dk, dv."""
    q, k, v = _qkv((2,), (3,), 5, 7, 8, dtype, seed=11)
    mask = _bias(_keep(mask_shape, seed=12), dtype, seed=13).requires_grad_()
    got = attn_mod.attention(q, k, v, kernels["learnable-additive"], attn_mask=mask)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    _assert_close(got, want, dtype)
    got_grads = _grads(got, (q, k, v, mask), 4)
    want_grads = _grads(want, (q, k, v, mask), 4)
    for g, w in zip(got_grads, want_grads):
        _assert_close(g, w, dtype)
    finite = torch.isfinite(mask.detach())
    assert got_grads[3][finite].abs().sum() > 0
    assert torch.equal(got_grads[3][~finite], torch.zeros_like(got_grads[3][~finite]))


def _raises(pattern, fn, exc=RuntimeError):
    with pytest.raises(exc) as info:
        fn()
    assert re.search(pattern, str(info.value), re.S), str(info.value)


def test_errors(attn_mod, kernels):
    q, k, v = _qkv((2,), (2,), 5, 5, 8, torch.float32, seed=14)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    run = lambda kind, **kw: (lambda: attn_mod.attention(q, k, v, kernels[kind], **kw))
    for mask in (causal, torch.zeros(5, 5)):
        _raises(r"attn_mask \(a mask of shape \(5, 5\).* needs the kernel's attn_mask input, "
                r"which kernel softmax_attention does not have: compile it with "
                r"attn.compile\(source, attn_mask='bool'\) \(attn-compile --attn-mask=bool\)",
                run(None, attn_mask=mask), NotImplementedError)
    _raises(r"either attn_mask or is_causal", run("bool", attn_mask=causal, is_causal=True))
    soft = torch.zeros(5, 5).masked_fill(~causal, -1e9)
    _raises(r"a float attn_mask with values other than 0 and -inf needs an additive mask input, "
            r"but kernel softmax_attention has a bool one .*attn_mask='additive'",
            run("bool", attn_mask=soft), NotImplementedError)
    for kind in ("bool", "additive"):
        _raises(rf"attn_mask requires grad, but the attn_mask input of kernel softmax_attention "
                rf"is {kind}, .*attn_mask='learnable-additive'.* or pass attn_mask.detach\(\)",
                run(kind, attn_mask=torch.zeros(5, 5, requires_grad=True)))
    _raises(r"attn_mask of shape \(4, 5\) does not broadcast to \[\*batch, H, L, S\] = "
            r"\[2, 2, 5, 5\]", run("bool", attn_mask=torch.ones(4, 5, dtype=torch.bool)))
    _raises(r"attn_mask has dtype torch.int64, expected bool",
            run("bool", attn_mask=torch.ones(5, 5, dtype=torch.int64)))
    _raises(r"inputs= names 'attn_mask', the kernel's mask input: pass the mask as attn_mask=",
            run("bool", inputs={"attn_mask": torch.ones(1, 1, 1, 1, dtype=torch.int8)}))
    with pytest.raises(ValueError, match=r"attn_mask='causal'; expected None or one of 'bool', "
                                         r"'additive', 'learnable-additive'"):
        attn_mod.compile(SOFTMAX, attn_mask="causal")


def test_manifest_declares_the_input(kernels):
    assert kernels["bool"].inputs == [{"name": "attn_mask", "element": "i8",
                                       "shape": (None,) * 4, "learnable": False,
                                       "init": None}]
    assert [(i["element"], i["learnable"]) for i in kernels["additive"].inputs] == [("float", False)]
    assert kernels["learnable-additive"].inputs[0]["learnable"]
    assert kernels[None].inputs == []


# --- attn.MultiheadAttention against torch.nn.MultiheadAttention -------------------------

def _modules(attn_mod, kernel, dtype, batch_first, heads=2, embed=8):
    torch.manual_seed(15)
    ours = attn_mod.MultiheadAttention(embed, heads, batch_first=batch_first, dtype=dtype,
                                       normalizer=kernel)
    return ours, _reference_mha(ours, batch_first, dtype)


def _holes(batch, keys, seed):
    """A key_padding_mask (True = padded) that is not trailing padding: random holes,
    the first key of every row kept."""
    padded = torch.rand(batch, keys, generator=torch.Generator().manual_seed(seed)) > 0.6
    padded[:, 0] = False
    padded[0, 1] = True
    return padded


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "seq_first"])
@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("masks", ["attn_bool", "attn_float", "attn_3d", "padding_bool",
                                   "padding_float", "both", "padding_causal"])
def test_multihead_attention_matches_torch(attn_mod, kernels, dtype, batch_first, kind, masks):
    """attn_mask ([L, S] or [B*H, L, S]; bool True = masked, or float) and key_padding_mask
    of any pattern, alone and together, and with is_causal: output and the gradients of
    the input and every projection weight as torch's module."""
    if kind == "bool" and masks == "attn_float":
        pytest.skip("a float mask of arbitrary values needs an additive kernel (test_errors)")
    ours, ref = _modules(attn_mod, kernels[kind], dtype, batch_first)
    B, L, S, H = 3, 5, 6, 2
    g = torch.Generator().manual_seed(16)
    x = torch.randn(B, L, 8, generator=g, dtype=dtype)
    mem = torch.randn(B, S, 8, generator=g, dtype=dtype)
    if not batch_first:
        x, mem = x.transpose(0, 1), mem.transpose(0, 1)
    padded = _holes(B, S, seed=17)
    masked = ~_keep((L, S), seed=18)                   # torch's MHA: True = masked
    kwargs = {
        "attn_bool": {"attn_mask": masked},
        "attn_float": {"attn_mask": torch.randn(L, S, generator=g, dtype=dtype)},
        "attn_3d": {"attn_mask": ~_keep((B * H, L, S), seed=19)},
        "padding_bool": {"key_padding_mask": padded},
        "padding_float": {"key_padding_mask": torch.zeros(B, S, dtype=dtype).masked_fill(
            padded, float("-inf"))},
        "both": {"attn_mask": masked, "key_padding_mask": padded},
    }.get(masks)
    if masks == "padding_causal":  # torch's hint: attn_mask is the causal mask
        causal = torch.ones(L, S, dtype=torch.bool).triu(1)
        kwargs, ref_kwargs = ({"key_padding_mask": padded, "is_causal": True},
                              {"key_padding_mask": padded, "attn_mask": causal, "is_causal": True})
    else:
        ref_kwargs = kwargs
    xs = [t.clone().requires_grad_() for t in (x, mem, mem)]
    xr = [t.clone().requires_grad_() for t in (x, mem, mem)]
    got, _ = ours(*xs, need_weights=False, **kwargs)
    want, _ = ref(*xr, need_weights=False, **ref_kwargs)
    _assert_close(got, want, dtype)
    dout = torch.randn(got.shape, generator=g, dtype=dtype)
    got.backward(dout)
    want.backward(dout)
    for a, b in zip(xs, xr):
        _assert_close(a.grad, b.grad, dtype)
    _assert_close(ours.q_proj.weight.grad, ref.in_proj_weight.grad[:8], dtype)
    _assert_close(ours.out_proj.weight.grad, ref.out_proj.weight.grad, dtype)


def test_multihead_attention_weights_and_unbatched(attn_mod, kernels):
    """need_weights=True returns torch's weights with the masks applied; unbatched 2-D
    inputs with a [H, L, S] mask."""
    ours, ref = _modules(attn_mod, kernels["bool"], torch.float64, batch_first=True)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    padded = _holes(2, 5, seed=20)
    got = ours(x, x, x, key_padding_mask=padded, average_attn_weights=False)
    want = ref(x, x, x, key_padding_mask=padded, average_attn_weights=False)
    for a, b in zip(got, want):
        _assert_close(a, b, torch.float64)
    masked = ~_keep((2, 5, 5), seed=21)
    got, _ = ours(x[0], x[0], x[0], attn_mask=masked, need_weights=False)
    want, _ = ref(x[0], x[0], x[0], attn_mask=masked, need_weights=False)
    _assert_close(got, want, torch.float64)


def test_multihead_attention_errors(attn_mod, kernels):
    ours, _ = _modules(attn_mod, kernels[None], torch.float32, batch_first=True)
    x = torch.randn(2, 5, 8)
    with pytest.raises(NotImplementedError, match=r"key_padding_mask: padding that is not "
                       r"trailing .* needs the kernel's attn_mask input: .*attn-compile "
                       r"--attn-mask=bool \(Python: attn.compile\(source, attn_mask=\"bool\"\)\)"):
        ours(x, x, x, key_padding_mask=_holes(2, 5, seed=22))
    with pytest.raises(NotImplementedError, match=r"attn_mask \(a mask of shape \(5, 5\).* "
                       r"needs the kernel's attn_mask input"):
        ours(x, x, x, attn_mask=torch.zeros(5, 5, dtype=torch.bool))
    ours, _ = _modules(attn_mod, kernels["bool"], torch.float32, batch_first=True)
    soft = torch.zeros(2, 5).index_fill(1, torch.tensor([4]), -1e9)
    with pytest.raises(NotImplementedError, match=r"a float key_padding_mask with values other "
                       r"than 0 and -inf needs an additive mask input"):
        ours(x, x, x, key_padding_mask=soft)
