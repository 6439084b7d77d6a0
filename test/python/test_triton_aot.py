"""The generated Triton kernels compile ahead of time for the GPUs they target, without a
GPU: tensor-core code on both, wgmma (Hopper's warpgroup MMA) for sm_90 and mma.sync for
sm_80. The same kernels are checked numerically by test_triton_interpreter.py."""
import ctypes
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import EXAMPLES

triton = pytest.importorskip("triton")

from attn import triton_backend  # noqa: E402


@pytest.fixture(scope="module")
def cuda_target():
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("TRITON_INTERPRET=1: this process runs Triton kernels interpreted")
    from triton.backends import backends
    if "nvidia" not in backends:
        pytest.skip(f"this Triton has no CUDA backend (backends: {sorted(backends)})")
    from triton.backends.compiler import GPUTarget
    return lambda arch: GPUTarget("cuda", arch, 32)


@pytest.mark.parametrize("arch,instruction,absent", [(90, "wgmma.mma_async", "mma.sync"),
                                                     (80, "mma.sync", "wgmma")])
def test_kernels_use_tensor_cores(cuda_target, arch, instruction, absent):
    kernel = triton_backend.compile_triton(str(EXAMPLES / "tanhmax.mlir"))
    compiled = kernel.compile_ahead(cuda_target(arch), dtype=torch.bfloat16, head_dim=64,
                                    is_causal=True, has_key_lengths=True,
                                    names=("attn_fwd", "attn_bwd_dkdv", "attn_bwd_dq"))
    for name, binary in compiled.items():
        ptx = binary.asm["ptx"]
        assert f".target sm_{arch}" in ptx, f"{name}: not compiled for sm_{arch}"
        assert instruction in ptx, f"{name} for sm_{arch} has no {instruction}"
        assert absent not in ptx, f"{name} for sm_{arch} uses {absent}"
        assert binary.asm.get("cubin"), f"{name}: no cubin for sm_{arch}"



def test_block_sparse_kernels_compile_with_wgmma(cuda_target):
    """The tile-skipping loops (an `indices` mask) and a learnable sink compile for sm_90."""
    kernel = triton_backend.compile_triton(str(EXAMPLES.parent / "families" /
                                               "sliding_window_sinks.mlir"))
    compiled = kernel.compile_ahead(cuda_target(90), dtype=torch.bfloat16, head_dim=64,
                                    is_causal=True, has_key_lengths=True,
                                    names=("attn_fwd", "attn_bwd_dkdv", "attn_bwd_dq"))
    for name, binary in compiled.items():
        assert "wgmma.mma_async" in binary.asm["ptx"], f"{name} has no wgmma"


@pytest.mark.parametrize("source,names", [
    ("t5_bias", ("attn_fwd",)), ("integer_ops", ("attn_fwd",)),
    ("cosine", ("attn_fwd", "attn_bwd_dkdv", "attn_bwd_dq")),
    ("luong_general", ("attn_fwd", "attn_bwd_dkdv", "attn_bwd_dq")),
    ("feature_map", ("attn_fwd", "attn_bwd_dq")), ("math_ops", ("attn_fwd",))])
def test_new_scalar_forms_compile(cuda_target, source, names):
    """What the interpreter cases check numerically also compiles for sm_90: the integer
    helpers (ctlz_ on 64 bits for T5's buckets, and the others of INTEGER_OPS), the
    cosine contraction's unit rows and their chain rule, the bilinear one's q·W,
    dq'·Wᵀ and dW slots (W 32 x 32: head dim 32), a feature map's φ and φ', and the
    math helpers of the prelude with int64 index arithmetic (MATH_OPS; the int64
    positions of the templates compile in every kernel here)."""
    from triton_table_kernels import FEATURE_MAP, INTEGER_OPS, MATH_OPS

    shared = {"integer_ops": INTEGER_OPS, "feature_map": FEATURE_MAP, "math_ops": MATH_OPS}
    ir = shared.get(source) or str(EXAMPLES.parent / "families" / f"{source}.mlir")
    compiled = triton_backend.compile_triton(ir).compile_ahead(
        cuda_target(90), dtype=torch.bfloat16, head_dim=32 if source == "luong_general" else 64,
        names=names)
    for name, binary in compiled.items():
        assert "wgmma.mma_async" in binary.asm["ptx"], f"{source} {name} has no wgmma"


def test_projected_contractions_compile(cuda_target):
    """The additive contraction's [16, 16, n] tanh tile and its weights' gradient slots
    (bahdanau: n = d = 32) and a learnable projection before a feature map
    (PROJECTED_FEATURES: W [24, 12]) compile for sm_80 with their own schedules."""
    from triton_table_kernels import PROJECTED_FEATURES

    for ir, head_dim, names in (
            (str(EXAMPLES.parent / "families" / "bahdanau.mlir"), 32, ("attn_fwd", "attn_bwd_dq")),
            (PROJECTED_FEATURES, 12, ("attn_bwd_dkdv",))):
        compiled = triton_backend.compile_triton(ir).compile_ahead(
            cuda_target(80), dtype=torch.bfloat16, head_dim=head_dim, is_causal=True,
            has_key_lengths=True, names=names)
        for name, binary in compiled.items():
            assert "mma.sync" in binary.asm["ptx"], f"{name} of {head_dim} has no mma.sync"
            assert binary.asm.get("cubin"), f"{name}: no cubin for sm_80"


@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("source", ["luong_concat", "nested_tanh"])
def test_head_dim_16_of_the_weighted_contractions(cuda_target, arch, source):
    """luong_concat (W_q, W_k [8, 16]) and nested_tanh (W [32, 16]) need d = 16:
    attn-select-gpu-schedule records its schedules (`--cuda-head-dims=16`, tl.dot's
    smallest K), and the kernels compile with them on both chips, on tensor cores:
    mma.sync on sm_80; on sm_90 wgmma for nested_tanh's 128-row forward tiles, mma.sync
    for tiles of fewer rows than a warpgroup's 64 (the additive contraction's 16 x 16,
    the projection's 32 x 32 backward, the decode forward's 16 rows)."""
    kernel = triton_backend.compile_triton(
        str(EXAMPLES.parent / "families" / f"{source}.mlir"),
        options=["--cuda-targets=sm_80,sm_90", "--cuda-dtypes=bf16", "--cuda-head-dims=16"])
    assert (f"sm_{arch}", "bf16", 16) in kernel.module.SCHEDULES
    names = ("attn_fwd", "attn_fwd_split", "attn_bwd_dkdv", "attn_bwd_dq")
    compiled = kernel.compile_ahead(cuda_target(arch), dtype=torch.bfloat16, head_dim=16,
                                    is_causal=True, has_key_lengths=True, names=names)
    wgmma = {"attn_fwd"} if arch == 90 and source == "nested_tanh" else set()
    for name, binary in compiled.items():
        ptx = binary.asm["ptx"]
        instruction = "wgmma.mma_async" if name in wgmma else "mma.sync"
        assert f".target sm_{arch}" in ptx, f"{name}: not compiled for sm_{arch}"
        assert instruction in ptx, f"{source} {name} for sm_{arch} has no {instruction}"
        assert binary.asm.get("cubin"), f"{name}: no cubin for sm_{arch}"


@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("source", ["alibi_heads", "sliding_window_sinks"])
def test_decode_kernels_compile(cuda_target, arch, source):
    """attn_fwd_split (16 packed rows: mma.sync on both chips, wgmma needs 64) and
    attn_fwd_merge compile for sm_80 and sm_90 with the decode schedule: a tensor input
    read per packed row's head, and the tile skipping over every head of the tile."""
    kernel = triton_backend.compile_triton(str(EXAMPLES.parent / "families" / f"{source}.mlir"))
    compiled = kernel.compile_ahead(cuda_target(arch), dtype=torch.bfloat16, head_dim=128,
                                    is_causal=True, has_key_lengths=True,
                                    names=("attn_fwd_split", "attn_fwd_merge"))
    split, merge = compiled["attn_fwd_split"], compiled["attn_fwd_merge"]
    assert "mma.sync" in split.asm["ptx"], f"attn_fwd_split for sm_{arch} has no mma.sync"
    assert split.metadata.num_warps == 4
    for name, binary in compiled.items():
        assert f".target sm_{arch}" in binary.asm["ptx"], f"{name}: not compiled for sm_{arch}"
        assert binary.asm.get("cubin"), f"{name}: no cubin for sm_{arch}"


def test_scan_kernels_compile_for_sm_90(cuda_target):
    """A scan's kernels (stick-breaking: reverse cumsums over the key tiles, the decode
    split, the backward's two passes, rows first: no attn_bwd_preprocess) compile for
    sm_90 at d = 64 and 128 with their own schedule (64 × 32 forward, wgmma; 32 × 32
    backward, mma.sync). With a left-over (O_i += r_i·v_i) the module has no decode
    split either: attn_fwd_merge has no V to add the query's own value to."""
    kernel = triton_backend.compile_triton(
        str(EXAMPLES / "stick_breaking.mlir"),
        options=["--cuda-targets=sm_90", "--cuda-head-dims=64,128"])
    runs = {"attn_fwd", "attn_fwd_split", "attn_fwd_merge", "attn_bwd_dkdv", "attn_bwd_dq"}
    assert set(triton_backend.launched_kernels(kernel.module)) == runs
    for head_dim in (64, 128):
        compiled = kernel.compile_ahead(cuda_target(90), dtype=torch.bfloat16,
                                        head_dim=head_dim, is_causal=True, has_key_lengths=True)
        assert set(compiled) == runs
        for name, binary in compiled.items():
            assert binary.asm.get("cubin"), f"{name}: no cubin for sm_90 at d = {head_dim}"
        assert "wgmma.mma_async" in compiled["attn_fwd"].asm["ptx"]
        for name in ("attn_bwd_dkdv", "attn_bwd_dq"):
            assert "mma.sync" in compiled[name].asm["ptx"], f"{name} has no tensor-core mma"
    left_over = triton_backend.compile_triton(
        str(EXAMPLES / "stick_breaking_left_over.mlir"),
        options=["--cuda-targets=sm_90", "--cuda-head-dims=64"])
    assert triton_backend.backward_plan(left_over.module) == {
        "rows_first": True, "tile_states": ["TileLogSurvival", "TileSuffix"]}
    compiled = left_over.compile_ahead(cuda_target(90), dtype=torch.bfloat16, head_dim=64,
                                       is_causal=True, has_key_lengths=True)
    assert set(compiled) == {"attn_fwd", "attn_bwd_dkdv", "attn_bwd_dq"}
    for name, binary in compiled.items():
        assert binary.asm.get("cubin"), f"left-over {name}: no cubin for sm_90"


def test_implicit_kernels_compile_for_sm_90(cuda_target):
    """An implicit normalizer's kernels (sparsemax and α-entmax: the bracket's and the
    Newton iteration's while loops over the key tiles, attn_bwd_dq's pass for r_i) compile
    for sm_90 at d = 64; there is no decode forward and no attn_bwd_preprocess."""
    for name in ("sparsemax", "entmax_alpha"):
        kernel = triton_backend.compile_triton(str(EXAMPLES / f"{name}.mlir"),
                                               options=["--cuda-targets=sm_90"])
        compiled = kernel.compile_ahead(cuda_target(90), dtype=torch.bfloat16, head_dim=64,
                                        is_causal=True, has_key_lengths=True)
        assert set(compiled) == {"attn_fwd", "attn_bwd_dkdv", "attn_bwd_dq"}
        for kernel_name, binary in compiled.items():
            assert binary.asm.get("cubin"), f"{name} {kernel_name}: no cubin for sm_90"


@pytest.mark.parametrize("name,algorithm", [("stick_breaking", "scan"),
                                            ("sparsemax", "implicit")])
def test_scan_and_implicit_artifacts(cuda_target, tmp_path, name, algorithm):
    """attn-compile --cuda-targets=sm_90 (bf16, d = 64) puts a scan's and an implicit
    normalizer's kernels in an artifact, with the launch description the C++ runtime
    follows: the backward rows first (attn_bwd_dq before attn_bwd_dkdv) and no
    attn_bwd_preprocess cubin, a scan's two tile states (parameters of both backward
    kernels), the decode forward only where DECODE has rows (the scan's); the runtime
    loads it."""
    import attn
    from attn.paths import compiler_path
    from test_triton_artifact import embedded

    path = tmp_path / f"{name}.so"
    result = subprocess.run([compiler_path(), str(EXAMPLES / f"{name}.mlir"), "-o", str(path),
                             "--dtypes=f32", "--cuda-targets=sm_90", "--cuda-dtypes=bf16",
                             "--cuda-head-dims=64"], capture_output=True, text=True,
                            env=dict(os.environ, ATTN_PYTHON=sys.executable))
    assert result.returncode == 0, result.stderr[-4000:]
    launch = json.loads(embedded(ctypes.CDLL(str(path)), "attn_triton_launch").rstrip(b"\0"))
    scan = algorithm == "scan"
    states = ["TileLogSurvival", "TileSuffix"] if scan else []
    assert launch["backward"] == {"rows_first": True, "tile_states": states}
    assert ("decode" in launch) == scan
    decode = {"attn_fwd_split", "attn_fwd_merge"} if scan else set()
    assert {image["kernel"] for image in launch["images"]} == {
        "attn_fwd", "attn_bwd_dkdv", "attn_bwd_dq"} | decode
    for image in launch["images"]:
        parameters = {parameter for parameter, _ in image["parameters"]}
        taken = set(states) & parameters
        assert taken == (set(states) if image["kernel"] in ("attn_bwd_dkdv", "attn_bwd_dq")
                         else set()), image["symbol"]
    kernel = attn.load(str(path))
    assert kernel.manifest["algorithm"] == algorithm
    assert kernel.cuda_targets == ["sm_90"]
