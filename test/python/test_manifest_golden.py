"""The Python manifest reader (attn.manifest) on the golden files of test/manifest/,
which the compiler writes (test/manifest/golden.mlir) and the runtime's C++ reader
parses (runtime_errors_test, ManifestGolden); damaged manifests are refused with the
field named; and both readers read only fields of the one schema
(runtime/python/attn/manifest.schema.json)."""
import json
import re
from pathlib import Path

import pytest
import torch

import attn
from attn.manifest import SCHEMA, ManifestError, param_inits, parse_manifest, tensor_inputs

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "test" / "manifest"


def parse(name):
    return parse_manifest((GOLDEN / f"{name}.json").read_text())


def test_scalar_params():
    m = parse("multimax")
    assert m["abi"] == SCHEMA["properties"]["abi"]["const"]
    assert (m["kernel"], m["normalizer"], m["algorithm"], m["denominator"], m["mask"]) == (
        "multimax_attention", "multimax", "online", "sum", "none")
    assert list(param_inits(m).items()) == [("tb1", 1.0), ("td1", 1.0), ("b1", -1.0),
                                            ("d1", 1.0), ("tb2", 1.0), ("td2", 1.0),
                                            ("b2", -2.0), ("d2", 2.0)]
    assert m["splits"] == {"forward": "key_chunks", "backward": "key_chunks",
                           "partial_calls": True}
    assert m["dtypes"] == ["f32", "f64"]
    assert m["devices"] == ["cpu"]
    assert "cuda" not in m and "head_dim" not in m


def test_kernelised_without_params():
    m = parse("linear")
    assert m["algorithm"] == "kernelised"
    assert m["splits"] == {"forward": "whole", "backward": "whole", "partial_calls": False}
    assert m["params"] == []
    assert m["dtypes"] == ["f64"]


def test_weights():
    m = parse("bahdanau")
    inits = param_inits(m)
    assert list(inits) == ["W_q", "W_k", "v"]
    assert torch.equal(inits["W_q"], torch.eye(32, dtype=torch.float64))
    assert torch.equal(inits["v"], torch.full([32], 0.125, dtype=torch.float64))
    assert m["head_dim"] == 32
    assert tuple(param_inits(parse("luong_general"))["W"].shape) == (32, 32)


def test_tensor_inputs():
    m = parse("luong_local")
    assert list(param_inits(m).items()) == [("sigma", 2.0)]
    assert tensor_inputs(m) == [{"name": "p", "element": "float", "shape": ("B", "H", "Nq"),
                                 "learnable": True, "init": None}]
    assert tensor_inputs(parse("ssmax")) == [{"name": "scale", "element": "float",
                                              "shape": ("H",), "learnable": True, "init": 0.43}]


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
    assert m["cuda"]["targets"] == ["sm_80", "sm_90"]
    assert m["cuda"]["backend"] == "triton"
    assert m["cuda"]["kernels"] == [{"dtype": dtype, "head_dim": d}
                                    for dtype in ("bf16", "f16") for d in (64, 128)]


def damaged(edit, name="softmax-triton"):
    m = json.loads((GOLDEN / f"{name}.json").read_text())
    edit(m)
    return json.dumps(m)


@pytest.mark.parametrize("edit, field, expected", [
    (lambda m: m.pop("dtypes"), "dtypes", "expected an array, found nothing"),
    (lambda m: m.pop("abi"), "abi", f"expected {SCHEMA['properties']['abi']['const']}, "
                                     "found nothing"),
    (lambda m: m.update(abi=m["abi"] + 1), "abi",
     f"expected {SCHEMA['properties']['abi']['const']}, found"),
    (lambda m: m.update(abi="9"), "abi", f'expected {SCHEMA["properties"]["abi"]["const"]}, '
                                         'found "9"'),
    (lambda m: m.update(kernel=3), "kernel", "expected a string, found 3"),
    (lambda m: m.update(algorithm="fast"), "algorithm",
     'expected one of online, plain, kernelised, scan, implicit, found "fast"'),
    (lambda m: m.pop("splits"), "splits", "expected an object, found nothing"),
    (lambda m: m["splits"].update(forward="queries"), "splits.forward",
     'expected one of whole, rows, key_chunks, found "queries"'),
    (lambda m: m["cpu_cost"][1].update(head_dim=0), "cpu_cost[1].head_dim",
     "expected an integer >= 1, found 0"),
    (lambda m: m["cpu_cost"][0].update(dtype="bf16"), "cpu_cost[0].dtype",
     'expected one of f32, f64, found "bf16"'),
    (lambda m: m["cpu_cost"][0].pop("forward"), "cpu_cost[0].forward",
     "expected a number >= 0, found nothing"),
    (lambda m: m["contract"].update(feature="no"), "contract.feature",
     'expected a boolean, found "no"'),
    (lambda m: m["contract"].pop("scale"), "contract.scale",
     "expected a number or null, found nothing"),
    (lambda m: m["devices"].append("cpu"), "devices[2]",
     "expected distinct items (it repeats devices[0])"),
    (lambda m: m["cuda"]["kernels"][0].update(head_dim=0), "cuda.kernels[0].head_dim",
     "expected an integer >= 1, found 0"),
    (lambda m: m["cuda"].update(targets=["compute_80"]), "cuda.targets[0]",
     "expected a string matching"),
])
def test_damaged_manifests_name_the_field(edit, field, expected):
    with pytest.raises(ManifestError, match=re.escape(f"field '{field}': {expected}")) as e:
        parse_manifest(damaged(edit))
    assert e.value.field == field


def test_damaged_inputs_and_params():
    def inputs(m):
        m["inputs"][0]["shape"] = ["N"]
    with pytest.raises(ManifestError, match=re.escape(
            "field 'inputs[0].shape[0]': expected one of ?, B, H, Hkv, Nq, Nk, found \"N\"")):
        parse_manifest(damaged(inputs, "luong_local"))

    def params(m):
        del m["params"][0]["init"]
    with pytest.raises(ManifestError, match=re.escape(
            "field 'params[0].init': expected a number, or one of identity, found nothing")):
        parse_manifest(damaged(params, "bahdanau"))


def test_old_text_manifest_and_invalid_json():
    with pytest.raises(ManifestError, match="text format of an older attn-compile"):
        parse_manifest("attn-abi 8\nkernel k\n")
    with pytest.raises(ManifestError, match=re.escape("field '(the document)'")):
        parse_manifest("{not json")


def _schema_fields(schema, path=""):
    """Every field path of the schema: 'cuda.kernels[].dtype'."""
    fields = set()
    for name, member in schema.get("properties", {}).items():
        field = f"{path}.{name}" if path else name
        fields.add(field)
        fields |= _schema_fields(member, field)
    if "items" in schema:
        fields |= _schema_fields(schema["items"], path + "[]")
    return fields


def _literals(path, pattern):
    return set(re.findall(pattern, path.read_text()))


def test_readers_use_only_schema_fields_and_the_schema_is_read():
    """The two readers and the schema cannot drift: every field name either reader reads
    is one of the schema's, and every field of the schema is read by the C++ reader (the
    runtime's; the Python reader reads what its callers need)."""
    names = {f.rsplit(".", 1)[-1].replace("[]", "") for f in _schema_fields(SCHEMA)}
    cpp = _literals(ROOT / "runtime" / "manifest.cpp", r'(?:doc|param|entry|section|kernel)'
                                                       r'(?:\.value\()?\[?\(?"([a-z_]+)"')
    py = _literals(ROOT / "runtime" / "python" / "attn" / "manifest.py",
                   r'(?:manifest|p|param|i)\["([a-z_]+)"\]')
    py |= _literals(ROOT / "runtime" / "python" / "attn" / "__init__.py",
                    r'self\.manifest(?:\.get\(|\[)"([a-z_]+)"')
    assert cpp and py
    assert cpp <= names, f"the C++ reader reads fields the schema lacks: {cpp - names}"
    assert py <= names, f"the Python reader reads fields the schema lacks: {py - names}"
    unread = names - cpp - {"contract", "kind", "scale", "feature", "backend"}
    assert not unread, f"schema fields the C++ reader never reads: {unread}"


def test_triton_launch_fields_are_the_schemas():
    """The launch description: every field triton_aot writes and triton_launch.cpp reads
    is one of $defs.triton_launch's, and a damaged one is refused with the field named."""
    launch = SCHEMA["$defs"]["triton_launch"]
    names = {f.rsplit(".", 1)[-1].replace("[]", "") for f in _schema_fields(launch)}
    cpp = _literals(ROOT / "runtime" / "triton_launch.cpp", r'(?:doc|f)\["([a-z_]+)"\]')
    aot = (ROOT / "runtime" / "python" / "attn" / "triton_aot.py").read_text()
    written = set(re.findall(r'"([a-z_]+)": ', aot[aot.index("def compile_module"):]))
    assert cpp and written
    assert cpp <= names, f"triton_launch.cpp reads fields the schema lacks: {cpp - names}"
    assert written <= names, f"triton_aot writes fields the schema lacks: {written - names}"
    from attn.manifest import check_triton_launch
    with pytest.raises(ManifestError, match=re.escape(
            "field 'images': expected an array, found nothing")):
        check_triton_launch({"ptxas_version": "12.4", "inputs": []})
