"""The installed package: in the environment scripts/setup.sh made, `import attn` works
from any directory with no environment variables and no sys.path edits, and finds the
runtime library and attn-compile that environment links to."""
import json
import os
import subprocess
import sys

from conftest import REPO

PROBE = """
import json, sys
import attn, torch
kernel = attn.compile(sys.argv[1])
q = torch.randn(1, 2, 8, 16, requires_grad=True)
kernel(q, q, q, is_causal=True).sum().backward()
print(json.dumps({"package": attn.__file__, "runtime": attn.paths.runtime_library_path(),
                  "compiler": attn.paths.compiler_path(), "prefix": sys.prefix,
                  "grad_finite": bool(torch.isfinite(q.grad).all())}))
"""


def test_import_attn_needs_no_environment_variables(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ATTN_") and k not in ("PYTHONPATH", "PYTHONHOME")}
    env["ATTN_CACHE_DIR"] = str(tmp_path / "cache")  # keep the user's cache untouched
    r = subprocess.run([sys.executable, "-c", PROBE, str(REPO / "examples" / "normalizers" / "softmax.mlir")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    found = json.loads(r.stdout.strip().splitlines()[-1])
    assert found["package"].startswith(str(REPO / "runtime" / "python")), found  # editable install
    assert found["runtime"].startswith(found["prefix"]), found  # linked into the environment
    assert found["compiler"].startswith(found["prefix"]), found
    assert found["grad_finite"]
