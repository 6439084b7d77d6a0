"""The Python manifest reader (attn.parse_manifest) on the golden files of
test/manifest/, which the compiler writes (test/manifest/golden.mlir) and the
runtime's C++ reader parses (runtime_errors_test, ManifestGolden): one format
(runtime/include/attn/abi.h), one writer and one reader per language."""
from pathlib import Path

import torch

import attn

GOLDEN = Path(__file__).resolve().parents[1] / "manifest"


def parse(name):
    return attn.parse_manifest((GOLDEN / f"{name}.manifest").read_text())


def test_scalar_params():
    m = parse("multimax")
    assert m["attn-abi"] == 8
    assert (m["kernel"], m["normalizer"], m["algorithm"], m["denominator"], m["mask"]) == (
        "multimax_attention", "multimax", "online", "sum", "none")
    assert list(m["params"].items()) == [("tb1", 1.0), ("td1", 1.0), ("b1", -1.0), ("d1", 1.0),
                                         ("tb2", 1.0), ("td2", 1.0), ("b2", -2.0), ("d2", 2.0)]
    assert m["dtypes"] == ["f32", "f64"]
    assert m["devices"] == ["cpu"]
    assert m["cuda-targets"] == [] and m["triton-kernel"] == []
    assert "head-dim" not in m


def test_kernelised_without_params():
    m = parse("linear")
    assert m["algorithm"] == "kernelised"
    assert list(m["params"]) == []
    assert m["dtypes"] == ["f64"]


def test_weights():
    m = parse("bahdanau")
    assert list(m["params"]) == ["W_q", "W_k", "v"]
    assert torch.equal(m["params"]["W_q"], torch.eye(32, dtype=torch.float64))
    assert torch.equal(m["params"]["v"], torch.full([32], 0.125, dtype=torch.float64))
    assert m["head-dim"] == "32"
    assert tuple(parse("luong_general")["params"]["W"].shape) == (32, 32)


def test_tensor_inputs():
    m = parse("luong_local")
    assert list(m["params"].items()) == [("sigma", 2.0)]
    assert m["input"] == [{"name": "p", "element": "float", "shape": ("B", "H", "Nq"),
                           "learnable": True, "init": None}]
    assert parse("ssmax")["input"] == [{"name": "scale", "element": "float", "shape": ("H",),
                                        "learnable": True, "init": 0.43}]


def test_contract():
    def contract(name):
        return parse(name)["contract"]
    assert contract("multimax") == {"kind": "scaled_dot", "scale": None, "feature": False}
    assert contract("linear") == {"kind": "dot", "scale": 1.0, "feature": True}
    assert contract("luong_general") == {"kind": "bilinear", "scale": 1.0, "feature": False}
    assert contract("bahdanau") == {"kind": "additive", "scale": 1.0, "feature": False}
    assert contract("cosine") == {"kind": "cosine", "scale": 5.0, "feature": False}


def test_triton_kernels():
    m = parse("softmax-triton")
    assert m["devices"] == ["cpu", "cuda"]
    assert m["cuda-targets"] == ["sm_80", "sm_90"]
    assert m["gpu-backend"] == "triton"
    assert m["triton-kernel"] == [{"dtype": dtype, "head_dim": d}
                                  for dtype in ("bf16", "f16") for d in (64, 128)]
