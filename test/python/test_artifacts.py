"""Artifacts that attn.load must refuse with a clear error, never a crash: truncated or
edited files (the checksum trailer), and edited manifests resealed with attn-seal, which
disagree with what the entry points were compiled for (attn_signature). Also: every name
the verifier accepts reaches the loaded kernel intact through the manifest.

The artifacts are real ones, compiled from the examples; a manifest is edited in place,
its length kept (removed text becomes spaces, JSON whitespace). And an attn-compile stopped by a
signal while it compiles leaves neither its temporary objects nor a partial artifact."""
import os
import shutil
import signal
import subprocess
import time

import pytest
import torch

from conftest import BUILD, EXAMPLES, REPO

ATTN_SEAL = BUILD / "bin" / "attn-seal"
FAMILIES = REPO / "examples" / "families"


@pytest.fixture(scope="module")
def artifacts(attn_mod, tmp_path_factory):
    """Compiled artifacts by name: multimax (8 params), luong_general (a 32x32 weight),
    luong_local (a learnable tensor input)."""
    out = tmp_path_factory.mktemp("artifacts")
    paths = {}
    for name, source in [("multimax", EXAMPLES / "multimax.mlir"),
                         ("luong_general", FAMILIES / "luong_general.mlir"),
                         ("luong_local", FAMILIES / "luong_local.mlir")]:
        paths[name] = out / f"{name}.so"
        subprocess.run([str(BUILD / "bin" / "attn-compile"), str(source), "-o", str(paths[name]),
                        "--dtypes=f32"], check=True)
    return paths


def _edited(artifact, tmp_path, old, new, reseal=True):
    """A copy of `artifact` whose manifest text has `old` replaced by `new` (padded with
    spaces to the same length), resealed with attn-seal unless `reseal` is False."""
    data = artifact.read_bytes()
    assert len(new) <= len(old) and data.count(old.encode()) == 1, old
    path = tmp_path / f"edited-{artifact.name}"
    path.write_bytes(data.replace(old.encode(), new.ljust(len(old)).encode()))
    if reseal:
        subprocess.run([str(ATTN_SEAL), str(path)], check=True)
    return str(path)


def test_the_originals_load(attn_mod, artifacts):
    assert len(attn_mod.load(str(artifacts["multimax"])).param_names) == 8
    assert attn_mod.load(str(artifacts["luong_general"])).param_shapes["W"] == (32, 32)


LAST_PARAM = ',\n    {\n      "init": 2,\n      "name": "d2",\n      "shape": []\n    }'
INPUT = '''{
      "element": "float",
      "learnable": true,
      "name": "p",
      "shape": [
        "B",
        "H",
        "Nq"
      ]
    }'''


@pytest.mark.parametrize("name, old, new, needles", [
    # 7 params instead of 8 (the last one removed).
    ("multimax", LAST_PARAM, "",
     ["params declare 7 params (tb1, td1, b1, d1, tb2, td2, b2), the entry points read 8"]),
    # The params field renamed away.
    ("multimax", '"params"', '"paramz"',
     ["manifest field 'params': expected an array, found nothing"]),
    # A 99x99 weight on a kernel compiled for 32x32.
    ("luong_general", '"shape": [\n        32,\n        32', '"shape": [\n        99,\n        99',
     ["param 'W' is [99x99] in the manifest, the entry points read [32x32]"]),
    ("luong_general", '"head_dim": 32,', '"head_dim": 64,',
     ["head_dim is 64 (0: any), the entry points were compiled for 32"]),
    # The input removed.
    ("luong_local", INPUT, "",
     ["declares 0 tensor inputs (its inputs), the entry points read 1"]),
    # The input made not learnable, then given a fixed extent.
    ("luong_local", '"learnable": true,', '"learnable":false,',
     ["tensor input 'p' is float ?x?x? in the manifest, the entry points read float ?x?x? "
      "learnable"]),
    ("luong_local", '"B",', '9,',
     ["tensor input 'p' is float 9x?x? learnable in the manifest, the entry points read "
      "float ?x?x? learnable"]),
])
def test_edited_manifest_is_refused(attn_mod, artifacts, tmp_path, name, old, new, needles):
    path = _edited(artifacts[name], tmp_path, old, new)
    with pytest.raises(RuntimeError) as error:
        attn_mod.load(path)
    message = str(error.value)
    for needle in [path] + needles:
        assert needle in message, message


def test_edit_without_reseal_is_refused(attn_mod, artifacts, tmp_path):
    path = _edited(artifacts["multimax"], tmp_path, '"name": "d2"', '"name": "d3"', reseal=False)
    with pytest.raises(RuntimeError, match="is corrupt or was modified after attn-compile wrote it"):
        attn_mod.load(path)


@pytest.mark.parametrize("keep", [0.5, 0.99])
def test_truncated_artifact_is_refused(attn_mod, artifacts, tmp_path, keep):
    data = artifacts["multimax"].read_bytes()
    path = tmp_path / "truncated.so"
    path.write_bytes(data[:int(len(data) * keep)])
    with pytest.raises(RuntimeError, match="truncated.so' has no checksum trailer"):
        attn_mod.load(str(path))


def test_truncated_and_resealed_artifact_is_refused(attn_mod, artifacts, tmp_path):
    """Sealed after truncation (as by a careless attn-seal): the segments the ELF headers
    name lie past the end of the file, which dlopen would map (SIGBUS on first touch)."""
    data = artifacts["multimax"].read_bytes()
    path = tmp_path / "truncated.so"
    path.write_bytes(data[:len(data) // 2])
    subprocess.run([str(ATTN_SEAL), str(path)], check=True)
    with pytest.raises(RuntimeError, match="is not a loadable shared object: .* extends past the end "
                                           "of the file"):
        attn_mod.load(str(path))


def test_attn_seal_checks(artifacts, tmp_path):
    ok = subprocess.run([str(ATTN_SEAL), "--check", str(artifacts["multimax"])], capture_output=True,
                        text=True)
    assert ok.returncode == 0 and ": ok " in ok.stdout
    copy = tmp_path / "copy.so"
    shutil.copy(artifacts["multimax"], copy)
    with open(copy, "ab") as f:
        f.write(b"x")
    bad = subprocess.run([str(ATTN_SEAL), "--check", str(copy)], capture_output=True, text=True)
    assert bad.returncode == 1 and "no checksum trailer" in bad.stdout


NAMES_IR = """
attn.normalizer @"soft.max$2" params(_t0 = 0.5, "T_1" = 2.0) {
  numerator {
  ^bb0(%s: f64, %bx: index, %h: index, %i: index, %j: index, %a: f64, %b: f64):
    %x = arith.mulf %s, %a : f64
    %e = math.exp %x : f64
    attn.yield %e : f64
  }
  denominator {
  ^bb0(%s: f64, %bx: index, %h: index, %i: index, %j: index, %a: f64, %b: f64):
    %x = arith.mulf %s, %a : f64
    %e = math.exp %x : f64
    attn.yield %e : f64
  }
}
attn.mask @"m.1$" {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}
attn.kernel @"k.v1$" normalizer(@"soft.max$2") mask(@"m.1$")
"""


def test_names_reach_the_kernel_through_the_manifest(attn_mod, tmp_path, monkeypatch):
    """Symbols with '.' and '$', params with '_' and capitals (quoted or not in the IR)."""
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "cache"))
    kernel = attn_mod.compile(NAMES_IR, dtypes=("f64",))
    assert kernel.name == "k.v1$"
    assert kernel.manifest["normalizer"] == "soft.max$2" and kernel.manifest["mask"] == "m.1$"
    assert kernel.param_names == ["_t0", "T_1"]
    q, k, v = (torch.randn(1, 1, 5, 4, dtype=torch.float64) for _ in range(3))
    expected = torch.nn.functional.scaled_dot_product_attention(q * 0.5, k, v, is_causal=True)
    assert torch.allclose(kernel(q, k, v), expected, atol=1e-12)


def _written(path):
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:  # removed between the glob and the stat
        return False


def _interrupt_compile(args, env, ready, waiting_for, sig):
    """Runs attn-compile with `args` and `env`, sends it `sig` once `ready()` holds, and
    checks that the signal ended it."""
    proc = subprocess.Popen([str(BUILD / "bin" / "attn-compile"), *args], env=env,
                            stderr=subprocess.PIPE, text=True,
                            # a background shell may have left SIGINT ignored
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not ready():
        assert proc.poll() is None, f"attn-compile ended (rc {proc.returncode}) before " \
                                    f"{waiting_for}: {proc.stderr.read()}"
        assert time.monotonic() < deadline, f"timed out waiting for {waiting_for}"
        time.sleep(0.002)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert proc.returncode == -sig, proc.stderr.read()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interrupted_compile_leaves_no_files(tmp_path, sig):
    """Stopped while its parts compile, once the first part's object is written,
    attn-compile removes its temporary objects and writes no artifact. On two threads
    (--jobs=2, whatever the CPUs) the parts compile largest first, so the forwards are
    still compiling when a backward's object is written."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    _interrupt_compile([str(EXAMPLES / "tanhmax.mlir"), "-o", str(tmp_path / "tanhmax.so"),
                        "--jobs=2"], dict(os.environ, TMPDIR=str(scratch)),
                       lambda: any(_written(f) for f in scratch.glob("attn*.o")),
                       "a temporary object was written", sig)
    assert list(scratch.iterdir()) == [] and list(tmp_path.iterdir()) == [scratch]


# Stands in for cc: records its pid, then a child of it writes the -o file a moment
# later, as gcc's driver leaves the writing to ld, its grandchild. A signal to
# attn-compile alone (not to its process group) used to leave both running.
_SLOW_LINKER = """#!/bin/sh
out=
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
echo $$ > "$SLOW_LINKER_STARTED"
( sleep 1; echo partial > "$out" ) &
wait
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interrupted_link_leaves_no_files(tmp_path, sig):
    """Stopped while `cc` links the artifact, attn-compile kills the linker's process
    group before its own cleanup, so no half-written artifact appears afterwards.
    (Before, the linker outlived it and wrote <artifact>.<random>.tmp after the cleanup.)"""
    fake_bin, out_dir = tmp_path / "bin", tmp_path / "out"
    fake_bin.mkdir()
    out_dir.mkdir()
    linker = fake_bin / "cc"
    linker.write_text(_SLOW_LINKER)
    linker.chmod(0o755)
    started = tmp_path / "linker.pid"
    env = dict(os.environ, PATH=f"{fake_bin}:{os.environ['PATH']}",
               SLOW_LINKER_STARTED=str(started))
    _interrupt_compile([str(EXAMPLES / "softmax.mlir"), "-o", str(out_dir / "softmax.so"),
                        "--dtypes=f32"], env,
                       lambda: started.exists() and started.read_text().strip() != "",
                       "the linker started", sig)
    linker_pid = int(started.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(linker_pid, 0)   # killed and reaped, not left to finish
    time.sleep(1.5)              # past the moment the linker would have written
    assert list(out_dir.iterdir()) == []
