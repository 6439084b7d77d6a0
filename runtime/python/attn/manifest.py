"""The Python reader of an artifact's manifest: JSON checked against the one schema,
manifest.schema.json beside this file (docs/artifacts.md), with the rules and messages
of the runtime's C++ reader (runtime/manifest.cpp)."""
import json
import re
from collections import OrderedDict
from importlib import resources

import torch

__all__ = ["ManifestError", "parse_manifest", "SCHEMA", "param_inits", "tensor_inputs",
           "check_triton_launch"]

SCHEMA = json.loads(resources.files(__package__).joinpath("manifest.schema.json").read_text())


class ManifestError(ValueError):
    """A manifest that does not fit the schema: `field` ('inputs[0].element'), what the
    schema expected there and what was found."""

    def __init__(self, field, expected, found):
        super().__init__(f"manifest field '{field}': expected {expected}, found {found} "
                         "(schema: attn/manifest.schema.json)")
        self.field, self.expected, self.found = field, expected, found


def _type_of(value):
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return {str: "string", list: "array", dict: "object", type(None): "null"}[type(value)]


def _has_type(value, type_):
    actual = _type_of(value)
    return actual == type_ or (type_ == "number" and actual == "integer")


def _shown(value):
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 80 else text[:77] + "..."


def _joined(items):
    return ", ".join(i if isinstance(i, str) else _shown(i) for i in items)


def _describe(schema):
    """What `schema` asks of a value, in words (as manifest.cpp's describe)."""
    if "anyOf" in schema:
        return ", or ".join(_describe(option) for option in schema["anyOf"])
    if "const" in schema:
        return _shown(schema["const"])
    if "enum" in schema:
        return "one of " + _joined(schema["enum"])
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    text = " or ".join(("an " if t in ("integer", "array", "object") else "" if t == "null"
                        else "a ") + t for t in types)
    if "minimum" in schema:
        text += f" >= {_shown(schema['minimum'])}"
    if "pattern" in schema:
        text += f" matching {schema['pattern']}"
    return text


def _member(field, name):
    return f"{field}.{name}" if field else name


def _check(value, schema, field):
    """Raises ManifestError at the first place where `value` does not fit `schema`."""
    if "anyOf" in schema:
        failures = []
        for option in schema["anyOf"]:
            try:
                _check(value, option, field)
                return
            except ManifestError as e:
                failures.append((option, e))
        for option, error in failures:
            if "type" in option and _has_type(value, option["type"]):
                raise error
        raise ManifestError(field, _describe(schema), _shown(value))
    if "type" in schema:
        types = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
        if not any(_has_type(value, t) for t in types):
            raise ManifestError(field, _describe(schema), _shown(value))
    if "const" in schema and value != schema["const"]:
        raise ManifestError(field, _shown(schema["const"]), _shown(value))
    if "enum" in schema and value not in schema["enum"]:
        raise ManifestError(field, "one of " + _joined(schema["enum"]), _shown(value))
    if "minimum" in schema and _type_of(value) in ("integer", "number") \
            and value < schema["minimum"]:
        raise ManifestError(field, _describe(schema), _shown(value))
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        raise ManifestError(field, _describe(schema), _shown(value))
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            raise ManifestError(field, f"at least {schema['minItems']} items", _shown(value))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise ManifestError(field, f"at most {schema['maxItems']} items", _shown(value))
        for i, item in enumerate(value):
            if i < len(schema.get("prefixItems", [])):
                _check(item, schema["prefixItems"][i], f"{field}[{i}]")
            if "items" in schema:
                _check(item, schema["items"], f"{field}[{i}]")
            if schema.get("uniqueItems") and item in value[:i]:
                raise ManifestError(f"{field}[{i}]", f"distinct items (it repeats "
                                    f"{field}[{value.index(item)}])", _shown(item))
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                raise ManifestError(_member(field, name),
                                    _describe(schema["properties"][name]), "nothing")
        # Fields the schema does not name are ignored (informational ones of a later
        # compiler of the same ABI).
        for name, member in schema.get("properties", {}).items():
            if name in value:
                _check(value[name], member, _member(field, name))


def parse_manifest(text):
    """The manifest (JSON text, as torch.ops.attn.manifest returns it) as a dict of the
    schema's fields, after checking it against the schema: the ABI version first, then
    every field. Raises ManifestError naming the field and what was expected."""
    if text.lstrip().startswith("attn-abi"):
        raise ManifestError("abi", f"a JSON manifest of ABI {SCHEMA['properties']['abi']['const']}",
                            "the text format of an older attn-compile: recompile the artifact")
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as e:
        raise ManifestError("(the document)", "the JSON object attn-compile writes",
                            f"invalid JSON ({e})") from None
    if not isinstance(manifest, dict):
        raise ManifestError("(the document)", "an object", _shown(manifest))
    # The ABI version first: a manifest of another ABI is reported as such, whatever
    # else it holds.
    abi = SCHEMA["properties"]["abi"]
    if "abi" not in manifest:
        raise ManifestError("abi", _describe(abi), "nothing")
    _check(manifest["abi"], abi, "abi")
    _check(manifest, SCHEMA, "")
    return manifest


def param_inits(manifest):
    """name -> initial value of the manifest's params, in order: a float for a scalar,
    a float64 tensor of the weight's shape for a weight (its fill, or the unit matrix)."""
    def value(param):
        if not param["shape"]:
            return float(param["init"])
        if param["init"] == "identity":
            return torch.eye(*param["shape"], dtype=torch.float64)
        return torch.full(param["shape"], float(param["init"]), dtype=torch.float64)
    return OrderedDict((p["name"], value(p)) for p in manifest["params"])


def tensor_inputs(manifest):
    """The manifest's tensor inputs, in argument order, each a dict of name, element,
    shape (a tuple: None for '?', the name for a call dimension, else the extent),
    learnable and init (a float or None)."""
    return [{"name": i["name"], "element": i["element"],
             "shape": tuple(None if e == "?" else e for e in i["shape"]),
             "learnable": i["learnable"], "init": i.get("init")} for i in manifest["inputs"]]


def check_triton_launch(launch):
    """Raises ManifestError where the Triton launch description `launch` (a dict, as
    python -m attn.triton_aot writes it) does not fit the schema's $defs.triton_launch."""
    _check(launch, SCHEMA["$defs"]["triton_launch"], "")
