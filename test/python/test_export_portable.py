"""An exported program loads on another machine: torch.export records each attn
kernel by a portable reference (its IR and compile options), not by the absolute path
of this machine's cache entry, and the loading process resolves it to an artifact of
its own cache, compiling the IR when the cache does not have it.

The other machine is played by a fresh process with another working directory and an
empty $ATTN_CACHE_DIR, after the exporting process's cache has been deleted."""
import os
import shutil
import subprocess
import sys

import pytest
import torch
from torch import nn

from conftest import EXAMPLES

LOAD_AND_RUN = """
import sys, torch
import attn.ops  # registers the ops, their fakes and the artifact resolver
program = torch.export.load(sys.argv[1]).module()
x, padding = torch.load(sys.argv[2])
torch.save(program(x, padding), sys.argv[3])
"""


class Classifier(nn.Module):
    def __init__(self, attn_mod, dim=24, heads=3):
        super().__init__()
        self.attn = attn_mod.MultiheadAttention(dim, heads, batch_first=True,
                                                dtype=torch.float64,
                                                normalizer=EXAMPLES / "multimax.mlir")
        self.head = nn.Linear(dim, 5, dtype=torch.float64)

    def forward(self, x, key_padding_mask):
        out, _ = self.attn(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)
        return self.head(out).mean(1)


def test_an_exported_program_loads_with_an_empty_cache_elsewhere(attn_mod, tmp_path,
                                                                 monkeypatch):
    exporting_cache = tmp_path / "exporting-cache"
    monkeypatch.setenv("ATTN_CACHE_DIR", str(exporting_cache))
    torch.manual_seed(3)
    model = Classifier(attn_mod).eval()
    x = torch.randn(2, 11, 24, dtype=torch.float64)
    padding = torch.arange(11) >= torch.tensor([[11], [7]])
    want = model(x, padding)
    program = torch.export.export(model, (x, padding))
    saved = tmp_path / "export" / "classifier.pt2"
    saved.parent.mkdir()
    torch.export.save(program, saved)
    assert "attn-artifact:" in str(program.graph)
    assert str(exporting_cache) not in str(program.graph)
    assert str(exporting_cache).encode() not in saved.read_bytes()
    torch.save((x, padding), tmp_path / "export" / "inputs.pt")
    shutil.rmtree(exporting_cache)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ, ATTN_CACHE_DIR=str(elsewhere / "cache"))
    result = subprocess.run([sys.executable, "-c", LOAD_AND_RUN, str(saved),
                             str(tmp_path / "export" / "inputs.pt"), "out.pt"],
                            cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert torch.equal(torch.load(elsewhere / "out.pt"), want)
    assert len(list((elsewhere / "cache").glob("*.so"))) == 1, "compiled into its own cache"


def test_eager_and_compiled_calls_still_name_the_path(attn_mod):
    kernel = attn_mod.compile(EXAMPLES / "softmax.mlir", dtypes=("f32",))
    q = torch.randn(1, 1, 4, 8)
    assert kernel.artifact_for(q) == kernel.path
    assert kernel.reference.startswith("attn-artifact:")
    assert attn_mod.load(kernel.path).reference is None, "a .so alone has no IR to travel"


@pytest.mark.parametrize("reference, expected", [
    ("attn-artifact:1:bm90IHpsaWI=", "is damaged"),
    ("attn-artifact:9:abc", "is not an attn artifact reference"),
])
def test_a_bad_reference_is_an_error_naming_it(attn_mod, reference, expected):
    with pytest.raises(RuntimeError, match=f"cannot resolve artifact reference.*{expected}"):
        torch.ops.attn.manifest(reference)


def test_a_reference_whose_ir_does_not_compile_gives_the_compiler_diagnostics(attn_mod):
    from attn.compiler import artifact_reference

    reference = artifact_reference("attn.kernel @broken", ["--dtypes=f32"], native=False)
    with pytest.raises(RuntimeError, match="attn-compile failed"):
        torch.ops.attn.manifest(reference)


def test_a_reference_whose_artifact_was_removed_is_compiled_again(attn_mod, tmp_path,
                                                                   monkeypatch):
    """The runtime resolves a reference once per process, unless the file it resolved to
    is gone (a cleared cache): then it asks again, and the artifact is compiled anew."""
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "cache"))
    kernel = attn_mod.compile(EXAMPLES / "softmax.mlir", dtypes=("f32",))
    manifest = torch.ops.attn.manifest(kernel.reference)
    os.unlink(kernel.path)
    assert torch.ops.attn.manifest(kernel.reference) == manifest
    assert os.path.exists(kernel.path)
