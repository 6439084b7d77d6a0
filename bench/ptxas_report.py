#!/usr/bin/env python3
"""Registers and spills of the GPU (Triton) kernels per chip, without a GPU: emits a
kernel's Triton module (attn-compile --emit=triton) with the schedules of the given chips,
compiles each kernel ahead of time as attn.triton_aot does, and assembles its PTX with
`ptxas -v` for that chip (the toolkit's, or Triton's).

    python bench/ptxas_report.py [normalizer.mlir] [--targets sm_80,sm_90]
                                 [--dtypes bf16] [--head-dims 64,128]

Prints a markdown table: chip, dtype, d, kernel, tiles / warps / stages, registers per
thread, spill stores / loads (bytes), shared memory (bytes), whether the PTX uses wgmma.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "runtime", "python"))

import torch  # noqa: E402

from attn import triton_aot, triton_backend  # noqa: E402


def bundled(arch):
    from triton.backends.nvidia.compiler import get_ptxas
    return get_ptxas(arch).path


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", nargs="?",
                        default=os.path.join(REPO, "examples", "normalizers", "softmax.mlir"))
    parser.add_argument("--targets", default="sm_80,sm_90")
    parser.add_argument("--dtypes", default="bf16")
    parser.add_argument("--head-dims", default="64,128")
    args = parser.parse_args()
    # First: Triton fixes the PTX version from the ptxas it is given once, at its first use.
    ptxas, version = triton_aot._ptxas()
    from triton.backends.compiler import GPUTarget
    kernel = triton_backend.compile_triton(args.source, options=[
        f"--cuda-targets={args.targets}", f"--cuda-dtypes={args.dtypes}",
        f"--cuda-head-dims={args.head_dims}"])
    print(f"{os.path.basename(args.source)}, {version} (`python bench/ptxas_report.py "
          f"{os.path.relpath(args.source, REPO)} --targets {args.targets} --dtypes {args.dtypes} "
          f"--head-dims {args.head_dims}`)\n")
    print("| chip | dtype | d | kernel | tiles, warps, stages | regs | spill st/ld (B) | "
          "smem (B) | wgmma |")
    print("|---|---|---|---|---|---|---|---|---|")
    dtypes = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
    for (chip, dtype, head_dim), schedule in kernel.module.SCHEDULES.items():
        arch = int(chip[3:])
        compiled = kernel.compile_ahead(GPUTarget("cuda", arch, 32), dtype=dtypes[dtype],
                                        head_dim=head_dim, is_causal=False,
                                        has_key_lengths=True, schedule=schedule)
        for name, binary in compiled.items():
            ptx = binary.asm["ptx"]
            with tempfile.TemporaryDirectory() as scratch:
                path = os.path.join(scratch, "k.ptx")
                with open(path, "w") as f:
                    f.write(ptx)
                target = re.search(r"\.target (sm_\w+)", ptx).group(1)
                # The PTX may be newer than the toolkit's ptxas reads: then Triton's own.
                for assembler in (ptxas, bundled(arch)):
                    result = subprocess.run([assembler, "-v", f"-arch={target}", path, "-o",
                                             os.path.join(scratch, "k.cubin")],
                                            capture_output=True, text=True)
                    if result.returncode == 0:
                        break
                report = result.stderr
            regs = re.search(r"Used (\d+) registers", report)
            spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
            tiles = schedule[triton_backend.schedule_entry(name)]
            which = "" if assembler == ptxas else " (Triton's ptxas)"
            print(f"| {chip}{which} | {dtype} | {head_dim} | {name} | {tiles[0]}×{tiles[1]}, {tiles[2]}, "
                  f"{tiles[3]} | {regs.group(1) if regs else '?'} | "
                  f"{spills.group(1) + '/' + spills.group(2) if spills else '?'} | "
                  f"{binary.metadata.shared} | {'yes' if 'wgmma.mma_async' in ptx else 'no'} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
