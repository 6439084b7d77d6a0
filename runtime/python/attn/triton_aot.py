"""Ahead-of-time compilation of an emitted Triton module (attn-compile --emit=triton) for
CUDA targets, without a GPU: what `attn-compile --cuda-targets=...` runs to put cubins in
an artifact.

    python -m attn.triton_aot kernel.py --out DIR

compiles the kernels the launchers run (triton_backend.launched_kernels) for every entry
(chip, dtype, head dim) of the module's SCHEDULES (the kernel's #attn.gpu_schedule: tiles,
warps and stages per entry) and writes
DIR/attn_triton_<chip>_<dtype>_d<head dim>_<causal|full|any>_<kernel>.cubin, DIR/images.txt
(one line per cubin: the symbol attn-compile embeds it as, a tab, its file name) and
DIR/launch.json: per image the kernel's name in the cubin, its parameters in order (each
with its Triton type; Triton 3.x kernels take two more pointers after them, the global
and the profile scratch, null when their sizes are 0), its tiles (block_m, block_n),
num_warps, num_stages, shared memory, the scratch sizes, the grid rule and the score scale
for its head dim (the `scale` argument); the ptxas that assembled them, the backward's
order and tile states (triton_backend.backward_plan) and the decode rule (the module's
DECODE, left out where it has no rows: no decode forward). Key padding is always
compiled in (HAS_KEY_LENGTHS: the launcher passes Nk per batch entry when none is given);
is_causal gives two variants.
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import torch

from .manifest import check_triton_launch
from .triton_backend import (BACKWARD_KEYS, BACKWARD_PREPROCESS, BACKWARD_QUERIES, FORWARD,
                             FORWARD_MERGE, FORWARD_SPLIT, backward_plan, launched_kernels,
                             schedule_entry)

# Triton 3.9 warns unless this is set; 1 keeps its default (fused multiply-add).
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

__all__ = ["compile_module", "main"]

_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
#: (kernel, grid rule) in launch order: the grid's x and y as the launcher computes them.
GRID_RULES = {
    FORWARD: "(cdiv(NQ, BLOCK_M), B * H)",
    FORWARD_SPLIT: "(cdiv(H / H_KV * NQ, BLOCK_M), B * H_KV, SPLITS)",
    FORWARD_MERGE: "(cdiv(NQ, BLOCK_M), B * H)",
    BACKWARD_PREPROCESS: "(cdiv(NQ, BLOCK_M), B * H)",
    BACKWARD_KEYS: "(cdiv(NK, BLOCK_N), B * H_KV)",
    BACKWARD_QUERIES: "(cdiv(NQ, BLOCK_M), B * H)",
}
# Kernels whose code does not depend on is_causal: one "any" variant.
_CAUSALITY_FREE = (BACKWARD_PREPROCESS, FORWARD_MERGE)
# The toolkit's ptxas, which the device machine's driver (CUDA 13.0) accepts; Triton's
# bundled one otherwise.
_TOOLKIT_PTXAS = "/usr/local/cuda/bin/ptxas"


def _ptxas():
    """The ptxas to assemble every target with and its version line. Triton takes sm_90+
    code to another ptxas of its own (TRITON_PTXAS_BLACKWELL_PATH), so both are pointed at
    the same one: the version the manifest records is the one that assembled each cubin."""
    path = os.environ.get("TRITON_PTXAS_PATH")
    if not path and os.path.exists(_TOOLKIT_PTXAS):
        path = _TOOLKIT_PTXAS
    if path:
        os.environ["TRITON_PTXAS_PATH"] = path
        os.environ["TRITON_PTXAS_BLACKWELL_PATH"] = path
    else:
        from triton.backends.nvidia.compiler import get_ptxas
        path = get_ptxas(80).path
        os.environ["TRITON_PTXAS_BLACKWELL_PATH"] = path
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    release = [line for line in version.splitlines() if "release" in line]
    return path, release[0].strip() if release else version.strip() or "unknown"


def _chip_arch(chip):
    if not chip.startswith("sm_") or not chip[3:].isdigit() or int(chip[3:]) < 80:
        raise ValueError(f"attn.triton_aot: targets are sm_XY with XY >= 80, got {chip!r}")
    return int(chip[3:])


def compile_module(module_path, out_dir):
    """Compiles the module's kernels for every SCHEDULES entry × causality into out_dir;
    returns the launch description (also written as launch.json)."""
    from triton.backends.compiler import GPUTarget

    from .triton_backend import TritonKernel

    spec = importlib.util.spec_from_file_location("attn_triton_aot_module", module_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = TritonKernel(module)
    ptxas, ptxas_version = _ptxas()
    os.makedirs(out_dir, exist_ok=True)
    images, lines = [], []
    launched = launched_kernels(module)
    if not module.SCHEDULES:
        raise ValueError(f"attn.triton_aot: {module_path} has no SCHEDULES entry to compile")
    for (chip, dtype, head_dim), schedule in module.SCHEDULES.items():
        arch = _chip_arch(chip)
        if dtype not in _DTYPES:
            raise ValueError(f"attn.triton_aot: dtypes are {', '.join(_DTYPES)}, got {dtype!r}")
        for causal in (False, True):
            names = launched if not causal else tuple(
                n for n in launched if n not in _CAUSALITY_FREE)
            compiled = kernel.compile_ahead(
                GPUTarget("cuda", arch, 32), dtype=_DTYPES[dtype], head_dim=head_dim,
                is_causal=causal, has_key_lengths=True, names=names, schedule=schedule)
            for name, binary in compiled.items():
                variant = "any" if name in _CAUSALITY_FREE else (
                    "causal" if causal else "full")
                direction = schedule_entry(name)
                symbol = f"attn_triton_{chip}_{dtype}_d{head_dim}_{variant}_{name}"
                file = f"{symbol}.cubin"
                with open(os.path.join(out_dir, file), "wb") as f:
                    f.write(binary.asm["cubin"])
                meta = binary.metadata
                images.append({
                    "symbol": symbol, "chip": chip, "dtype": dtype,
                    "head_dim": head_dim, "variant": variant, "kernel": name,
                    "function": meta.name,
                    "parameters": [[a, t] for a, t in binary.src.signature.items()
                                   if t != "constexpr"],
                    "constants": {binary.src.fn.arg_names[key[0]]: value
                                  for key, value in binary.src.constants.items()},
                    "trailing_scratch": ["global_scratch", "profile_scratch"],
                    "block_m": schedule[direction][0],
                    "block_n": schedule[direction][1],
                    "num_warps": meta.num_warps, "num_stages": meta.num_stages,
                    "shared_bytes": meta.shared,
                    "global_scratch_size": meta.global_scratch_size,
                    "global_scratch_align": meta.global_scratch_align,
                    "profile_scratch_size": meta.profile_scratch_size,
                    "grid": GRID_RULES[name],
                    "scale": float(module.score_scale(head_dim)),
                })
                lines.append(f"{symbol}\t{file}")
    launch = {"kernel": module.KERNEL, "ptxas": ptxas, "ptxas_version": ptxas_version,
              "param_names": list(module.PARAM_NAMES), "backward": backward_plan(module),
              "inputs": [list(entry) for entry in module.INPUTS], "images": images}
    if module.DECODE["max_rows"] > 0:  # else the module's attn_fwd serves every call
        launch["decode"] = dict(module.DECODE)
    text = json.dumps(launch, indent=1)
    check_triton_launch(json.loads(text))  # what attn-compile embeds, as the runtime reads it
    with open(os.path.join(out_dir, "launch.json"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(out_dir, "images.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return launch


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m attn.triton_aot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("module", help="the module attn-compile --emit=triton wrote")
    parser.add_argument("--out", required=True, help="the directory to write")
    args = parser.parse_args(argv)
    try:
        import triton  # noqa: F401
        from triton.backends import backends
    except ImportError as error:
        print(f"attn.triton_aot: needs Triton ({error}); install it (pip install triton)",
              file=sys.stderr)
        return 1
    if "nvidia" not in backends:
        print(f"attn.triton_aot: this Triton has no CUDA backend ({sorted(backends)})",
              file=sys.stderr)
        return 1
    try:
        compile_module(args.module, args.out)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
