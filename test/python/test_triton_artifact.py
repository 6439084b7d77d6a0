"""attn-compile --cuda-targets=sm_80,sm_90 --gpu-backend=triton: the emitted Triton kernels
compiled ahead of time (python -m attn.triton_aot, no GPU) and embedded in the artifact with
their source and launch description. The sm_90 cubins use wgmma (HGMMA in their SASS), the
sm_80 ones mma (HMMA); a kernel reading tensor inputs (sinks + document mask + a learnable
table) compiles for both targets too."""
import ctypes
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import EXAMPLES
from triton_table_kernels import ALL_TABLES

triton = pytest.importorskip("triton")

from attn.paths import compiler_path  # noqa: E402

KERNELS = ("attn_fwd", "attn_bwd_dkdv", "attn_bwd_dq")


def _cuobjdump():
    from triton.backends import backends
    if "nvidia" not in backends:
        pytest.skip("this Triton has no CUDA backend")
    import triton.backends.nvidia as nvidia
    path = os.path.join(os.path.dirname(nvidia.__file__), "bin", "cuobjdump")
    if not os.path.exists(path):
        pytest.skip(f"no cuobjdump at {path}")
    return path


def compile_artifact(source, path):
    env = dict(os.environ, ATTN_PYTHON=sys.executable)
    result = subprocess.run([compiler_path(), str(source), "-o", str(path),
                             "--cuda-targets=sm_80,sm_90", "--gpu-backend=triton"],
                            capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    return ctypes.CDLL(str(path))


def embedded(library, symbol):
    size = ctypes.c_uint64.in_dll(library, symbol + "_size").value
    return ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(library, symbol)), size)


def test_tanhmax_artifact_embeds_wgmma_cubins(tmp_path):
    cuobjdump = _cuobjdump()
    library = compile_artifact(EXAMPLES / "tanhmax.mlir", tmp_path / "t.so")
    launch = json.loads(embedded(library, "attn_triton_launch").rstrip(b"\0"))
    source = embedded(library, "attn_triton_source").decode()
    assert source.startswith('"""Triton kernels of attn.kernel @tanhmax_attention')
    assert launch["kernel"] == "tanhmax_attention" and launch["ptxas_version"]
    images = {image["symbol"]: image for image in launch["images"]}
    for chip, instruction, absent in (("sm_90", "HGMMA", None), ("sm_80", "HMMA", "HGMMA")):
        for variant in ("full", "causal"):
            for name in KERNELS:
                symbol = f"attn_triton_{chip}_bf16_d64_{variant}_{name}"
                image = images[symbol]
                assert image["function"] == name and image["num_warps"] > 0
                assert image["grid"] and image["parameters"][0][0] == "Q"
                cubin = tmp_path / f"{symbol}.cubin"
                cubin.write_bytes(embedded(library, symbol))
                sass = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True,
                                      text=True, check=True).stdout
                assert instruction in sass, f"{symbol} has no {instruction}"
                assert absent is None or absent not in sass, f"{symbol} uses {absent}"


def test_tensor_input_kernel_compiles_for_both_targets(tmp_path):
    """A learnable sink per head, document ids in the mask and a learnable bias table in
    the score, in one kernel (GQA is the same code at the call)."""
    _cuobjdump()
    mlir = tmp_path / "k.mlir"
    mlir.write_text(ALL_TABLES)
    library = compile_artifact(mlir, tmp_path / "k.so")
    launch = json.loads(embedded(library, "attn_triton_launch").rstrip(b"\0"))
    assert [entry[0] for entry in launch["inputs"]] == ["sinks", "doc", "bias"]
    for chip in ("sm_80", "sm_90"):
        for name in KERNELS:
            image = next(i for i in launch["images"] if i["chip"] == chip and i["kernel"] == name)
            assert {"t_sinks", "t_doc", "t_bias"} <= {p[0] for p in image["parameters"]}
            assert len(embedded(library, image["symbol"])) > 0
    # The runtime loads it: the manifest's GPU lines agree with the launch description
    # (inputs, one cubin per target, kernel and causal variant), which it parses.
    import attn
    kernel = attn.load(str(tmp_path / "k.so"))
    assert kernel.manifest["devices"] == ["cpu", "cuda"]
    assert kernel.manifest["gpu-backend"] == "triton"
    assert kernel.cuda_targets == ["sm_80", "sm_90"]
    assert kernel.cuda_head_dims(torch.bfloat16) == [64]


def test_aot_helper_refuses_old_targets(tmp_path):
    module = tmp_path / "k.py"
    module.write_text(subprocess.run([compiler_path(), str(EXAMPLES / "softmax.mlir"), "-o", "-",
                                      "--emit=triton"], capture_output=True, text=True,
                                     check=True).stdout)
    result = subprocess.run([sys.executable, "-m", "attn.triton_aot", str(module), "--targets",
                             "sm_75", "--out", str(tmp_path / "out")], capture_output=True,
                            text=True)
    assert result.returncode == 1
    assert "targets are sm_XY with XY >= 80, got 'sm_75'" in result.stderr
