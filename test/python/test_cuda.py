"""GPU kernels (attn-compile --cuda-targets) vs the eager float64 reference.

Runs only where torch.cuda.is_available(); everywhere else every test here is skipped
with the reason "SKIP: no CUDA device" (and "SKIP: no Triton with a CUDA backend", which
attn-compile needs for the cubins). The artifacts are compiled for the compute capability
of cuda:0 (f32, f16 and bf16, d = 64), or taken from $ATTN_PREBUILT_ARTIFACTS.

Every example normalizer, float32 / float16 / bfloat16, with and without causal mask and
key_lengths: O, dq, dk, dv and dparams (the normalizer's learnable params). The inputs are
rounded to the dtype first and the float64 reference is evaluated on those rounded
values, so the error measured is the kernel's. Allowed max abs error per tensor:

    max(REL_TOL[dtype] * max|reference|, 2 * error of eager PyTorch in that dtype)

(the second term covers what eager PyTorch itself cannot do in low precision, e.g. a
score within rounding of a relu / multimax kink taking the other branch).
"""
import os
import subprocess
import sys

import pytest
import torch

import reference as ref
from conftest import ATTN_COMPILE, EXAMPLES, NORMALIZER_NAMES, PREBUILT, prebuilt_artifact
from helpers import GRAD_NAMES, case_params, errors, log_errors, make_inputs, reference_grads, seed_of

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="SKIP: no CUDA device")

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
REL_TOL = {torch.float32: 1e-3, torch.float16: 1e-2, torch.bfloat16: 4e-2}
MASKS = {"none": (False, False), "causal": (True, False), "pad": (False, True),
         "causal+pad": (True, True)}
# (B, H, Nq, Nk): N not a multiple of any tile, Nq != Nk
SHAPE = (2, 3, 77, 131)


def _triton_cuda():
    try:
        from triton.backends import backends
    except ImportError:
        return False
    return "nvidia" in backends


class _CudaArtifacts:
    """examples/normalizers/<name>.mlir compiled with --cuda-targets=sm_XY of cuda:0."""

    def __init__(self, outdir):
        self.outdir = outdir
        major, minor = torch.cuda.get_device_capability(0)
        self.target = f"sm_{major}{minor}"
        self.cache = {}

    def __call__(self, name, cpu_only=False):
        if PREBUILT is not None:
            return prebuilt_artifact(f"{name}{'-cpu' if cpu_only else ''}")
        key = (name, cpu_only)
        if key not in self.cache:
            out = self.outdir / (f"{name}{'-cpu' if cpu_only else ''}.so")
            cmd = [str(ATTN_COMPILE), str(EXAMPLES / f"{name}.mlir"), "-o", str(out)]
            if not cpu_only:
                cmd += [f"--cuda-targets={self.target}", "--cuda-dtypes=f32,f16,bf16",
                        "--cuda-head-dims=64"]
            r = subprocess.run(cmd, capture_output=True, text=True,
                               env=dict(os.environ, ATTN_PYTHON=sys.executable))
            if r.returncode != 0 or not out.exists():
                pytest.fail(f"{' '.join(cmd)} failed (rc={r.returncode}):\n{r.stderr[-4000:]}",
                            pytrace=False)
            self.cache[key] = str(out)
        return self.cache[key]


@pytest.fixture(scope="module")
def cuda_artifacts(tmp_path_factory, attn_mod):
    if PREBUILT is None and not _triton_cuda():
        pytest.skip("SKIP: no Triton with a CUDA backend (attn-compile --cuda-targets needs it)")
    return _CudaArtifacts(tmp_path_factory.mktemp("cuda_artifacts"))


def _head_dim(attn_mod, path, dtype):
    dims = attn_mod.load(path).cuda_head_dims(dtype)
    assert dims, f"{path} has no GPU forward kernel for {dtype}"
    return 64 if 64 in dims else dims[0]


def _grads_on(device, path, q, k, v, params, dout, is_causal, lens):
    """Forward + backward through torch.ops.attn.attention on `device`."""
    leaves = [t.detach().to(device).requires_grad_(True) for t in (q, k, v, params)]
    lens_dev = None if lens is None else lens.to(device)
    out = torch.ops.attn.attention(path, *leaves, is_causal, lens_dev)
    grads = torch.autograd.grad(out, leaves, grad_outputs=dout.to(device), allow_unused=True)
    grads = [torch.zeros_like(x) if g is None else g for x, g in zip(leaves, grads)]
    result = dict(zip(GRAD_NAMES, [out.detach()] + grads))
    return {n: t.cpu() for n, t in result.items()}


def _eager(name, q, k, v, params, dout, is_causal, lens, dtype):
    """The reference formulas evaluated in `dtype` (eager PyTorch; on the CPU, where the
    reference builds its masks)."""
    c = lambda t: t.detach().to(dtype)
    return ref.attention_and_grads(name, c(q), c(k), c(v), c(params), c(dout), is_causal, lens)


def _check(name, dtype, got, want, eager, context):
    errs = errors(got, want)
    eager_errs = errors(eager, want)
    bad, used = [], {}
    for n, (err, _) in errs.items():
        ref_max = want[n].abs().max().item() if want[n].numel() else 0.0
        allowed = max(REL_TOL[dtype] * ref_max, 2.0 * eager_errs[n][0])
        used[n] = (err, err / allowed if allowed > 0 else (0.0 if err == 0 else float("inf")))
        if not err <= allowed:
            bad.append(f"{n}: max abs err {err:.3e} (allowed {allowed:.3e}, eager "
                       f"{eager_errs[n][0]:.3e})")
    log_errors((name, f"cuda-{str(dtype).split('.')[-1]}"), used)
    assert not bad, f"{context}: " + "; ".join(bad)


@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("name", NORMALIZER_NAMES)
def test_forward_and_gradients(cuda_artifacts, attn_mod, name, dt, mask):
    dtype = DTYPES[dt]
    path = cuda_artifacts(name)
    d = _head_dim(attn_mod, path, dtype)
    B, H, Nq, Nk = SHAPE
    is_causal, padding = MASKS[mask]
    q, k, v, dout, lens = make_inputs(name, B, H, Nq, Nk, d, d, seed_of("cuda", name, mask),
                                      padding, dtype)
    params = case_params(name, dtype)
    got = _grads_on("cuda", path, q, k, v, params, dout, is_causal, lens)
    for n, t in got.items():
        assert t.dtype == dtype, f"{n} came back as {t.dtype}, expected {dtype}"
    want = reference_grads(name, q, k, v, params, dout, is_causal, lens)
    eager = _eager(name, q, k, v, params, dout, is_causal, lens, dtype)
    _check(name, dtype, got, want, eager, f"{name} {dt} {mask} d={d}")


@pytest.mark.parametrize("name", ["softmax", "multimax"])
def test_every_compiled_head_dim(cuda_artifacts, attn_mod, name):
    path = cuda_artifacts(name)
    for dtype in DTYPES.values():
        for d in attn_mod.load(path).cuda_head_dims(dtype):
            q, k, v, dout, lens = make_inputs(name, 1, 2, 70, 70, d, d, seed_of("cuda-d", d),
                                              True, dtype)
            params = case_params(name, dtype)
            got = _grads_on("cuda", path, q, k, v, params, dout, True, lens)
            want = reference_grads(name, q, k, v, params, dout, True, lens)
            eager = _eager(name, q, k, v, params, dout, True, lens, dtype)
            _check(name, dtype, got, want, eager, f"{name} {dtype} d={d}")


def test_row_statistics_match_the_cpu_kernels(cuda_artifacts, attn_mod):
    """forward_with_stats: the GPU's float32 row_max / row_sum mean what the CPU ABI's do."""
    kern = attn_mod.load(cuda_artifacts("tanhmax"))
    q, k, v, _, lens = make_inputs("tanhmax", 2, 2, 40, 50, 64, 64, 7, True, torch.float32)
    o_cpu, m_cpu, s_cpu = kern.forward_with_stats(q, k, v, None, True, lens)
    o_gpu, m_gpu, s_gpu = kern.forward_with_stats(q.cuda(), k.cuda(), v.cuda(), None, True, lens)
    assert m_gpu.dtype == torch.float32 and m_gpu.is_cuda and s_gpu.shape == (2, 2, 40)
    torch.testing.assert_close(o_gpu.cpu(), o_cpu, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(m_gpu.cpu(), m_cpu, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(s_gpu.cpu(), s_cpu, rtol=1e-3, atol=1e-5)


def test_strided_inputs_side_stream_and_params_dtype(cuda_artifacts, attn_mod):
    """Non-contiguous [B, N, H, d] views, a non-default current stream, float32 params for
    bfloat16 inputs (their gradient comes back float32) and CUDA key_lengths."""
    kern = attn_mod.load(cuda_artifacts("multimax"))
    d = _head_dim(attn_mod, kern.path, torch.bfloat16)
    q, k, v, dout, lens = make_inputs("multimax", 2, 2, 65, 65, d, d, 11, True, torch.bfloat16)
    view = lambda t: t.transpose(1, 2).contiguous().cuda().transpose(1, 2)  # [B,N,H,d] memory
    params = case_params("multimax", torch.float32).cuda().requires_grad_()
    qv = view(q).requires_grad_()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        out = kern(qv, view(k), view(v), params, True, lens.cuda())
        out.backward(dout.cuda())
    stream.synchronize()
    assert params.grad.dtype == torch.float32 and qv.grad.dtype == torch.bfloat16
    want = reference_grads("multimax", q, k, v, params.detach().cpu(), dout, True, lens)
    got = {"O": out.detach().cpu(), "dq": qv.grad.cpu(), "dparams": params.grad.cpu()}
    for n, t in got.items():
        scale = want[n].abs().max().item()
        assert (t.double() - want[n]).abs().max().item() <= 5e-2 * scale, n


def test_multihead_attention_on_the_gpu(cuda_artifacts, attn_mod):
    """attn.MultiheadAttention moved to CUDA gives the CPU module's results."""
    torch.manual_seed(0)
    path = cuda_artifacts("multimax")
    cpu = attn_mod.MultiheadAttention(128, 2, batch_first=True, normalizer=path)
    gpu = attn_mod.MultiheadAttention(128, 2, batch_first=True, normalizer=path)
    gpu.load_state_dict(cpu.state_dict())
    gpu.cuda()
    x = torch.randn(2, 33, 128)
    out_cpu, _ = cpu(x, x, x, is_causal=True)
    out_gpu, _ = gpu(x.cuda(), x.cuda(), x.cuda(), is_causal=True)
    torch.testing.assert_close(out_gpu.cpu(), out_cpu, rtol=2e-3, atol=2e-4)
    out_cpu.pow(2).sum().backward()
    out_gpu.pow(2).sum().backward()
    for (n, p_cpu), p_gpu in zip(cpu.named_parameters(), gpu.parameters()):
        torch.testing.assert_close(p_gpu.grad.cpu(), p_cpu.grad, rtol=5e-3, atol=5e-4, msg=n)


# ------------------------------------------------------------------------ errors

def _raises(pattern, path, q, k, v, params, key_lengths=None):
    with pytest.raises(RuntimeError, match=pattern):
        torch.ops.attn.attention(path, q, k, v, params, False, key_lengths)


def test_errors(cuda_artifacts, attn_mod):
    path = cuda_artifacts("softmax")
    d = _head_dim(attn_mod, path, torch.float16)
    empty = torch.zeros(0, device="cuda")
    q = torch.randn(1, 2, 8, d, device="cuda", dtype=torch.float16)
    _raises(r"compiled without CUDA code.*--cuda-targets", cuda_artifacts("softmax", cpu_only=True),
            q.float(), q.float(), q.float(), empty)
    _raises(r"same device", path, q, q.cpu(), q, empty)
    _raises(r"q has dtype float64 but the GPU kernels .* are for dtypes", path,
            q.double(), q.double(), q.double(), empty.double())
    unsupported = next(x for x in range(8, 300, 8)
                       if x not in attn_mod.load(path).cuda_head_dims(torch.float16))
    qd = torch.randn(1, 2, 8, unsupported, device="cuda", dtype=torch.float16)
    _raises(rf"head dim d = {unsupported} is not supported on the GPU.*supported head dims: .*{d}",
            path, qd, qd, qd, empty.half())
    _raises(r"dv == d", path, q, q, q[..., : d // 2].contiguous(), empty.half())
    _raises(r"key_lengths\[0\] = 9", path, q, q, q, empty.half(),
            torch.tensor([9], device="cuda"))
    if torch.cuda.device_count() > 1:
        _raises(r"same device", path, q, q.to("cuda:1"), q, empty.half())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
def test_opcheck_on_the_gpu(cuda_artifacts, attn_mod, dtype):
    """torch.library.opcheck of the tensor ops on CUDA tensors (float32 row statistics,
    float32 params with bf16 inputs)."""
    path = cuda_artifacts("multimax")
    d = _head_dim(attn_mod, path, dtype)
    g = torch.Generator(device="cuda").manual_seed(0)
    leaf = lambda *s: torch.randn(*s, device="cuda", dtype=dtype, generator=g).requires_grad_()
    q, k, v = leaf(2, 2, 17, d), leaf(2, 2, 23, d), leaf(2, 2, 23, d)
    params = attn_mod.load(path).initial_params(torch.float32, "cuda").requires_grad_()
    lengths = torch.tensor([23, 9], device="cuda")
    args = (path, q, k, v, params, True, lengths, None)
    torch.library.opcheck(torch.ops.attn.attention.default, args)
    torch.library.opcheck(torch.ops.attn.attention_forward.default, args)
    with torch.no_grad():
        out, row_max, row_sum = torch.ops.attn.attention_forward(*args)
    assert row_max.dtype == row_sum.dtype == torch.float32
    torch.library.opcheck(torch.ops.attn.attention_backward.default,
                          (path, q, k, v, params, out, row_max, row_sum,
                           torch.randn_like(out).requires_grad_(), True, lengths, None))
