"""attn-compile --cuda-targets=sm_80,sm_90: the emitted Triton kernels compiled ahead of
time (python -m attn.triton_aot, no GPU) and embedded in the artifact with their source and
launch description. One artifact, compiled once for the file (about a minute of Triton
on CI): a kernel reading tensor inputs (sinks + document mask + a learnable table), whose
sm_90 cubins use wgmma (HGMMA in their SASS) and sm_80 ones mma (HMMA), each with the
tiles, warps and stages of its gpu_schedule; the runtime loads it; on a GPU none of its
cubins runs on, the Python package compiles its embedded source instead."""
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

from attn import triton_backend  # noqa: E402
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


def embedded(library, symbol):
    size = ctypes.c_uint64.in_dll(library, symbol + "_size").value
    return ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(library, symbol)), size)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    """(path, ctypes library, launch description) of the tables kernel for both targets."""
    _cuobjdump()
    directory = tmp_path_factory.mktemp("artifact")
    mlir = directory / "k.mlir"
    mlir.write_text(ALL_TABLES)
    path = directory / "k.so"
    env = dict(os.environ, ATTN_PYTHON=sys.executable)
    result = subprocess.run([compiler_path(), str(mlir), "-o", str(path), "--dtypes=f32",
                             "--cuda-targets=sm_80,sm_90"], capture_output=True, text=True,
                            env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    library = ctypes.CDLL(str(path))
    return str(path), library, json.loads(embedded(library, "attn_triton_launch").rstrip(b"\0"))


def test_cubins_use_each_targets_tensor_cores(artifact, tmp_path):
    cuobjdump = _cuobjdump()
    _, library, launch = artifact
    assert launch["ptxas_version"]
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
            # The decode forward's 16-row tiles take mma.sync (HMMA) on both chips.
            symbol = f"attn_triton_{chip}_bf16_d64_{variant}_attn_fwd_split"
            cubin = tmp_path / f"{symbol}.cubin"
            cubin.write_bytes(embedded(library, symbol))
            sass = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True,
                                  text=True, check=True).stdout
            assert "HMMA" in sass, f"{symbol} has no HMMA"


def test_launch_description_records_the_schedule(artifact):
    """Each cubin carries the tiles, warps and stages of its chip's #attn.gpu_schedule, as
    the embedded source's SCHEDULES states them (forward for attn_fwd, decode for
    attn_fwd_split and attn_fwd_merge, backward else), and the decode rule is DECODE's."""
    _, library, launch = artifact
    source = embedded(library, "attn_triton_source").decode().rstrip("\0")
    assert source.startswith('"""Triton kernels of attn.kernel @')
    module = triton_backend.load_triton(source).module
    schedules = module.SCHEDULES
    assert set(schedules) == {("sm_80", "bf16", 64), ("sm_90", "bf16", 64)}
    assert launch["decode"] == module.DECODE
    assert {"attn_fwd_split", "attn_fwd_merge"} <= {image["kernel"] for image in launch["images"]}
    for image in launch["images"]:
        tiles = schedules[(image["chip"], image["dtype"], image["head_dim"])][
            triton_backend.schedule_entry(image["kernel"])]
        assert (image["block_m"], image["block_n"], image["num_warps"],
                image["num_stages"]) == tiles, image["symbol"]


def test_tensor_input_kernel_loads_in_the_runtime(artifact):
    path, library, launch = artifact
    assert [entry[0] for entry in launch["inputs"]] == ["sinks", "doc", "bias"]
    for chip in ("sm_80", "sm_90"):
        for name in KERNELS:
            image = next(i for i in launch["images"] if i["chip"] == chip and i["kernel"] == name)
            assert {"t_sinks", "t_doc", "t_bias"} <= {p[0] for p in image["parameters"]}
            # Positions per batch entry, as the runtime passes them (int64 pointers).
            assert {("QueryStarts", "*i64"), ("KeyStarts", "*i64")} <= {
                tuple(p) for p in image["parameters"]}, image["symbol"]
            assert len(embedded(library, image["symbol"])) > 0
    # The manifest's GPU lines agree with the launch description (inputs, one cubin per
    # target, kernel and causal variant), which the runtime parses.
    import attn
    kernel = attn.load(path)
    assert kernel.manifest["devices"] == ["cpu", "cuda"]
    assert kernel.manifest["cuda"]["backend"] == "triton"
    assert kernel.cuda_targets == ["sm_80", "sm_90"]
    assert kernel.cuda_head_dims(torch.bfloat16) == [64]


def test_jit_fallback_compiles_the_embedded_source_on_other_gpus(artifact):
    """The selection a CUDA call makes (no GPU needed): an H100 (9.0) or an RTX 3090
    (8.6, the sm_80 cubins) run the cubins; a Blackwell (10.0) gets the embedded Triton
    module, or, without Triton, an error naming its chip and the targets."""
    path, _, _ = artifact
    targets = ["sm_80", "sm_90"]
    assert triton_backend.jit_kernel_for(path, targets, (9, 0)) is None
    assert triton_backend.jit_kernel_for(path, targets, (8, 6)) is None

    def no_triton():
        raise ImportError("No module named 'triton'")

    with pytest.raises(RuntimeError, match=r"has no GPU code for this GPU \(sm_100\): its cubins "
                       r"are for sm_80, sm_90, and compiling its embedded Triton source needs "
                       r"Triton, which is not importable"):
        triton_backend.jit_kernel_for(path + ".other", targets, (10, 0), import_triton=no_triton)
    jit = triton_backend.jit_kernel_for(path, targets, (10, 0))
    assert jit.name == "all_tables" and [n for n, *_ in jit.inputs] == ["sinks", "doc", "bias"]
    # Its schedule there: the newest older chip's (sm_90), as the cubins would have had.
    assert triton_backend.select_schedule(jit.module.SCHEDULES, jit.module.DEFAULT_SCHEDULE,
                                          "sm_100", "bf16", 64) == \
        jit.module.SCHEDULES[("sm_90", "bf16", 64)]


def test_aot_helper_refuses_old_targets(tmp_path):
    module = tmp_path / "k.py"
    text = subprocess.run([compiler_path(), str(EXAMPLES / "softmax.mlir"), "-o", "-",
                           "--emit=triton", "--cuda-targets=sm_80"], capture_output=True,
                          text=True, check=True).stdout
    module.write_text(text.replace('("sm_80", "bf16", 64)', '("sm_75", "bf16", 64)'))
    result = subprocess.run([sys.executable, "-m", "attn.triton_aot", str(module), "--out",
                             str(tmp_path / "out")], capture_output=True, text=True)
    assert result.returncode == 1
    assert "targets are sm_XY with XY >= 80, got 'sm_75'" in result.stderr
