"""Shared set-up of the reproductions: the attn package from this checkout, 2 threads,
the example normalizers compiled (and cached) on first use, results written next to
the scripts."""
import json
import os
from pathlib import Path

import torch

REPRO = Path(__file__).resolve().parent
REPO = REPRO.parents[1]
NORMALIZERS = REPO / "examples" / "normalizers"

import attn  # noqa: E402
from attn import plotting  # noqa: E402,F401  (re-exported for the scripts)

torch.set_num_threads(int(os.environ.get("ATTN_THREADS", "2")))


def kernel(name):
    """The example normalizer examples/normalizers/<name>.mlir, compiled once (cached)."""
    return attn.compile(str(NORMALIZERS / f"{name}.mlir"))


def write_results(name, results, out_dir=REPRO):
    path = Path(out_dir) / f"{name}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {path}")
