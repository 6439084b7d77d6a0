"""Compile attn IR from Python, with a content-addressed artifact cache, so a notebook
never needs a separate build step:

    kernel = attn.compile(open("tanhmax.mlir").read())   # or a path to the .mlir file
    kernel = attn.compile(attn.kernel(attn.normalizer(...)))   # IR traced from Python

The cache key covers the IR text without its locations and comments (kernel_key_text), the
options, the compiler binary (size and mtime) and, for cpu="native", the host CPU, so
editing the IR, rebuilding the compiler or sharing the cache with another kind of machine
gives a fresh artifact, while an edit that only moves the traced code to other lines of a
script (which changes every `loc(...)` and the source comments, not the kernel) finds the
artifact already built. Diagnostics still name the lines: a compile that fails is never
cached. The cache lives in
$ATTN_CACHE_DIR, else ~/.cache/attn, and is safe to share between threads and processes
(data-parallel ranks, notebooks): one of them compiles a key while the others wait on its
lock file (<key>.so.lock, removed once the artifact is published), and an artifact is
published once, complete and sealed, under its key (a hard link of the finished file) and
never rewritten. GPU code requested with cuda_targets is built per (dtype, head dim) on its
first CUDA call by default (LazyCuda), into entries of the same cache.
"""

import base64
import ctypes
import fcntl
import hashlib
import json
import os
import platform
import subprocess
import tempfile
import zlib
from contextlib import contextmanager, suppress

from .paths import compiler_path, opt_path

__all__ = ["compile", "opt", "compiler_path", "cache_dir", "cuda_targets_of", "LazyCuda",
           "kernel_key_text", "artifact_reference", "resolve_artifact_reference"]


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
        result = subprocess.run([compiler, src, "-o", out, *options], capture_output=True, text=True)
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


def _skip_string(text, start):
    """The index just past the MLIR string literal that opens at text[start] ('"')."""
    i = start + 1
    while i < len(text) and text[i] != '"':
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _skip_parenthesised(text, start):
    """The index just past the ')' that closes the '(' at text[start]."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c == '"':
            i = _skip_string(text, i)
            continue
        depth += c == "("
        depth -= c == ")"
        i += 1
        if depth == 0:
            break
    return i


def kernel_key_text(text):
    """`text` without what does not change the kernel: `// comments`, `loc(...)`
    attachments and the `#alias = loc(...)` definitions they refer to (the Python
    front-end writes each op's file:line:col and its source line as a comment). String
    literals are kept whole, whatever they contain. Used for the cache key only: the IR
    compiled is `text` itself, so diagnostics keep their locations."""
    kept, i = [], 0
    while i < len(text):
        c = text[i]
        if c == '"':
            end = _skip_string(text, i)
            kept.append(text[i:end])
            i = end
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
        elif (text.startswith("loc(", i)
              and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_.$-"))):
            i = _skip_parenthesised(text, i + 3)
        else:
            kept.append(c)
            i += 1
    lines = "".join(kept).split("\n")
    # An alias definition is "#name = " once its loc(...) is gone.
    lines = [line.rstrip() for line in lines
             if not (line.lstrip().startswith("#") and line.rstrip().endswith("="))]
    return "\n".join(line for line in lines if line)


def _cached_artifact(compiler, text, options, host):
    """The cache entry of `text` compiled with `options` (compiled first unless another
    thread or process has published it); `host` is what a --cpu=native artifact depends
    on ("" otherwise)."""
    stat = os.stat(compiler)
    key = hashlib.sha256("\0".join([kernel_key_text(text), *options, f"{stat.st_size}:{stat.st_mtime_ns}", host])
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


#: attn/runtime.h's ATTN_ARTIFACT_REFERENCE_PREFIX, then the encoding's version.
REFERENCE_PREFIX = "attn-artifact:"
_REFERENCE_VERSION = "1:"


def artifact_reference(text, options, native):
    """The portable name of the artifact that `text` compiled with attn-compile `options`
    is (`native`: for the host CPU): what an exported program records instead of a cache
    path, so that it loads on another machine, where the runtime resolves it
    (resolve_artifact_reference) to that machine's cache entry, compiled if missing. The
    same arguments give the same string (a constant of the graph)."""
    payload = json.dumps({"ir": text, "options": list(options), "native": bool(native)},
                         sort_keys=True).encode()
    encoded = base64.urlsafe_b64encode(zlib.compress(payload, 9)).decode("ascii")
    return REFERENCE_PREFIX + _REFERENCE_VERSION + encoded


def resolve_artifact_reference(reference):
    """The path of the artifact `reference` (artifact_reference) names, in this machine's
    cache, compiled with this machine's attn-compile unless it is there. Raises ValueError
    for a string that is no reference of this version, RuntimeError when it cannot
    compile."""
    if not reference.startswith(REFERENCE_PREFIX + _REFERENCE_VERSION):
        raise ValueError(f"{reference[:40]!r} is not an attn artifact reference; expected "
                         f"'{REFERENCE_PREFIX}{_REFERENCE_VERSION}<encoded IR>', as written by "
                         f"attn {_REFERENCE_VERSION[:-1]}-format exports")
    try:
        encoded = reference[len(REFERENCE_PREFIX) + len(_REFERENCE_VERSION):]
        payload = json.loads(zlib.decompress(base64.urlsafe_b64decode(encoded)))
        text, options, native = payload["ir"], payload["options"], payload["native"]
    except (ValueError, KeyError, TypeError, zlib.error) as e:
        raise ValueError(f"attn artifact reference {reference[:40]!r}... is damaged: {e}") from e
    return _cached_artifact(compiler_path(), text, options, _host_cpu() if native else "")


def _resolve_for_runtime(reference, path, capacity, error, error_capacity):
    """attn_artifact_resolver_fn (attn/runtime.h), called by the runtime from any thread."""
    try:
        result, status = os.fsencode(resolve_artifact_reference(reference.decode())), 0
        target, room = path, capacity
    except Exception as e:  # noqa: BLE001 - every failure goes back to the runtime as text
        result, status = str(e).encode(errors="replace"), 1
        target, room = error, error_capacity
    if status == 0 and len(result) >= room:
        result, status = f"the path is longer than {room - 1} bytes".encode(), 1
        target, room = error, error_capacity
    result = result[:room - 1]
    ctypes.memmove(target, result + b"\0", len(result) + 1)
    return status


_RESOLVER_TYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_void_p, ctypes.c_size_t)
_resolver = _RESOLVER_TYPE(_resolve_for_runtime)  # kept alive: the runtime holds its address


def register_artifact_resolver(runtime_library):
    """Registers the package's resolver with the runtime library at `runtime_library`."""
    ctypes.CDLL(runtime_library).attn_set_artifact_resolver(_resolver)


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

    def reference(self, dtype, head_dim):
        """The portable reference of that artifact (artifact_reference)."""
        return artifact_reference(self.text, self.options_for(dtype, head_dim), bool(self.host))


def compile(source, kernel=None, dtypes=("f32", "f64"), cpu="native", cuda_targets=None,  # noqa: A001
            attn_mask=None, lazy_cuda=True):
    """Compile attn IR (a string, a path to a .mlir file, or IR traced by attn.kernel /
    attn.normalizer) and load it; returns an attn.Kernel. `kernel` names the attn.kernel
    when the IR holds several. `dtypes` is a non-empty sequence (or comma-separated
    string) of "f32" / "f64". `cuda_targets` adds GPU code: "auto" (the visible GPUs),
    "sm_80,sm_90" or a list. With `lazy_cuda` (the default) only the CPU code is compiled
    now, and the GPU code of a (dtype, head dim) the first time a CUDA call needs it (a
    few seconds, then cached: see LazyCuda); lazy_cuda=False compiles the GPU code of every
    dtype and head dim (float32, float16, bfloat16 × 32, 64, 128) into the one artifact
    now, as attn-compile --cuda-targets does (tens of seconds). `attn_mask` gives the
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
    options = [f"--dtypes={','.join(dtypes)}", *shared, *eager_cuda, *mask]
    artifact = _cached_artifact(compiler, text, options, host)
    lazy = LazyCuda(compiler, text, shared + mask, host, targets) if targets and lazy_cuda else None
    return Kernel(artifact, lazy_cuda=lazy,
                  reference=artifact_reference(text, options, native=cpu == "native"))
