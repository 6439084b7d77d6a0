"""torch.library: every tensor op of torch.ops.attn passes torch.library.opcheck with its
default test utils (schema, autograd registration, fake tensor, AOT dispatch with
dynamic shapes, gradients included), in float32 and float64, causal or not, with
learnable params that require grad, with key_lengths and with a learnable tensor input
(Luong local-p's p[b, h, i]). The manifest op takes no tensor; attn.Kernel reads it once
at load."""
import pytest
import torch

from conftest import EXAMPLES, REPO

# (kernel, is_causal, key_lengths, tensor inputs)
CASES = {
    "softmax": ("softmax", False, None, False),
    "softmax-causal-padded": ("softmax", True, [7, 4], False),
    "multimax-padded": ("multimax", False, [5, 7], False),
    "luong_local-causal": ("luong_local", True, None, True),
}
SOURCES = {"softmax": EXAMPLES / "softmax.mlir", "multimax": EXAMPLES / "multimax.mlir",
           "luong_local": REPO / "examples" / "families" / "luong_local.mlir"}


@pytest.fixture(scope="module")
def kernels(attn_mod):
    return {name: attn_mod.compile(path) for name, path in SOURCES.items()}


def _inputs(kernel, dtype, is_causal, lengths, rows, seed=0):
    """(artifact, q, k, v, params, is_causal, key_lengths, inputs), the tensors requiring
    grad; B=2, H=2, Nq=5, Nk=7, d=8, dv=6; inputs: [p [B, H, Nq]] with `rows`, else None."""
    g = torch.Generator().manual_seed(seed)
    leaf = lambda *shape: torch.randn(*shape, generator=g, dtype=dtype).requires_grad_()
    q, k, v = leaf(2, 2, 5, 8), leaf(2, 2, 7, 8), leaf(2, 2, 7, 6)
    params = (kernel.initial_params(dtype) + 0.1).requires_grad_(bool(kernel.param_names))
    key_lengths = None if lengths is None else torch.tensor(lengths)
    inputs = [(torch.rand(2, 2, 5, generator=g, dtype=dtype) * 7).requires_grad_()] if rows else None
    return kernel.path, q, k, v, params, is_causal, key_lengths, inputs


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", list(CASES))
def test_opcheck_attention_ops(kernels, case, dtype):
    name, is_causal, lengths, rows = CASES[case]
    artifact, q, k, v, params, causal, key_lengths, inputs = _inputs(
        kernels[name], dtype, is_causal, lengths, rows)
    args = (artifact, q, k, v, params, causal, key_lengths, inputs)
    torch.library.opcheck(torch.ops.attn.attention.default, args)
    torch.library.opcheck(torch.ops.attn.attention_forward.default, args)
    torch.library.opcheck(torch.ops.attn.attention_weights.default,
                          (artifact, q, k, params, causal, key_lengths, inputs))
    with torch.no_grad():
        out, row_max, row_sum = torch.ops.attn.attention_forward(*args)
    grad_out = torch.randn_like(out).requires_grad_()
    torch.library.opcheck(torch.ops.attn.attention_backward.default,
                          (artifact, q, k, v, params, out, row_max, row_sum, grad_out, causal,
                           key_lengths, inputs))


def test_opcheck_per_batch_positions(kernels):
    """query_start and key_starts as [B] tensors (the keys of each batch entry start at
    their own position), causal and padded: the same opchecks."""
    artifact, q, k, v, params, causal, key_lengths, inputs = _inputs(
        kernels["softmax"], torch.float64, True, [7, 4], False)
    positions = {"query_start": torch.tensor([3, 6]), "key_starts": torch.tensor([2, 0])}
    args = (artifact, q, k, v, params, causal, key_lengths, inputs)
    torch.library.opcheck(torch.ops.attn.attention.default, args, positions)
    torch.library.opcheck(torch.ops.attn.attention_weights.default,
                          (artifact, q, k, params, causal, key_lengths, inputs), positions)
    with torch.no_grad():
        out, row_max, row_sum = torch.ops.attn.attention_forward(*args, **positions)
    torch.library.opcheck(torch.ops.attn.attention_backward.default,
                          (artifact, q, k, v, params, out, row_max, row_sum,
                           torch.randn_like(out).requires_grad_(), causal, key_lengths, inputs),
                          positions)


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.float64])
def test_opcheck_key_lengths_from_padding(attn_mod, dtype):
    padded = torch.arange(6) >= torch.tensor([[6], [2], [0]])
    mask = padded if dtype == torch.bool else torch.zeros(3, 6, dtype=dtype).masked_fill(
        padded, float("-inf")).requires_grad_()
    torch.library.opcheck(torch.ops.attn.key_lengths_from_padding.default, (mask, 6))
    assert torch.ops.attn.key_lengths_from_padding(mask, 6).tolist() == [6, 2, 0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck_keep_from_bias(attn_mod, dtype):
    bias = torch.zeros(2, 1, 3, 4, dtype=dtype)
    bias[0, 0, 1, 2] = float("-inf")
    torch.library.opcheck(torch.ops.attn.keep_from_bias.default, (bias, "attn_mask", "k"))
    assert torch.equal(torch.ops.attn.keep_from_bias(bias, "attn_mask", "k"), bias == 0)
    with pytest.raises(NotImplementedError, match=r"a float attn_mask with values other than 0 "
                                                  r"and -inf .* but kernel k has a bool one"):
        torch.ops.attn.keep_from_bias(bias + 1, "attn_mask", "k")


def test_attention_is_one_autograd_function_over_forward_and_backward_ops(kernels):
    """The op's gradients are those of attention_backward applied to attention_forward's
    outputs, bit for bit; the forward/backward ops themselves are not differentiable."""
    artifact, q, k, v, params, causal, key_lengths, inputs = _inputs(
        kernels["luong_local"], torch.float64, True, [7, 3], True)
    out = torch.ops.attn.attention(artifact, q, k, v, params, causal, key_lengths, inputs)
    grad_out = torch.randn_like(out)
    got = torch.autograd.grad(out, [q, k, v, params, *inputs], grad_out)
    fwd = torch.ops.attn.attention_forward(artifact, q, k, v, params, causal, key_lengths,
                                           inputs)
    assert not any(t.requires_grad for t in fwd)
    assert torch.equal(fwd[0], out.detach())
    want = torch.ops.attn.attention_backward(artifact, q, k, v, params, *fwd, grad_out, causal,
                                             key_lengths, inputs)
    want = (*want[:4], *want[4])   # dq, dk, dv, dparams, then one per tensor input
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_fakes_follow_symbolic_sizes(kernels):
    """The fake implementations give the kernels' shapes and dtypes under FakeTensorMode
    with symbolic sizes (what torch.compile's dynamic shapes see)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    kernel = kernels["multimax"]
    mode = FakeTensorMode(shape_env=ShapeEnv())
    q, k, v = (mode.from_tensor(torch.randn(2, 3, 9, 8), static_shapes=False) for _ in range(3))
    params = mode.from_tensor(kernel.initial_params())
    with mode:
        out, row_max, row_sum = torch.ops.attn.attention_forward(kernel.path, q, k, v, params)
        grads = torch.ops.attn.attention_backward(kernel.path, q, k, v, params, out, row_max,
                                                  row_sum, out)
        weights = torch.ops.attn.attention_weights(kernel.path, q, k, params)
    assert isinstance(out.shape[2], torch.SymInt)
    assert out.shape == q.shape and row_max.shape == q.shape[:-1] == row_sum.shape
    assert [g.shape for g in grads[:4]] == [q.shape, k.shape, v.shape, params.shape]
    assert list(grads[4]) == []   # no tensor inputs, no input gradients
    assert weights.shape == (*q.shape[:-1], k.shape[2])


def test_meta_tensors_mixed_with_real_ones_are_refused(kernels):
    """An eager call with some tensors on the meta device reaches the fakes (the meta
    dispatch key wins over CPU): they refuse the mix instead of returning uninitialised
    memory on q's device. All on meta, the fakes give the shapes; CPU key lengths may join."""
    kernel = kernels["multimax"]
    q, k, v = (torch.randn(2, 3, 9, 8) for _ in range(3))
    params = kernel.initial_params()
    with pytest.raises(RuntimeError, match="attn::attention_forward: params on the meta device "
                                           "but q on cpu; expected q, k, v, params on one device"):
        torch.ops.attn.attention(kernel.path, q, k, v, params.to("meta"))  # autograd: forward op
    with pytest.raises(RuntimeError, match="attn::attention: params on the meta device"), \
            torch.inference_mode():
        torch.ops.attn.attention(kernel.path, q, k, v, params.to("meta"))
    with pytest.raises(RuntimeError, match="key_lengths on the meta device but q on cpu"):
        torch.ops.attn.attention_weights(kernel.path, q, k, params, False,
                                         torch.tensor([9, 2], device="meta"))
    with pytest.raises(RuntimeError, match="grad_out, out, row_max, row_sum on the meta device"):
        meta = torch.empty(2, 3, 9, device="meta")
        torch.ops.attn.attention_backward(kernel.path, q, k, v, params, q.to("meta"), meta, meta,
                                          q.to("meta"))
    out = torch.ops.attn.attention(kernel.path, q.to("meta"), k.to("meta"), v.to("meta"),
                                   params.to("meta"), False, torch.tensor([9, 2]))
    assert out.device.type == "meta" and out.shape == q.shape
    with pytest.raises(RuntimeError, match="key_padding_mask is on the meta device"):
        torch.ops.attn.key_lengths_from_padding(torch.zeros(2, 9, dtype=torch.bool, device="meta"), 9)


def test_inference_mode_runs_the_backend_kernel(kernels):
    """Under inference_mode the Autograd kernel is skipped: attention's own CPU kernel runs."""
    artifact, q, k, v, params, causal, key_lengths, _ = _inputs(
        kernels["multimax"], torch.float64, True, [7, 2], False)
    want = torch.ops.attn.attention(artifact, q, k, v, params, causal, key_lengths)
    with torch.inference_mode():
        got = torch.ops.attn.attention(artifact, q, k, v, params, causal, key_lengths)
    assert torch.equal(got, want.detach())


def test_fakes_load_with_the_library_alone(kernels, tmp_path):
    """A process that loads libattn_runtime.so itself gets the fakes from `import attn.ops`
    (the module the C++ library names with set_python_module)."""
    import subprocess
    import sys

    from conftest import RUNTIME_LIB

    script = f"""
import torch
torch.ops.load_library({str(RUNTIME_LIB)!r})
import attn.ops
from torch._subclasses.fake_tensor import FakeTensorMode
mode = FakeTensorMode()
q = mode.from_tensor(torch.randn(2, 3, 5, 8))
with mode:
    out = torch.ops.attn.attention({kernels["softmax"].path!r}, q, q, q, q.new_empty(0))
print(tuple(out.shape))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(2, 3, 5, 8)"


def test_fakes_of_cuda_tensors(kernels):
    """On the GPU the kernels return float32 row statistics, dparams of params' dtype and
    no input gradients; the fakes say so (checked here without a GPU: fake CUDA tensors)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(2, 3, 5, 64, device="cuda", dtype=torch.bfloat16)
        params = torch.empty(8, device="cuda", dtype=torch.float32)
        out, row_max, row_sum = torch.ops.attn.attention_forward(kernels["multimax"].path, q, q,
                                                                 q, params)
        grads = torch.ops.attn.attention_backward(kernels["multimax"].path, q, q, q, params,
                                                  out, row_max, row_sum, out)
    assert (out.dtype, out.device.type) == (torch.bfloat16, "cuda")
    assert row_max.dtype == row_sum.dtype == torch.float32
    assert [g.dtype for g in grads[:4]] == [torch.bfloat16] * 3 + [torch.float32]
    assert list(grads[4]) == []
