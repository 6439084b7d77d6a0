"""Launches the Triton kernels that `attn-compile --emit=triton` writes (the GPU backend,
lib/Codegen/Triton/TritonEmitter.h):

    kernel = attn.triton_backend.compile_triton("tanhmax.mlir")
    out = kernel(q, k, v)                 # autograd: dq, dk, dv and the params' gradient
    out = sinks_kernel(q, k, v, inputs={"sinks": sinks, "doc": doc})  # tensor inputs

The emitted module holds the math (its scalar functions and kernel templates); this
file only checks the arguments, allocates, launches with the module's grid rules and
sums the per-program parameter-gradient slots in a fixed order. With TRITON_INTERPRET=1
(set before triton is imported) the same kernels run on CPU tensors.
"""

import hashlib
import math
import importlib.util
import os
import subprocess
import sys
import tempfile

import torch

from .compiler import _source_text, cache_dir
from .manifest import SCHEMA
from .paths import compiler_path

__all__ = ["emit_triton", "load_triton", "compile_triton", "TritonKernel", "KERNEL_NAMES",
           "select_schedule", "choose_cuda_target", "jit_kernel_for", "decode_split",
           "backward_plan", "launched_kernels"]

#: The kernels of every emitted module, in launch order: the names the launch
#: description's schema allows (abi.h's ATTN_TRITON_* for the C++ runtime).
KERNEL_NAMES = tuple(SCHEMA["$defs"]["triton_launch"]["properties"]["images"]["items"]
                     ["properties"]["kernel"]["enum"])
(FORWARD, FORWARD_SPLIT, FORWARD_MERGE, BACKWARD_PREPROCESS, BACKWARD_KEYS,
 BACKWARD_QUERIES) = KERNEL_NAMES
# Pointer arguments that are not q, k, v or their like (which have the storage type).
_POINTER_TYPES = {"RowMax": "*fp32", "RowSum": "*fp32", "Delta": "*fp32", "Params": "*fp32",
                  "PartAcc": "*fp32", "PartMax": "*fp32", "PartSum": "*fp32", "PartCount": "*fp32",
                  "DParamsRows": "*fp32", "DParamsKeys": "*fp32", "KeyLengths": "*i32",
                  "TileLogSurvival": "*fp32", "TileSuffix": "*fp32",
                  "QueryStarts": "*i64", "KeyStarts": "*i64"}
_STORED = ("Q", "K", "V", "Out", "DOut", "DQ", "DK", "DV")
_TRITON_TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
# Element types of tensor inputs in the emitted INPUTS, as torch dtypes.
_INPUT_TYPES = {"fp32": torch.float32, "i8": torch.int8, "i32": torch.int32, "i64": torch.int64}

_STORAGE_TYPES = (torch.float32, torch.float16, torch.bfloat16)


def emit_triton(source, kernel=None, options=()):
    """The Python module text attn-compile --emit=triton writes for `source` (IR text, a
    .mlir path or traced IR, as attn.compile takes it); `options` are more attn-compile
    options (--cuda-targets, --cuda-dtypes, --cuda-head-dims: what SCHEDULES covers).
    Cached by content under the cache directory (triton/<key>.py, the compiler that wrote
    it in <key>.stamp): rewritten when another attn-compile is found, and used as it is
    where there is none (a GPU machine without the compiler, given the cache of a machine
    that has one). RuntimeError with attn-compile's diagnostics when it refuses the
    kernel."""
    text = _source_text(source)
    options = ["--emit=triton", *options] + ([f"--kernel={kernel}"] if kernel else [])
    key = hashlib.sha256("\0".join([text, *options]).encode()).hexdigest()[:32]
    directory = os.path.join(cache_dir(), "triton")
    cached, stamp_path = (os.path.join(directory, f"emitted_{key}{ext}")
                          for ext in (".py", ".stamp"))
    try:
        compiler = compiler_path()
    except RuntimeError:
        if os.path.exists(cached):
            with open(cached, encoding="utf-8") as f:
                return f.read()
        raise
    stat = os.stat(compiler)
    stamp = f"{compiler}:{stat.st_size}:{stat.st_mtime_ns}"
    if os.path.exists(cached) and os.path.exists(stamp_path):
        with open(stamp_path, encoding="utf-8") as f:
            if f.read() == stamp:
                with open(cached, encoding="utf-8") as g:
                    return g.read()
    with tempfile.TemporaryDirectory() as scratch:
        src = os.path.join(scratch, "kernel.mlir")
        with open(src, "w", encoding="utf-8") as f:
            f.write(text)
        out = os.path.join(scratch, "kernel.py")
        result = subprocess.run([compiler, src, "-o", out, *options],
                                capture_output=True, text=True)
        if result.returncode != 0:
            diagnostics = (result.stderr or result.stdout).replace(src, "<attn IR>")
            raise RuntimeError(f"attn: attn-compile --emit=triton failed:\n{diagnostics}")
        with open(out, encoding="utf-8") as f:
            module = f.read()
    os.makedirs(directory, exist_ok=True)
    for path, content in ((cached, module), (stamp_path, stamp)):
        fd, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)
        os.replace(temporary, path)
    return module


def _import_text(text):
    """Imports the module `text` from a file (Triton reads the source of its kernels), one
    per content under the cache directory."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:24]
    # @triton.jit decides at import whether the kernels run under the interpreter.
    interpreted = "_interpreted" if os.environ.get("TRITON_INTERPRET") == "1" else ""
    name = f"attn_triton_{digest}{interpreted}"
    if name in sys.modules:
        return sys.modules[name]
    directory = os.path.join(cache_dir(), "triton")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"attn_triton_{digest}.py")
    if not os.path.exists(path):
        fd, temporary = tempfile.mkstemp(dir=directory, suffix=".py.tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def load_triton(text, block_m=None, block_n=None, key_splits=None, schedule=None):
    """A TritonKernel from emitted module text (block sizes default to the module's;
    key_splits forces the decode forward with that many key chunks; schedule replaces
    entries of the module's: {"forward" | "backward" | "decode": (BLOCK_M, BLOCK_N,
    num_warps, num_stages)}, as bench/gpu_tiles.py tries them)."""
    return TritonKernel(_import_text(text), block_m, block_n, key_splits, schedule)


def compile_triton(source, kernel=None, block_m=None, block_n=None, options=(),
                   key_splits=None, schedule=None):
    """emit_triton, then load_triton."""
    return load_triton(emit_triton(source, kernel, options), block_m, block_n, key_splits,
                       schedule)


def choose_cuda_target(targets, major, minor):
    """The target among `targets` (sm_XY) whose cubins run on a GPU of compute capability
    major.minor, as the runtime chooses (runtime/library.cpp, choose_cuda_image): the
    exact one, else the newest of the same major with a lower minor; None if none."""
    exact, compatible = None, None
    for target in targets:
        digits = target[3:].rstrip("abcdefghijklmnopqrstuvwxyz")
        if not target.startswith("sm_") or len(digits) < 2 or not digits.isdigit():
            continue
        t_major, t_minor = int(digits[:-1]), int(digits[-1])
        specific = digits != target[3:]
        if t_major != major:
            continue
        if t_minor == minor and (exact is None or not specific):
            exact = target
        elif not specific and t_minor < minor and (compatible is None
                                                    or t_minor > int(compatible[-1])):
            compatible = target
    return exact or compatible


def embedded_source(path):
    """The Triton module an artifact embeds (attn_triton_source, abi.h)."""
    import ctypes
    library = ctypes.CDLL(path)
    size = ctypes.c_int64.in_dll(library, "attn_triton_source_size").value
    data = ctypes.addressof(ctypes.c_char.in_dll(library, "attn_triton_source"))
    return ctypes.string_at(data, size).rstrip(b"\0").decode()


_jit_kernels = {}  # artifact path -> TritonKernel of its embedded source


def jit_kernel_for(path, targets, capability, import_triton=None):
    """For a call on a GPU of `capability` (major, minor) with the artifact at `path`
    whose cubins are for `targets`: None when a cubin runs there (the runtime launches
    it), else the TritonKernel of its embedded Triton source, compiled by the user's
    Triton on first launch. RuntimeError naming the chip and the targets when Triton is
    not importable. `import_triton` (tests) stands in for importing triton."""
    major, minor = capability
    if choose_cuda_target(targets, major, minor) is not None:
        return None
    if path not in _jit_kernels:
        try:
            (import_triton or (lambda: __import__("triton")))()
        except ImportError as error:
            raise RuntimeError(
                f"attn: artifact {path} has no GPU code for this GPU (sm_{major}{minor}): its "
                f"cubins are for {', '.join(targets)}, and compiling its embedded Triton source "
                f"needs Triton, which is not importable ({error}); install triton or recompile "
                f"with attn-compile --cuda-targets=sm_{major}{minor}") from error
        _jit_kernels[path] = load_triton(embedded_source(path))
    return _jit_kernels[path]


def _cdiv(a, b):
    return -(-a // b)


def decode_split(nq, nk, group, batch_kv_heads, block_m, block_n, decode_block_m, sm_count,
                 rule, splits=None):
    """The decode forward's key chunks for a call of nq query rows over nk keys (group
    query heads per kv head, batch_kv_heads = B * H_kv): (chunks, keys per chunk, a
    multiple of block_n), or None when attn_fwd (tiles block_m x block_n) serves the call.
    `rule` is the module's DECODE (max_rows, programs_per_sm); `splits` forces that many
    chunks (tests, the interpreter) for any shape. The C++ runtime's copy of the rule,
    decode_key_chunks (runtime/gpu_launch.cpp), takes the same arguments in this order and
    is pinned by the same cases (test/runtime/work_split_test.cpp, DecodeRule)."""
    key_tiles = _cdiv(nk, block_n)
    if splits is None:
        attn_fwd_programs = _cdiv(nq, block_m) * batch_kv_heads * group
        if nq > rule["max_rows"] or sm_count is None or attn_fwd_programs >= sm_count:
            return None
        programs = _cdiv(group * nq, decode_block_m) * batch_kv_heads
        splits = min(key_tiles, _cdiv(rule["programs_per_sm"] * sm_count, programs))
        if splits < 2:
            return None
    per_split = _cdiv(key_tiles, max(1, splits)) * block_n
    return max(1, _cdiv(nk, per_split)), per_split


def _on_device(t, device, dtype):
    """Integer tensor `t` as contiguous `dtype` on `device`, without draining the GPU's
    stream: a copy from pageable host memory first waits for the stream's work (CUDA's
    synchronisation rules), which would serialise every call with the kernels before it.
    Equal values become a fill, others an asynchronous copy from pinned memory."""
    t = t.to(dtype)
    device = torch.device(device)
    if t.device.type != "cpu" or device.type != "cuda":
        return t.to(device).contiguous()
    if t.numel() == 0:
        return torch.empty(t.shape, dtype=dtype, device=device)
    first = t.flatten()[0].item()
    if bool((t == first).all()):
        return torch.full(t.shape, first, dtype=dtype, device=device)
    return t.contiguous().pin_memory().to(device, non_blocking=True)


def _next_power_of_2(n):
    return 1 << max(0, (n - 1).bit_length())


def _chip_version(chip):
    return int(chip[3:]) if chip.startswith("sm_") and chip[3:].isdigit() else None


def select_schedule(schedules, default, chip, dtype, head_dim):
    """The schedule (dict: forward and backward (BLOCK_M, BLOCK_N, num_warps, num_stages))
    of an emitted module's SCHEDULES for `chip` (sm_XY), `dtype` (bf16, f16, f32) and
    `head_dim`: its own entry, else that of the newest older chip (a newer GPU than the
    artifact was compiled for), else `default`."""
    version = _chip_version(chip)
    candidates = [(_chip_version(c), entry) for (c, t, d), entry in schedules.items()
                  if t == dtype and d == head_dim and _chip_version(c) is not None
                  and version is not None and _chip_version(c) <= version]
    return max(candidates, key=lambda c: c[0])[1] if candidates else default


class TritonKernel:
    """The four kernels of one emitted module and how to launch them."""

    def __init__(self, module, block_m=None, block_n=None, key_splits=None, schedule=None):
        self.module = module
        self.name = module.KERNEL
        if "KeyStarts" not in getattr(module, FORWARD).arg_names:
            raise RuntimeError(f"attn kernel {self.name} (Triton): the module was emitted by "
                               "an older attn-compile (one key start for the whole batch, "
                               "KEY_START); recompile it with the attn-compile of this runtime")
        if not hasattr(module, "BACKWARD_PLAN"):
            raise RuntimeError(f"attn kernel {self.name} (Triton): the module was emitted by "
                               "an older attn-compile (no BACKWARD_PLAN: it holds kernels no "
                               "launcher runs); recompile it with the attn-compile of this "
                               "runtime")
        self.param_names = tuple(module.PARAM_NAMES)
        # (name, shape, offset in params, init) per learnable weight, after the params.
        self.weights = tuple(module.WEIGHTS)
        self.param_count = len(self.param_names) + sum(
            math.prod(shape) for _, shape, _, _ in self.weights)
        # (name, kernel argument, element type, extents, learnable) per tensor input.
        self.inputs = tuple(module.INPUTS)
        # Tiles a test asks for (both directions; the default schedule's warps and stages).
        self.block_m, self.block_n = block_m, block_n
        # Key chunks of the decode forward a test asks for, for every call; else
        # decode_split's choice from the GPU's SM count (none under the interpreter).
        self.key_splits = key_splits
        unknown = sorted(set(schedule or {}) - {"forward", "backward", "decode"})
        if unknown:
            raise ValueError(f"attn kernel {self.name} (Triton): schedule entries are "
                             f"forward, backward and decode, got {', '.join(unknown)}")
        self.schedule_override = dict(schedule or {})

    def schedule(self, device, dtype, head_dim):
        """{"forward": (BLOCK_M, BLOCK_N, num_warps, num_stages), "backward": (...),
        "decode": (...)} on
        `device` for storage `dtype` and `head_dim`: the module's SCHEDULES entry of the
        device's chip (select_schedule), DEFAULT_SCHEDULE under the interpreter, then the
        constructor's schedule entries and tiles where it was given some."""
        schedule = self.module.DEFAULT_SCHEDULE
        if torch.device(device).type == "cuda":
            major, minor = torch.cuda.get_device_capability(device)
            schedule = select_schedule(self.module.SCHEDULES, schedule, f"sm_{major}{minor}",
                                       _TRITON_TYPES[dtype].replace("fp", "f"), head_dim)
        schedule = {**schedule, **self.schedule_override}
        if self.block_m or self.block_n:
            schedule = {direction: ((tiles[0] if direction == "decode" else self.block_m
                                     or tiles[0]), self.block_n or tiles[1], *tiles[2:])
                        for direction, tiles in schedule.items()}
        return schedule

    def initial_params(self, dtype=torch.float32, device="cpu"):
        """The params, then each weight flattened (identity, or filled with its init)."""
        parts = [torch.tensor(self.module.PARAM_INITS, dtype=dtype, device=device)]
        for _, shape, _, init in self.weights:
            parts.append((torch.eye(*shape, dtype=dtype, device=device) if init == "identity"
                          else torch.full(shape, init, dtype=dtype, device=device)).flatten())
        return torch.cat(parts)

    def __call__(self, q, k, v, params=None, is_causal=False, key_lengths=None, inputs=None,
                 query_start=None, key_start=0):
        """O; query_start and key_start (each an int or an integer [B] tensor) are the
        absolute positions of q's and k's first rows (docs/decoding.md)."""
        if params is None:
            params = self.initial_params(device=q.device)
        self._check(q, k, v, params, key_lengths)
        positions = tuple(self._starts(name, start, q.shape[0]) for name, start in
                          (("query_start", query_start), ("key_start", key_start)))
        tables = self._check_inputs(inputs)
        return _TritonAttention.apply(self, q, k, v, params, bool(is_causal), key_lengths,
                                      positions, *tables)

    def _starts(self, name, start, B):
        """A start position (None: 0; an int or an integer 0-d or [B] tensor) as int64 [B]
        on the CPU, checked like the runtime checks it."""
        where = f"attn kernel {self.name} (Triton)"
        starts = torch.as_tensor(0 if start is None else start)
        if (starts.is_floating_point() or starts.dtype == torch.bool or starts.dim() > 1
                or (starts.dim() == 1 and starts.shape != (B,))):
            raise ValueError(f"{where}: {name} must be an int or an integer tensor [{B}], "
                             f"got {start!r}")
        if bool((starts < 0).any()):
            raise ValueError(f"{where}: {name} must be positions >= 0, got {starts.tolist()}")
        return starts.to(torch.int64).expand(B).contiguous()

    # --- arguments ----------------------------------------------------------------
    def _check(self, q, k, v, params, key_lengths):
        where = f"attn kernel {self.name} (Triton)"
        for name, t in (("q", q), ("k", k), ("v", v)):
            if not isinstance(t, torch.Tensor) or t.dim() != 4:
                raise ValueError(f"{where}: {name} must be a 4-D tensor [B, H, N, d], got "
                                 f"{getattr(t, 'shape', type(t).__name__)}")
            if t.dtype not in _STORAGE_TYPES:
                raise ValueError(f"{where}: {name} must be float32, float16 or bfloat16, got "
                                 f"{t.dtype}")
        if not (q.dtype == k.dtype == v.dtype) or not (q.device == k.device == v.device):
            raise ValueError(f"{where}: q, k and v must share dtype and device, got "
                             f"{q.dtype}/{k.dtype}/{v.dtype} on {q.device}/{k.device}/{v.device}")
        B, H, _, d = q.shape
        if k.shape[0] != B or v.shape[0] != B or k.shape[:3] != v.shape[:3] or k.shape[3] != d:
            raise ValueError(f"{where}: expected k [B, H_kv, Nk, d] and v [B, H_kv, Nk, dv] "
                             f"for q {tuple(q.shape)}, got k {tuple(k.shape)}, v {tuple(v.shape)}")
        if k.shape[1] == 0 or H % k.shape[1] != 0:
            raise ValueError(f"{where}: q's {H} heads must be a multiple of k's {k.shape[1]} (GQA)")
        if not isinstance(params, torch.Tensor) or params.dim() != 1 \
                or params.numel() != self.param_count:
            names = list(self.param_names) + [f"{name}[{'x'.join(map(str, shape))}]"
                                              for name, shape, _, _ in self.weights]
            raise ValueError(f"{where}: params must be a 1-D tensor of {self.param_count} "
                             f"({', '.join(names) or 'none'}), got "
                             f"{getattr(params, 'shape', type(params).__name__)}")
        for name, shape, _, _ in self.weights:  # [d, d], [n, d] or [m, d]; v [n]
            if len(shape) == 2 and shape[1] != d:
                raise ValueError(f"{where}: weight {name} is {'x'.join(map(str, shape))}, so "
                                 f"q and k need head dim {shape[1]}, got {d}")
        if key_lengths is not None and (not isinstance(key_lengths, torch.Tensor)
                                        or key_lengths.shape != (B,)
                                        or key_lengths.is_floating_point()):
            raise ValueError(f"{where}: key_lengths must be an integer tensor [{B}], got "
                             f"{getattr(key_lengths, 'shape', type(key_lengths).__name__)}")

    def _check_inputs(self, inputs):
        """The tensor inputs in the kernel's order, checked against INPUTS."""
        where = f"attn kernel {self.name} (Triton)"
        inputs = dict(inputs or {})
        expected = [name for name, *_ in self.inputs]
        if sorted(inputs) != sorted(expected):
            raise ValueError(f"{where}: inputs must name exactly the tensor inputs "
                             f"({', '.join(expected) or 'none'}), got "
                             f"{', '.join(sorted(inputs)) or 'none'}")
        tables = []
        for name, _, element, extents, learnable in self.inputs:
            t = inputs[name]
            floating = element == "fp32"
            if not isinstance(t, torch.Tensor) or t.dim() != len(extents) \
                    or t.is_floating_point() != floating or t.dtype == torch.bool \
                    or t.is_complex():
                raise ValueError(f"{where}: input {name} must be a {len(extents)}-D "
                                 f"{'float' if floating else 'integer'} tensor, got "
                                 f"{getattr(t, 'dtype', type(t).__name__)} "
                                 f"{tuple(getattr(t, 'shape', ()))}")
            for axis, (want, got) in enumerate(zip(extents, t.shape)):
                if got < 1 or (want != -1 and want != got):
                    wanted = "at least 1" if want == -1 else str(want)
                    raise ValueError(f"{where}: input {name} must have extent {wanted} in "
                                     f"dimension {axis}, got {tuple(t.shape)}")
            if t.requires_grad and not learnable:
                raise ValueError(f"{where}: input {name} requires grad but is not learnable "
                                 "(declare it attn.input @" + name + " learnable)")
            tables.append(t)
        return tables

    def _table_arguments(self, tables, device):
        """The tables as kernel keyword arguments: pointer, extents and strides (a copy only
        where the dtype or device differs: a broadcast view is read as it is)."""
        args = {}
        for (_, arg, element, _, _), t in zip(self.inputs, tables):
            t = t.detach().to(device=device, dtype=_INPUT_TYPES[element])
            args[arg] = t
            for axis, extent in enumerate(t.shape):
                args[f"{arg}_n{axis}"] = extent
            for axis, stride in enumerate(t.stride()):
                args[f"{arg}_s{axis}"] = stride
        return args

    def _launch_arguments(self, q, k, v, params, key_lengths, tiles, positions=None):
        device = q.device
        flat_params = params.detach().to(device=device, dtype=torch.float32).contiguous()
        if flat_params.numel() == 0:
            flat_params = torch.zeros(1, dtype=torch.float32, device=device)
        lengths = (_on_device(key_lengths, device, torch.int32) if key_lengths is not None
                   else torch.zeros(1, dtype=torch.int32, device=device))
        B, H, NQ, d = q.shape
        H_KV, NK, dv = k.shape[1], k.shape[2], v.shape[3]
        starts, key_starts = (_on_device(t, device, torch.int64) for t in
                              positions or (torch.zeros(B, dtype=torch.int64),) * 2)
        sizes = dict(H=H, H_KV=H_KV, NQ=NQ, NK=NK, HEAD_DIM=d, HEAD_DIM_V=dv,
                     scale=float(self.module.score_scale(d)), KeyStarts=key_starts)
        blocks = dict(BLOCK_M=tiles[0], BLOCK_N=tiles[1],
                      BLOCK_D=max(16, _next_power_of_2(d)), BLOCK_DV=max(16, _next_power_of_2(dv)),
                      DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32")
        return flat_params, lengths, starts, sizes, blocks

    # --- ahead of time ---------------------------------------------------------------
    def compile_ahead(self, target, dtype=torch.bfloat16, head_dim=64, is_causal=False,
                      has_key_lengths=False, names=None, schedule=None):
        """{kernel name: triton.compile's result} for `target` (a triton GPUTarget, e.g.
        GPUTarget("cuda", 90, 32)), storage `dtype` and `head_dim`, with `schedule` (the
        module's SCHEDULES entry for the target's chip by default); no GPU needed. `names`:
        by default every kernel the launchers run (launched_kernels)."""
        if names is None:
            names = launched_kernels(self.module)
        from triton.compiler import ASTSource
        from triton import compile as triton_compile

        if schedule is None:
            schedule = select_schedule(self.module.SCHEDULES, self.module.DEFAULT_SCHEDULE,
                                       f"sm_{target.arch}", _TRITON_TYPES[dtype].replace("fp", "f"),
                                       head_dim)
        block_d = max(16, _next_power_of_2(head_dim))
        constants = dict(IS_CAUSAL=is_causal, HAS_KEY_LENGTHS=has_key_lengths,
                         DOT_PRECISION="ieee" if dtype == torch.float32 else "tf32",
                         BLOCK_D=block_d, BLOCK_DV=block_d)
        table_pointers = {}
        for _, arg, element, _, _ in self.inputs:
            table_pointers[arg] = "*" + element
            table_pointers["d" + arg] = "*fp32"
        compiled = {}
        for name in names:
            fn = getattr(self.module, name)
            block_m, block_n, num_warps, num_stages = schedule[schedule_entry(name)]
            tiles = dict(constants, BLOCK_M=block_m, BLOCK_N=block_n)
            signature, constexprs = {}, {}
            for arg in fn.arg_names:
                if arg in tiles:
                    signature[arg], constexprs[arg] = "constexpr", tiles[arg]
                elif arg in _STORED:
                    signature[arg] = "*" + _TRITON_TYPES[dtype]
                elif arg in _POINTER_TYPES:
                    signature[arg] = _POINTER_TYPES[arg]
                elif arg in table_pointers:
                    signature[arg] = table_pointers[arg]
                else:  # sizes are int32
                    signature[arg] = "fp32" if arg == "scale" else "i32"
            source = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
            compiled[name] = triton_compile(source, target=target, options=dict(
                num_warps=num_warps, num_stages=num_stages))
        return compiled

    # --- launches -----------------------------------------------------------------
    def key_split(self, q, k):
        """decode_split for this call: (key chunks, keys per chunk) of the decode forward,
        or None for attn_fwd."""
        schedule = self.schedule(q.device, q.dtype, q.shape[3])
        sm_count = (torch.cuda.get_device_properties(q.device).multi_processor_count
                    if q.device.type == "cuda" else None)
        B, H, NQ, _ = q.shape
        H_KV, NK = k.shape[1], k.shape[2]
        if self.module.DECODE["max_rows"] == 0:  # a module without a decode forward
            return None
        return decode_split(NQ, NK, H // H_KV, B * H_KV, schedule["forward"][0],
                            schedule["decode"][1], schedule["decode"][0], sm_count,
                            self.module.DECODE, self.key_splits)

    def forward(self, q, k, v, params, is_causal=False, key_lengths=None, tables=(),
                positions=None):
        """O [B, H, Nq, dv], row_max and row_sum [B, H, Nq] (float32); positions: (query
        starts [B], key starts [B]), default 0."""
        m = self.module
        B, H, NQ, _ = q.shape
        out = torch.empty(B, H, NQ, v.shape[3], dtype=q.dtype, device=q.device)
        row_max = torch.empty(B, H, NQ, dtype=torch.float32, device=q.device)
        row_sum = torch.empty_like(row_max)
        table_args = self._table_arguments(tables, q.device)
        split = self.key_split(q, k) if out.numel() and k.shape[2] else None
        if split:
            self._forward_split(q, k, v, params, is_causal, key_lengths, table_args, positions,
                                split, out, row_max, row_sum)
            return out, row_max, row_sum
        block_m, block_n, num_warps, num_stages = self.schedule(q.device, q.dtype,
                                                                q.shape[3])["forward"]
        flat_params, lengths, starts, sizes, blocks = self._launch_arguments(
            q, k, v, params, key_lengths, (block_m, block_n), positions)
        if out.numel():
            m.attn_fwd[(-(-NQ // block_m), B * H)](
                q, k, v, out, row_max, row_sum, flat_params, lengths, starts,
                *q.stride(), *k.stride(), *v.stride(), *out.stride(), **table_args, **sizes,
                IS_CAUSAL=is_causal, HAS_KEY_LENGTHS=key_lengths is not None, **blocks,
                num_warps=num_warps, num_stages=num_stages)
        return out, row_max, row_sum

    def _forward_split(self, q, k, v, params, is_causal, key_lengths, table_args, positions,
                       split, out, row_max, row_sum):
        """The decode forward: attn_fwd_split over (row tiles of the GQA group, B * H_kv,
        key chunks) into float32 partial states, then attn_fwd_merge into out, row_max
        and row_sum."""
        m = self.module
        block_m, block_n, num_warps, num_stages = self.schedule(q.device, q.dtype,
                                                                q.shape[3])["decode"]
        flat_params, lengths, starts, sizes, blocks = self._launch_arguments(
            q, k, v, params, key_lengths, (block_m, block_n), positions)
        chunks, keys_per_chunk = split
        B, H, NQ, _ = q.shape
        H_KV, dv = k.shape[1], v.shape[3]
        f32 = dict(dtype=torch.float32, device=q.device)
        part_acc = torch.empty(chunks, B * H, NQ, dv, **f32)
        part_max, part_sum, part_count = (torch.empty(chunks, B * H, NQ, **f32)
                                          for _ in range(3))
        partials = (part_acc, part_max, part_sum, part_count)
        launch = dict(num_warps=num_warps, num_stages=num_stages)
        m.attn_fwd_split[(_cdiv(H // H_KV * NQ, block_m), B * H_KV, chunks)](
            q, k, v, *partials, flat_params, lengths, starts,
            *q.stride(), *k.stride(), *v.stride(), **table_args, **sizes,
            KEYS_PER_SPLIT=keys_per_chunk, IS_CAUSAL=is_causal,
            HAS_KEY_LENGTHS=key_lengths is not None, **blocks, **launch)
        m.attn_fwd_merge[(_cdiv(NQ, block_m), B * H)](
            out, row_max, row_sum, *partials, flat_params, starts, *out.stride(),
            **table_args, H=H, NQ=NQ, HEAD_DIM_V=dv, SPLITS=chunks, BLOCK_M=block_m,
            BLOCK_DV=blocks["BLOCK_DV"], **launch)

    def backward(self, q, k, v, out, dout, row_max, row_sum, params, is_causal=False,
                 key_lengths=None, tables=(), positions=None):
        """dq, dk, dv (the dtypes of q, k, v), dparams (float32) and the learnable tables'
        gradients (float32, None for the others)."""
        m = self.module
        block_m, block_n, num_warps, num_stages = self.schedule(q.device, q.dtype,
                                                                q.shape[3])["backward"]
        flat_params, lengths, starts, sizes, blocks = self._launch_arguments(
            q, k, v, params, key_lengths, (block_m, block_n), positions)
        table_args = self._table_arguments(tables, q.device)
        B, H, NQ, _ = q.shape
        H_KV, NK = k.shape[1], k.shape[2]
        P = self.param_count
        row_blocks, key_blocks = -(-NQ // block_m), -(-NK // block_n)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        delta = torch.empty(B, H, NQ, dtype=torch.float32, device=q.device)
        # One slot per program and param: summed below in a fixed order.
        row_slots = torch.zeros(B * H, row_blocks, max(P, 1), dtype=torch.float32, device=q.device)
        key_slots = torch.zeros(B * H_KV, key_blocks, max(P, 1), dtype=torch.float32,
                                device=q.device)
        # Each learnable table's gradient: one slot of its size per program, likewise.
        table_slots = {}
        for (_, arg, _, _, learnable), t in zip(self.inputs, tables):
            if learnable:
                table_slots["d" + arg] = (
                    torch.zeros(B * H * row_blocks, t.numel(), dtype=torch.float32,
                                device=q.device),
                    torch.zeros(B * H_KV * key_blocks, t.numel(), dtype=torch.float32,
                                device=q.device))
        row_table_slots = {name: slots[0] for name, slots in table_slots.items()}
        key_table_slots = {name: slots[1] for name, slots in table_slots.items()}
        launch = dict(num_warps=num_warps, num_stages=num_stages)
        flags = dict(IS_CAUSAL=is_causal, HAS_KEY_LENGTHS=key_lengths is not None)
        plan = backward_plan(m)
        rows_first = plan["rows_first"]
        tile_states = tuple(torch.zeros(B * H, key_blocks, NQ, dtype=torch.float32,
                                        device=q.device) for _ in plan["tile_states"])
        if NQ and NK and B and H and not rows_first:  # attn_bwd_dq computes D itself
            m.attn_bwd_preprocess[(row_blocks, B * H)](
                out, dout, delta, row_max, row_sum, flat_params, row_slots, starts,
                *out.stride(), *dout.stride(), **table_args, **row_table_slots, H=H, NQ=NQ,
                HEAD_DIM_V=v.shape[3],
                BLOCK_M=block_m, BLOCK_DV=blocks["BLOCK_DV"], **launch)
        if NQ and NK and B and H:
            def keys_pass():
                m.attn_bwd_dkdv[(key_blocks, B * H_KV)](
                    q, k, v, dout, dk, dv, row_max, row_sum, delta, flat_params, lengths,
                    starts, key_slots, *tile_states,
                    *q.stride(), *k.stride(), *v.stride(), *dout.stride(), *dk.stride(),
                    *dv.stride(), **table_args, **key_table_slots, **sizes, **flags, **blocks,
                    **launch)

            if not rows_first:
                keys_pass()
            # With learnable weights the dQ kernel also writes its share of dW into the row
            # slots.
            weight_slots = (row_slots,) if self.weights else ()
            m.attn_bwd_dq[(row_blocks, B * H)](
                q, k, v, dout, dq, row_max, row_sum, delta, flat_params, lengths, starts,
                *weight_slots, *tile_states,
                *q.stride(), *k.stride(), *v.stride(), *dout.stride(), *dq.stride(),
                **table_args, **sizes, **flags, **blocks, **launch)
            if rows_first:
                keys_pass()
        dparams = (row_slots.double().sum(dim=(0, 1)) + key_slots.double().sum(dim=(0, 1)))[:P]
        dtables = []
        for (_, arg, _, _, learnable), t in zip(self.inputs, tables):
            if not learnable:
                dtables.append(None)
                continue
            rows, keys = table_slots["d" + arg]
            total = rows.double().sum(dim=0) + keys.double().sum(dim=0)
            dtables.append(total.view(t.shape).to(torch.float32))
        return dq, dk, dv, dparams.to(torch.float32), dtables


def backward_plan(module):
    """How an emitted module's backward runs, as its BACKWARD_PLAN says (the launch
    description's "backward", which the C++ runtime follows as this launcher does):
    rows_first, attn_bwd_dq before attn_bwd_dkdv and no attn_bwd_preprocess, where
    attn_bwd_dq finds each row's D (delta) itself (a scan's rows carry S and B from their
    last key to their first, an implicit normalizer's finds r_i first); tile_states, the
    parameters of attn_bwd_dq and attn_bwd_dkdv that take a float32 [B * H, key tiles, NQ]
    buffer of zeros each (key tiles: cdiv(NK, BLOCK_N) of the backward), in their order."""
    plan = module.BACKWARD_PLAN
    return {"rows_first": bool(plan["rows_first"]), "tile_states": list(plan["tile_states"])}


def launched_kernels(module):
    """The kernels of KERNEL_NAMES the launchers run for an emitted module: those it has
    (the emitter prints the decode forward only where DECODE has rows, attn_bwd_preprocess
    only where BACKWARD_PLAN is not rows first)."""
    return tuple(name for name in KERNEL_NAMES if hasattr(module, name))


def schedule_entry(name):
    """The schedule entry (SCHEDULES' forward, backward or decode) a kernel runs with."""
    if name == FORWARD:
        return "forward"
    return "decode" if name in (FORWARD_SPLIT, FORWARD_MERGE) else "backward"


class _TritonAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, kernel, q, k, v, params, is_causal, key_lengths, positions, *tables):
        out, row_max, row_sum = kernel.forward(q, k, v, params, is_causal, key_lengths, tables,
                                               positions)
        ctx.kernel, ctx.is_causal, ctx.key_lengths = kernel, is_causal, key_lengths
        ctx.positions = positions
        ctx.save_for_backward(q, k, v, params, out, row_max, row_sum, *tables)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, params, out, row_max, row_sum, *tables = ctx.saved_tensors
        dq, dk, dv, dparams, dtables = ctx.kernel.backward(
            q, k, v, out, dout, row_max, row_sum, params, ctx.is_causal, ctx.key_lengths, tables,
            ctx.positions)
        # Params and tables may live on another device than q (the kernels read copies).
        dtables = [None if d is None else d.to(device=t.device, dtype=t.dtype)
                   for d, t in zip(dtables, tables)]
        return (None, dq, dk, dv, dparams.to(device=params.device, dtype=params.dtype), None,
                None, None, *dtables)
