"""GPU code built on first use: attn.compile(ir, cuda_targets=...) compiles the CPU code
up front and the GPU code of one (dtype, head dim) the first time a CUDA call needs it,
cached by content like any artifact (attn.compiler.LazyCuda).

The compile and dispatch parts run wherever Triton has its CUDA backend (the GPU kernels
are the Triton backend's, compiled ahead of time without a GPU): which artifact a CUDA query selects (Kernel.artifact_for, the one path every
call takes), what that artifact holds, that a second request and a second process-level
compile hit the cache, and the errors for what cannot be built. A query "on the GPU" is a
stand-in with the device, dtype and shape of one: artifact_for reads nothing else. The
calls themselves run in the tests at the end, on a GPU only (else "SKIP: no CUDA device").
Each (dtype, head dim) costs a Triton compile of seven kernels per target (tens of seconds
on CI), so the tests share one cache and one target where they can.
"""
import copy
import os
import threading
from types import SimpleNamespace

import pytest
import torch

from conftest import EXAMPLES

TANHMAX = EXAMPLES / "tanhmax.mlir"
TARGETS = "sm_90"


def _triton_cuda():
    try:
        from triton.backends import backends
    except ImportError:
        return False
    return "nvidia" in backends


pytestmark = pytest.mark.skipif(not _triton_cuda(),
                                reason="SKIP: no Triton with a CUDA backend (builds the GPU code)")


def _cuda_query(dtype, head_dim):
    """What Kernel.artifact_for reads of a CUDA query [B, H, N, head_dim]."""
    return SimpleNamespace(device=torch.device("cuda"), dtype=dtype, shape=(1, 2, 16, head_dim))


def _triton_kernels(kernel):
    return {(k["dtype"], k["head_dim"]) for k in kernel.manifest["cuda"]["kernels"]}


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture()
def cache(shared_cache, monkeypatch):
    """The attn.compile cache of this file's tests: cold at its first test, shared by the
    rest, so each (dtype, head dim) builds once."""
    monkeypatch.setenv("ATTN_CACHE_DIR", str(shared_cache))
    return shared_cache


def test_compile_builds_the_cpu_code_only(attn_mod, cache):
    kernel = attn_mod.compile(TANHMAX, dtypes=("f32",), cuda_targets=TARGETS)
    assert kernel.manifest["devices"] == ["cpu"]
    assert kernel.cuda_targets == ["sm_90"]
    assert kernel.cuda_head_dims(torch.bfloat16) == []
    # CPU calls run the artifact itself.
    q = torch.randn(1, 2, 16, 64)
    assert kernel.artifact_for(q) == kernel.path
    assert torch.isfinite(kernel(q, q, q)).all()


def test_a_cuda_query_builds_its_dtype_and_head_dim_only(attn_mod, cache):
    kernel = attn_mod.compile(TANHMAX, dtypes=("f32",), cuda_targets=TARGETS)
    path = kernel.artifact_for(_cuda_query(torch.bfloat16, 64))
    assert path != kernel.path
    variant = attn_mod.load(path)
    assert variant.manifest["devices"] == ["cpu", "cuda"]
    assert variant.cuda_targets == ["sm_90"]
    assert _triton_kernels(variant) == {("bf16", 64)}
    assert kernel.cuda_head_dims(torch.bfloat16) == [64]
    assert kernel.cuda_head_dims(torch.float16) == []
    # The same params and inputs as the kernel's own artifact: the calls' other
    # arguments mean the same whichever artifact runs them.
    assert variant.manifest["params"] == kernel.manifest["params"]
    assert variant.inputs == kernel.inputs


def test_each_variant_is_cached_under_its_own_key(attn_mod, cache):
    kernel = attn_mod.compile(TANHMAX, dtypes=("f32",), cuda_targets=TARGETS)
    bf16 = kernel.artifact_for(_cuda_query(torch.bfloat16, 64))  # built by the test above
    artifacts = set(cache.glob("*.so"))
    # A second request, from the same kernel or from a second compile of the same IR
    # (another module, another process), compiles nothing.
    assert kernel.artifact_for(_cuda_query(torch.bfloat16, 64)) == bf16
    again = attn_mod.compile(TANHMAX, dtypes=("f32",), cuda_targets=TARGETS)
    assert again.artifact_for(_cuda_query(torch.bfloat16, 64)) == bf16
    assert set(cache.glob("*.so")) == artifacts
    # Another dtype, head dim or target set is another artifact (its options differ; the
    # threads below build one).
    assert kernel.lazy_cuda.options_for("f32", 32) != kernel.lazy_cuda.options_for("bf16", 64)
    sm80 = attn_mod.compile(TANHMAX, dtypes=("f32",), cuda_targets="sm_80")
    assert sm80.path == kernel.path  # the CPU code does not depend on the targets
    assert sm80.lazy_cuda.options_for("bf16", 64) != kernel.lazy_cuda.options_for("bf16", 64)


def test_threads_share_one_build(attn_mod, cache):
    kernel = attn_mod.compile(TANHMAX, dtypes=("f32",), cuda_targets=TARGETS)
    paths, errors = [], []

    def request():
        try:
            paths.append(kernel.artifact_for(_cuda_query(torch.float32, 32)))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=request) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(set(paths)) == 1 and len(paths) == 4
    assert paths[0] != kernel.artifact_for(_cuda_query(torch.bfloat16, 64))
    assert _triton_kernels(attn_mod.load(paths[0])) == {("f32", 32)}
    assert kernel.cuda_head_dims(torch.float32) == [32]


def test_what_cannot_be_built_names_what_can(attn_mod, cache):
    kernel = attn_mod.compile(TANHMAX, dtypes=("f32",), cuda_targets=TARGETS)
    with pytest.raises(RuntimeError, match=r"(?s)kernel tanhmax_attention has no GPU code for "
                       r"torch.bfloat16 and head dim 48, and cannot build it .*"
                       r"head dim 48 is not supported on GPU; supported: 16, 32, 64, 96, 128, 256"):
        kernel.artifact_for(_cuda_query(torch.bfloat16, 48))
    with pytest.raises(RuntimeError, match=r"q has dtype torch.float64 on the GPU; the GPU "
                       r"kernels take torch.float32, torch.float16, torch.bfloat16"):
        kernel.artifact_for(_cuda_query(torch.float64, 64))
    assert kernel.cuda_head_dims(torch.bfloat16) == []


def test_a_kernel_the_gpu_cannot_run_fails_on_its_first_cuda_call(attn_mod, cache):
    """The CPU code of a kernel the Triton emitter refuses (the kernelised form) is
    ready at once; the GPU's refusal comes with the first CUDA call."""
    kernel = attn_mod.compile(EXAMPLES / "linear.mlir", dtypes=("f32",), cuda_targets=TARGETS)
    with pytest.raises(RuntimeError, match=r"uses the kernelised \(linear-time\) form, which "
                       r"the Triton emitter does not cover yet"):
        kernel.artifact_for(_cuda_query(torch.bfloat16, 32))


def test_modules_compile_lazily(attn_mod, cache):
    before = set(cache.glob("*.so"))
    mha = attn_mod.MultiheadAttention(128, 2, batch_first=True, normalizer=TANHMAX,
                                      cuda_targets="sm_90")
    assert mha.kernel.manifest["devices"] == ["cpu"] and mha.kernel.cuda_targets == ["sm_90"]
    assert set(cache.glob("*.so")) - before <= {cache / os.path.basename(mha.kernel.path)}
    x = torch.randn(2, 5, 128)
    assert mha(x, x, x, need_weights=False)[0].shape == (2, 5, 128)
    # nn.TransformerEncoder deep-copies its layer: the copy builds on first use too.
    copied = copy.deepcopy(mha)
    assert copied.kernel.artifact_for(_cuda_query(torch.bfloat16, 64)) == \
        mha.kernel.artifact_for(_cuda_query(torch.bfloat16, 64))  # built for the file above


def test_eager_cuda_builds_the_default_variant_up_front(attn_mod, cache):
    kernel = attn_mod.compile(TANHMAX, dtypes=("f32",), cuda_targets="sm_80", lazy_cuda=False)
    assert kernel.lazy_cuda is None
    assert kernel.manifest["devices"] == ["cpu", "cuda"]
    assert _triton_kernels(kernel) == {("bf16", 64)}  # attn-compile's default
    assert kernel.artifact_for(_cuda_query(torch.bfloat16, 64)) == kernel.path


needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="SKIP: no CUDA device")


@needs_gpu
def test_first_cuda_call_runs_the_variant_it_built(attn_mod, cache):
    kernel = attn_mod.compile(TANHMAX, cuda_targets="auto")
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(2, 3, 77, 64, device="cuda", dtype=torch.bfloat16, generator=g)
               .requires_grad_() for _ in range(3))
    out = kernel(q, k, v, is_causal=True)
    out.float().sum().backward()
    assert kernel.cuda_head_dims(torch.bfloat16) == [64]
    cpu = kernel(*(t.detach().double().cpu() for t in (q, k, v)), is_causal=True)
    assert (out.double().cpu() - cpu).abs().max() < 4e-2 * cpu.abs().max()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v))


@needs_gpu
def test_torch_compile_builds_the_variant_while_tracing(attn_mod, cache):
    kernel = attn_mod.compile(TANHMAX, cuda_targets="auto")
    q = torch.randn(2, 3, 40, 32, device="cuda", dtype=torch.float16)
    compiled = torch.compile(lambda q: attn_mod.attention(q, q, q, kernel), fullgraph=True)
    assert torch.allclose(compiled(q), attn_mod.attention(q, q, q, kernel), atol=1e-2)
    assert kernel.cuda_head_dims(torch.float16) == [32]
