"""Compile attn IR from Python, with a content-addressed artifact cache, so a notebook
never needs a separate build step:

    kernel = attn.compile(open("tanhmax.mlir").read())   # or a path to the .mlir file
    kernel = attn.compile(attn.kernel(attn.normalizer(...)))   # IR traced from Python

The cache key covers the IR text, the options and the compiler binary (size and mtime),
so editing the IR or rebuilding the compiler gives a fresh artifact. The cache lives in
$ATTN_CACHE_DIR, else ~/.cache/attn.
"""

import hashlib
import os
import subprocess
import tempfile

from .paths import compiler_path, opt_path

__all__ = ["compile", "opt", "compiler_path", "cache_dir", "cuda_targets_of"]


def cache_dir():
    return os.environ.get("ATTN_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "attn")


def _source_text(source):
    """IR text from an IR string, a path to a .mlir file, or a traced attn.kernel /
    attn.normalizer (attn.frontend)."""
    from .frontend import kernel_ir

    traced = kernel_ir(source)
    if traced is not None:
        return str(traced)
    text = os.fspath(source)
    if "\n" not in text and text.endswith(".mlir"):
        if not os.path.exists(text):
            raise RuntimeError(f"attn.compile: no such file: {text}")
        with open(text, encoding="utf-8") as f:
            return f.read()
    return text


def cuda_targets_of(cuda_targets):
    """A list of sm_XY targets from None / "auto" / "sm_80,sm_90" / a sequence. "auto"
    is the compute capability of every visible CUDA device (none without CUDA)."""
    import torch

    if cuda_targets is None:
        return []
    if cuda_targets == "auto":
        found = []
        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                major, minor = torch.cuda.get_device_capability(i)
                target = f"sm_{major}{minor}"
                if target not in found:
                    found.append(target)
        return found
    if isinstance(cuda_targets, str):
        cuda_targets = cuda_targets.split(",")
    return [t.strip() for t in cuda_targets if t.strip()]


def opt(source, *options):
    """Run attn-opt on attn IR (as attn.compile takes it) with `options`, e.g.
    "--attn-classify-normalizer"; returns the printed IR. Raises RuntimeError with
    attn-opt's diagnostics (for traced IR they name the Python lines)."""
    result = subprocess.run([opt_path(), "-", *options], input=_source_text(source),
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"attn.opt: attn-opt failed:\n{result.stderr}")
    return result.stdout


def compile(source, kernel=None, dtypes=("f32", "f64"), cpu="native", cuda_targets=None):  # noqa: A001
    """Compile attn IR (a string, a path to a .mlir file, or IR traced by attn.kernel /
    attn.normalizer) and load it; returns an attn.Kernel. `kernel` names the attn.kernel
    when the IR holds several. `cuda_targets` adds GPU code: "auto" (the visible GPUs),
    "sm_80,sm_90" or a list. Raises RuntimeError with the compiler's diagnostics when the
    IR is invalid (for traced IR they name the Python lines)."""
    from . import load

    text = _source_text(source)
    compiler = compiler_path()
    stat = os.stat(compiler)
    targets = cuda_targets_of(cuda_targets)
    options = [f"--dtypes={','.join(dtypes)}", f"--cpu={cpu}"] + ([f"--kernel={kernel}"] if kernel else [])
    if targets:
        options.append(f"--cuda-targets={','.join(targets)}")
    key = hashlib.sha256("\0".join([text, *options, f"{stat.st_size}:{stat.st_mtime_ns}"]).encode()).hexdigest()
    directory = cache_dir()
    os.makedirs(directory, exist_ok=True)
    artifact = os.path.join(directory, f"{key[:32]}.so")
    if not os.path.exists(artifact):
        with tempfile.TemporaryDirectory(dir=directory) as scratch:
            src = os.path.join(scratch, "kernel.mlir")
            with open(src, "w", encoding="utf-8") as f:
                f.write(text)
            out = os.path.join(scratch, "kernel.so")
            result = subprocess.run([compiler, src, "-o", out, *options], capture_output=True, text=True)
            if result.returncode != 0 or not os.path.exists(out):
                diagnostics = (result.stderr or result.stdout).replace(src, "<attn IR>")
                raise RuntimeError(f"attn.compile: attn-compile failed:\n{diagnostics}")
            os.replace(out, artifact)  # atomic: concurrent compiles of the same IR agree
    return load(artifact)
