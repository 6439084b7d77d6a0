"""Compile attn IR from Python, with a content-addressed artifact cache, so a notebook
never needs a separate build step:

    kernel = attn.compile(open("tanhmax.mlir").read())   # or a path to the .mlir file
    kernel = attn.compile(attn.kernel(attn.normalizer(...)))   # IR traced from Python

The cache key covers the IR text, the options, the compiler binary (size and mtime) and,
for cpu="native", the host CPU, so editing the IR, rebuilding the compiler or sharing the
cache with another kind of machine gives a fresh artifact. The cache lives in
$ATTN_CACHE_DIR, else ~/.cache/attn, and is safe to share between threads and processes
(data-parallel ranks, notebooks): one of them compiles a key while the others wait on its
lock file (<key>.so.lock, removed once the artifact is published), and an artifact is
published once, complete and sealed, under its key (a hard link of the finished file) and
never rewritten. GPU code requested with cuda_targets is built per (dtype, head dim) on its
first CUDA call by default (LazyCuda), into entries of the same cache.
"""

import fcntl
import hashlib
import os
import platform
import subprocess
import sys
import tempfile
from contextlib import contextmanager, suppress

from .paths import compiler_path, opt_path

__all__ = ["compile", "opt", "compiler_path", "cache_dir", "cuda_targets_of", "LazyCuda"]


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


def _host_cpu():
    """What an artifact compiled with --cpu=native depends on: the machine and its CPU
    model and features (Linux: /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n\n")[0].splitlines()
    except OSError:
        lines = []
    wanted = ("model name", "flags", "Features", "CPU implementer", "CPU part")
    return "\n".join([platform.machine()] + [line for line in lines if line.startswith(wanted)])


@contextmanager
def _exclusive(path):
    """Holds an exclusive lock on the file `path` (created if needed): across processes,
    and across threads of one process (each opens its own descriptor)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _build(compiler, text, options, artifact):
    """Compiles `text` into the cache entry `artifact`, unless another thread or
    process has published it meanwhile."""
    directory = os.path.dirname(artifact)
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        src = os.path.join(scratch, "kernel.mlir")
        with open(src, "w", encoding="utf-8") as f:
            f.write(text)
        out = os.path.join(scratch, "kernel.so")
        # --cuda-targets compiles the Triton kernels with a Python that has torch and
        # Triton: this one, unless ATTN_PYTHON names another.
        env = dict(os.environ, ATTN_PYTHON=os.environ.get("ATTN_PYTHON", sys.executable))
        result = subprocess.run([compiler, src, "-o", out, *options], capture_output=True,
                                text=True, env=env)
        if result.returncode != 0 or not os.path.exists(out):
            diagnostics = (result.stderr or result.stdout).replace(src, "<attn IR>")
            raise RuntimeError(f"attn.compile: attn-compile failed:\n{diagnostics}")
        fd = os.open(out, os.O_RDONLY)
        try:
            os.fsync(fd)  # complete on disk before it has a name in the cache
        finally:
            os.close(fd)
        try:
            os.link(out, artifact)  # atomic, and never replaces a published artifact
        except FileExistsError:
            pass  # published by a process that did not take the lock: the same artifact


def opt(source, *options):
    """Run attn-opt on attn IR (as attn.compile takes it) with `options`, e.g.
    "--attn-expand-shared-regions", "--attn-classify-normalizer" (the first writes the
    short forms out, which the later passes read); returns the printed IR. Raises RuntimeError with
    attn-opt's diagnostics (for traced IR they name the Python lines)."""
    result = subprocess.run([opt_path(), "-", *options], input=_source_text(source),
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"attn.opt: attn-opt failed:\n{result.stderr}")
    return result.stdout


#: The values of compile(attn_mask=...): the kinds of attn-add-mask-input.
MASK_INPUT_KINDS = ("bool", "additive", "learnable-additive")


def _cached_artifact(compiler, text, options, host):
    """The cache entry of `text` compiled with `options` (compiled first unless another
    thread or process has published it); `host` is what a --cpu=native artifact depends
    on ("" otherwise)."""
    stat = os.stat(compiler)
    key = hashlib.sha256("\0".join([text, *options, f"{stat.st_size}:{stat.st_mtime_ns}", host])
                         .encode()).hexdigest()
    directory = cache_dir()
    os.makedirs(directory, exist_ok=True)
    artifact = os.path.join(directory, f"{key[:32]}.so")
    if not os.path.exists(artifact):
        lock = artifact + ".lock"
        with _exclusive(lock):
            if not os.path.exists(artifact):
                _build(compiler, text, options, artifact)
            # Published: the lock has done its work. A process still waiting on it
            # finds the artifact once it gets it, and one that arrives later finds
            # the artifact before it looks for a lock.
            with suppress(FileNotFoundError):
                os.unlink(lock)
    return artifact


class LazyCuda:
    """The GPU code of a kernel compiled with attn.compile(..., cuda_targets=...,
    lazy_cuda=True): one artifact per (dtype, head dim), built the first time a CUDA call
    needs it (Kernel keeps what it loaded) and cached like any other by content, the
    variant included in the key. Such an artifact holds the GPU kernels of that one
    dtype and head dim for every target, and float32 CPU code (every artifact has some),
    so it compiles in seconds where every dtype × head dim takes tens."""

    def __init__(self, compiler, text, options, host, targets):
        self.compiler, self.text, self.options, self.host = compiler, text, options, host
        self.targets = list(targets)

    def options_for(self, dtype, head_dim):
        """attn-compile's options for the artifact of `dtype` ("f32", "f16", "bf16") and
        `head_dim`."""
        return ["--dtypes=f32", *self.options, f"--cuda-targets={','.join(self.targets)}",
                f"--cuda-dtypes={dtype}", f"--cuda-head-dims={head_dim}"]

    def build(self, dtype, head_dim):
        """The path of the artifact of `dtype` and `head_dim`, compiled unless cached."""
        return _cached_artifact(self.compiler, self.text, self.options_for(dtype, head_dim),
                                self.host)


def compile(source, kernel=None, dtypes=("f32", "f64"), cpu="native", cuda_targets=None,  # noqa: A001
            attn_mask=None, lazy_cuda=True):
    """Compile attn IR (a string, a path to a .mlir file, or IR traced by attn.kernel /
    attn.normalizer) and load it; returns an attn.Kernel. `kernel` names the attn.kernel
    when the IR holds several. `dtypes` is a non-empty sequence (or comma-separated
    string) of "f32" / "f64". `cuda_targets` adds GPU code: "auto" (the visible GPUs),
    "sm_80,sm_90" or a list. With `lazy_cuda` (the default) only the CPU code is compiled
    now, and the GPU code of a (dtype, head dim) the first time a CUDA call needs it (a
    few seconds, then cached: see LazyCuda); lazy_cuda=False compiles the GPU code of
    attn-compile --cuda-targets' default (bfloat16, head dim 64) into the one artifact now
    (tens of seconds). `attn_mask` gives the
    kernel torch's attn_mask as its tensor
    input `attn_mask` [B, H, Nq, Nk] (attn-compile --attn-mask, the pass
    attn-add-mask-input), which attn.attention and attn.MultiheadAttention fill from their
    attn_mask and key_padding_mask (attn.masks): "bool" (a keep table), "additive" (a score
    bias) or "learnable-additive" (a score bias that gets a gradient). Raises RuntimeError
    with the compiler's diagnostics when the IR is invalid (for traced IR they name the
    Python lines), ValueError for an empty `dtypes` or an unknown `attn_mask`."""
    from . import Kernel

    if isinstance(dtypes, str):
        dtypes = [d for d in dtypes.split(",") if d]
    if not dtypes:
        raise ValueError("attn.compile: dtypes is empty; expected some of 'f32', 'f64' "
                         "(default: both)")
    if attn_mask is not None and attn_mask not in MASK_INPUT_KINDS:
        raise ValueError(f"attn.compile: attn_mask={attn_mask!r}; expected None or one of "
                         f"{', '.join(repr(k) for k in MASK_INPUT_KINDS)}")
    text = _source_text(source)
    compiler = compiler_path()
    targets = cuda_targets_of(cuda_targets)
    shared = [f"--cpu={cpu}"] + ([f"--kernel={kernel}"] if kernel else [])
    mask = [f"--attn-mask={attn_mask}"] if attn_mask else []
    eager_cuda = [f"--cuda-targets={','.join(targets)}"] if targets and not lazy_cuda else []
    host = _host_cpu() if cpu == "native" else ""
    artifact = _cached_artifact(compiler, text,
                                [f"--dtypes={','.join(dtypes)}", *shared, *eager_cuda, *mask],
                                host)
    lazy = LazyCuda(compiler, text, shared + mask, host, targets) if targets and lazy_cuda else None
    return Kernel(artifact, lazy_cuda=lazy)
