"""What bench/bench.py times: the workloads (our example kernels) and the peers that
compute the same thing, each checked against our kernel before it is timed.

    workload        our kernel (IR)                         peers
    softmax         examples/normalizers/softmax.mlir       SDPA (CPU flash), FlexAttention,
                                                            IREE, eager
    tanhmax, multimax, expressive, sigmoid
                    examples/normalizers/<name>.mlir        torch.compile'd composition, eager
                                                            and the compositions' GEMMs
                                                            alone (a floor, not compared)
    alibi           examples/families/alibi.mlir            FlexAttention (score_mod, causal block mask)
    softcap         examples/families/softcap.mlir          FlexAttention (score_mod)
    sliding_window  examples/families/sliding_window.mlir   FlexAttention (BlockMask),
                    with the window widened to WINDOW

A peer is bound to one workload, input set and pass ("fwd": forward without autograd,
"fwd+bwd": forward and the backward of sum(O·dO) into q, k, v and the params); the bound
runner returns the tensors it computed (O, dq, dk, dv, dparams), which `compare` checks
against our kernel's. A peer that cannot run a config raises Unsupported with the reason.
test/python/test_bench_peers.py runs the same checks on tiny shapes.
"""

import contextlib
import functools
import hashlib
import importlib.metadata
import math
import os
import sysconfig
import time

import torch

import eager

B, H = 2, 4
WINDOW = 256  # sliding-window width timed (DESIGN.md section 7: "sliding window 256")
# max|err| / max|ref| a peer may differ from our f32 kernel by, by the peer's dtype
TOLERANCE = {torch.float32: 2e-4, torch.bfloat16: 3e-2}


DTYPE_TAG = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float64: "f64"}


class Unsupported(Exception):
    """The peer cannot run this config; str(e) says why (it goes into the table)."""


# ----------------------------------------------------------------------------- workloads

def _causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _window_mask(width, causal):
    def mask(b, h, q_idx, kv_idx):
        near = (q_idx - kv_idx).abs() <= width
        return near & (q_idx >= kv_idx) if causal else near
    return mask


def _alibi_mod(slope):
    # examples/families/alibi.mlir: s - slope·|i - j|, one slope for every head
    return lambda score, b, h, q_idx, kv_idx: score - slope * (q_idx - kv_idx).abs()


def _softcap_mod(cap):
    # examples/families/softcap.mlir: cap·tanh(s / cap)
    return lambda score, b, h, q_idx, kv_idx: cap * torch.tanh(score / cap)


def _widen_window(text):
    old = "%width = arith.constant 3 : index"
    if text.count(old) != 1:
        raise RuntimeError(f"sliding_window.mlir: expected one `{old}` to widen")
    return text.replace(old, f"%width = arith.constant {WINDOW} : index")


class Workload:
    """One of our kernels and what the peers need to compute the same thing.
    flex(params, causal) -> (score_mod, mask_mod) for FlexAttention, or None."""

    def __init__(self, name, source, params=(), causal_modes=(False, True), composition=None,
                 flex=None, edit_ir=None, note=""):
        self.name, self.source, self.params = name, source, list(params)
        self.causal_modes, self.composition, self.flex = causal_modes, composition, flex
        self.edit_ir, self.note = edit_ir, note

    def ir_text(self):
        with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                               self.source), encoding="utf-8") as f:
            text = f.read()
        return self.edit_ir(text) if self.edit_ir else text


WORKLOADS = {w.name: w for w in [
    Workload("softmax", "examples/normalizers/softmax.mlir", composition="softmax",
             flex=lambda p, causal: (None, _causal_mask if causal else None)),
    Workload("tanhmax", "examples/normalizers/tanhmax.mlir", composition="tanhmax"),
    # non-trivial temperatures: MultiMax's initial values (tb = td = 1) make it plain softmax
    Workload("multimax", "examples/normalizers/multimax.mlir", composition="multimax",
             params=[0.8, 1.2, -1.0, 1.0, 0.9, 1.1, -2.0, 2.0]),
    Workload("expressive", "examples/normalizers/expressive.mlir", composition="expressive"),
    Workload("sigmoid", "examples/normalizers/sigmoid.mlir", composition="sigmoid", params=[-4.0]),
    Workload("alibi", "examples/families/alibi.mlir", params=[0.25], causal_modes=(True,),
             flex=lambda p, causal: (_alibi_mod(p[0]), _causal_mask),
             note="causal only: the IR's attn.mask is causal"),
    # a cap of 5 binds on these N(0, 1) scores (the example's default, Gemma 2's 50, would not)
    Workload("softcap", "examples/families/softcap.mlir", params=[5.0],
             flex=lambda p, causal: (_softcap_mod(p[0]), _causal_mask if causal else None)),
    Workload("sliding_window", "examples/families/sliding_window.mlir", edit_ir=_widen_window,
             flex=lambda p, causal: (None, _window_mask(WINDOW, causal)),
             note=f"window |i - j| <= {WINDOW} (the example's 3, widened by the bench)"),
]}
# custom normalizers whose torch.compile'd composition is a peer (DESIGN.md section 7)
COMPILED = ("tanhmax", "multimax", "expressive", "sigmoid")


# ----------------------------------------------------------------------------- inputs

class Inputs:
    """q, k, v, dO [B, H, N, d] (f32, fixed seed), the workload's params and the causal flag;
    as_dtype gives (cached) copies in a peer's dtype."""

    def __init__(self, workload, n, d, causal, seed=0, b=B, h=H):
        g = torch.Generator().manual_seed(seed)
        self.q, self.k, self.v, self.do = (torch.randn(b, h, n, d, generator=g) for _ in range(4))
        self.params = torch.tensor(workload.params, dtype=torch.float32)
        self.workload, self.n, self.d, self.causal = workload, n, d, causal
        self._cast = {}

    def as_dtype(self, dtype):
        if dtype not in self._cast:
            self._cast[dtype] = tuple(t.to(dtype) for t in (self.q, self.k, self.v, self.do,
                                                            self.params))
        return self._cast[dtype]


def compare(got, ref, tol):
    """max|got - ref| / max|ref| for every tensor both computed; ok when all are finite
    and within tol."""
    errs, ok = {}, True
    for key, r in ref.items():
        if key not in got or r is None or not r.numel():
            continue
        a = got[key].detach().double()
        finite = bool(torch.isfinite(a).all())
        err = (a - r.detach().double()).abs().max().item() / max(r.abs().max().item(), 1e-6)
        errs[key] = float(f"{err:.3e}") if finite else float("inf")
        ok = ok and finite and err <= tol
    return {"ok": ok and bool(errs), "rel_err": errs, "tol": tol}


# ----------------------------------------------------------------------------- peers

class Peer:
    """attention(q, k, v, params, causal) -> O with autograd; forward(...) the same without.
    bind() returns the runner of one config and its setup time (outside the timing)."""

    name, dtype, family = "", torch.float32, ""
    verifiable = True  # its output is checked against ours before it is timed

    def applies(self, workload):
        return True

    def forward(self, q, k, v, p, causal):
        with torch.no_grad():
            return self.attention(q, k, v, p, causal)

    def attention(self, q, k, v, p, causal):
        raise NotImplementedError

    def setup(self, x):
        """Per-config work kept out of the timing (block masks, IREE compilation)."""

    def bind(self, x, pss):
        t = time.perf_counter()
        self.setup(x)
        setup_s = time.perf_counter() - t
        q, k, v, do, p = x.as_dtype(self.dtype)
        if pss == "fwd":
            return (lambda: {"O": self.forward(q, k, v, p, x.causal)}), setup_s
        leaves = [t.clone().requires_grad_() for t in (q, k, v, p)]
        names = ("dq", "dk", "dv", "dparams")

        def run():
            for t in leaves:
                t.grad = None
            o = self.attention(*leaves, x.causal)
            o.backward(do)
            out = {"O": o.detach()}
            out.update((n, t.grad) for n, t in zip(names, leaves) if t.grad is not None)
            return out
        return run, setup_s


class Ours(Peer):
    """Our artifact through the attn package: attn.Kernel (autograd) and its
    forward_with_stats (forward only, no autograd)."""

    family = "ours"

    def __init__(self, kernel, name="ours"):
        self.kernel, self.name = kernel, name

    def forward(self, q, k, v, p, causal):
        return self.kernel.forward_with_stats(q, k, v, p, causal)[0]

    def attention(self, q, k, v, p, causal):
        return self.kernel(q, k, v, p, causal)


class Eager(Peer):
    """bench/eager.py's composition (full N×N scores), or torch.compile of it."""

    def __init__(self, compiled=False, dtype=torch.float32):
        self.compiled, self.dtype = compiled, dtype
        self.family = self.name = "compiled" if compiled else "eager"
        if dtype != torch.float32:
            self.name += "-" + DTYPE_TAG[dtype]
        self._fns = {}

    def applies(self, workload):
        names = COMPILED if self.compiled else eager.EAGER
        return workload.composition in names

    def setup(self, x):
        self.fn = self._fns.get(x.workload.composition)
        if self.fn is None:
            self.fn = eager.EAGER[x.workload.composition]
            if self.compiled:
                self.fn = torch.compile(self.fn, dynamic=False)
            self._fns[x.workload.composition] = self.fn

    def attention(self, q, k, v, p, causal):
        return self.fn(q, k, v, p, causal)


class GemmFloor(Peer):
    """Not attention: the matrix products every composition above runs, alone, at MKL's
    rate: (q·kᵀ)·v forward, and autograd's four products (dO·vᵀ, Sᵀ·dO, dS·k, dSᵀ·q)
    backward, in full also in causal rows, as the compositions compute them. Its time is
    what a composition that materialises the scores costs before any elementwise work,
    so (its time) ÷ (ours) is a lower bound on how much faster ours is than any such
    composition, however well fused. Not compared with ours."""

    family = name = "gemms"
    verifiable = False

    def applies(self, workload):
        return workload.name in COMPILED

    def attention(self, q, k, v, p, causal):
        return (q @ k.transpose(-2, -1)) @ v


class Sdpa(Peer):
    """torch.nn.functional.scaled_dot_product_attention restricted to the CPU flash
    backend; `backend` holds the aten kernels the last traced call dispatched to."""

    family = "sdpa"

    def __init__(self, dtype=torch.float32):
        self.dtype = dtype
        self.name = "sdpa" if dtype == torch.float32 else f"sdpa-{DTYPE_TAG[dtype]}"
        self.backend = []

    def applies(self, workload):
        return workload.name == "softmax"

    def attention(self, q, k, v, p, causal):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def bind(self, x, pss):
        """The first call (the warm-up) records the aten attention kernels it dispatched
        to in `backend`: the proof of which backend ran."""
        from torch.utils._python_dispatch import TorchDispatchMode

        run, setup_s = super().bind(x, pss)
        seen = set()

        class Record(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                seen.add(func.overloadpacket.__name__)
                return func(*args, **(kwargs or {}))

        def first_then_run():
            nonlocal call
            with Record():
                out = run()
            self.backend = sorted(n for n in seen if "attention" in n)
            call = run
            return out

        call = first_then_run
        return (lambda: call()), setup_s


class Flex(Peer):
    """FlexAttention with the workload's score_mod and a BlockMask built from its mask_mod
    (outside the timing); torch.compile'd (inductor's CPU flex template) unless
    compiled=False (the unfused reference path: same math, used by the tests)."""

    family = "flex"

    def __init__(self, dtype=torch.float32, compiled=True):
        from torch.nn.attention.flex_attention import flex_attention
        self.dtype = dtype
        self.name = "flex" if dtype == torch.float32 else f"flex-{DTYPE_TAG[dtype]}"
        self.fn = torch.compile(flex_attention, dynamic=False) if compiled else flex_attention

    def applies(self, workload):
        return workload.flex is not None

    def setup(self, x):
        from torch.nn.attention.flex_attention import create_block_mask
        self.score_mod, mask_mod = x.workload.flex(x.workload.params, x.causal)
        self.block_mask = None if mask_mod is None else create_block_mask(
            mask_mod, None, None, x.n, x.n, device="cpu")

    def bind(self, x, pss):
        if pss != "fwd":
            raise Unsupported("FlexAttention has no CPU backward")
        return super().bind(x, pss)

    def attention(self, q, k, v, p, causal):
        return self.fn(q, k, v, score_mod=self.score_mod, block_mask=self.block_mask)


@functools.lru_cache(maxsize=None)
def host_has_avx512():
    """Whether this machine's CPU flags list avx512f."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and "avx512f" in line.split() for line in f)
    except OSError:
        return False


def iree_tiles(d):
    """(query rows, keys) per vector tile for IREE's CPU attention: the whole head dim,
    and the most rows 3.13 accepts for the host (it refuses vectors of 512 native
    vectors: 32 KiB with AVX-512, 16 KiB with AVX2, so rows·keys·d < 8192 or 4096)."""
    return max(1, (4096 if host_has_avx512() else 2048) // (8 * d)), 8


def iree_attention_mlir(bh, n, d, causal, tiles=None):
    """Softmax attention forward for IREE: one iree_linalg_ext.attention over [B·H, N, d]
    f32, scale 1/sqrt(d). Causal through an i1 mask operand built in the function (IREE
    3.13's llvm-cpu path rejects iree_linalg_ext.index in the attention region). tiles =
    (rows, keys) sets the op's CPU lowering config; None keeps IREE's own, which tiles the
    head dim of the output by 16 and takes one query row at a time (15-20x slower here)."""
    t, m = f"tensor<{bh}x{n}x{d}xf32>", f"tensor<{n}x{n}xi1>"
    maps = ["(b, m, k1)", "(b, k2, k1)", "(b, k2, n)", "()"] + ["(m, k2)"] * causal + ["(b, m, n)"]
    maps = ",\n      ".join(f"affine_map<(b, m, n, k1, k2) -> {x}>" for x in maps)
    operands, types, mask = "%q, %k, %v, %scale", f"{t}, {t}, {t}, f32", ""
    if causal:
        operands, types = operands + ", %mask", types + ", " + m
        mask = f"""
  %mask_init = tensor.empty() : {m}
  %mask = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>],
                          iterator_types = ["parallel", "parallel"]}} outs(%mask_init : {m}) {{
  ^bb0(%unused: i1):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %keep = arith.cmpi ule, %j, %i : index
    linalg.yield %keep : i1
  }} -> {m}"""
    config = ""
    if tiles:
        config = f""" {{compilation_info = #iree_codegen.compilation_info<
        lowering_config = #iree_cpu.lowering_config<distribution = [1, 64, {d}, 0, 0],
          vector_common_parallel = [1, {tiles[0]}, {d}, 0, 0], vector_reduction = [0, 0, 0, 0, {tiles[1]}]>,
        translation_info = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<LinalgExtTileAndVectorize>>>}}"""
    return f"""func.func @attention(%q: {t}, %k: {t}, %v: {t}) -> {t} {{
  %scale = arith.constant {1.0 / math.sqrt(d):.9e} : f32{mask}
  %init = tensor.empty() : {t}
  %o = iree_linalg_ext.attention <{{indexing_maps = [
      {maps}]}}>{config}
      ins({operands} : {types}) outs(%init : {t}) {{
  ^bb0(%s: f32):
    iree_linalg_ext.yield %s : f32
  }} -> {t}
  return %o : {t}
}}
"""


class Iree(Peer):
    """IREE (iree-base-compiler, iree-base-runtime): iree_attention_mlir compiled for
    llvm-cpu (--iree-llvmcpu-target-cpu=host, cached by content in cache_dir) and run on
    the local-task driver with `threads` workers; inputs uploaded outside the timing.
    tuned: the bench's tile sizes (iree_tiles), else IREE's own ("iree-default")."""

    FLAGS = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
             "--iree-llvmcpu-target-cpu=host"]

    def __init__(self, threads, cache_dir, tuned=True):
        import iree.runtime as rt
        self.tuned = tuned
        self.name = self.family = "iree" if tuned else "iree-default"
        rt.flags.parse_flags(f"--task_topology_max_group_count={threads}")
        self.rt, self.config, self.cache_dir = rt, rt.Config("local-task"), cache_dir
        self.version = importlib.metadata.version("iree-base-compiler")
        self.compile_s = None

    def applies(self, workload):
        return workload.name == "softmax"

    def module(self, bh, n, d, causal):
        """(vmfb path, compile seconds or None when cached)."""
        text = iree_attention_mlir(bh, n, d, causal, iree_tiles(d) if self.tuned else None)
        key = hashlib.sha256("\0".join([text, *self.FLAGS, self.version]).encode()).hexdigest()[:24]
        path = os.path.join(self.cache_dir, f"{self.name}-{bh}x{n}x{d}{'-causal' if causal else ''}-{key}.vmfb")
        if os.path.exists(path):
            return path, None
        from iree.compiler.tools import compile_str
        os.makedirs(self.cache_dir, exist_ok=True)
        t = time.perf_counter()
        vmfb = compile_str(text, extra_args=self.FLAGS)
        seconds = time.perf_counter() - t
        with open(path + ".tmp", "wb") as f:
            f.write(vmfb)
        os.replace(path + ".tmp", path)
        return path, seconds

    def bind(self, x, pss):
        if pss != "fwd":
            raise Unsupported("IREE has no attention backward")
        b, h, n, d = x.q.shape
        path, self.compile_s = self.module(b * h, n, d, x.causal)
        t = time.perf_counter()
        ctx = self.rt.SystemContext(config=self.config)
        with open(path, "rb") as f:
            ctx.add_vm_module(self.rt.VmModule.copy_buffer(self.config.vm_instance, f.read()))
        fn = ctx.modules.module["attention"]
        args = [self.rt.asdevicearray(self.config.device, t.reshape(b * h, n, d).numpy())
                for t in (x.q, x.k, x.v)]
        setup_s = time.perf_counter() - t

        def run():  # to_host: the result is complete and in host memory, like a torch tensor
            return {"O": torch.from_numpy(fn(*args).to_host()).reshape(b, h, n, d)}
        return run, setup_s


# ----------------------------------------------------------------------------- environment

def prepare_torch_compile():
    """Make torch.compile's CPU path usable for the peers; returns the vector ISA inductor
    picks. Three settings:
    - inductor links its CPU kernels with Python's LIBDIR ahead of the wheel's torch/lib.
      Where a system LibTorch sits in that LIBDIR (Debian's libtorch-dev here), the
      linker takes it, Sleef's symbols stay undefined, inductor's vector-ISA probe fails
      and every compiled CPU kernel comes out scalar (FlexAttention's fails outright):
      torch/lib goes first;
    - one compiled function (flex_attention, each composition) meets many shapes, masks
      and grad modes: the recompile limit (8) is raised;
    - score-mod constants (ALiBi's slope, the cap) stay Python constants: traced as
      symbolic floats, FlexAttention's CPU path rejects them."""
    import torch._dynamo.config as dynamo_config
    from torch._inductor import cpp_builder, cpu_vec_isa
    from torch.utils.cpp_extension import TORCH_LIB_PATH

    libdir = sysconfig.get_config_var("LIBDIR") or ""
    if os.path.exists(os.path.join(libdir, "libtorch_cpu.so")) and \
            not getattr(cpp_builder, "_attn_bench_patched", False):
        python_args = cpp_builder._get_python_related_args

        def torch_lib_first():
            include_dirs, lib_dirs = python_args()
            return include_dirs, [TORCH_LIB_PATH] + lib_dirs
        cpp_builder._get_python_related_args = torch_lib_first
        cpp_builder._attn_bench_patched = True
    dynamo_config.recompile_limit = dynamo_config.accumulated_recompile_limit = 4096
    dynamo_config.specialize_float = True
    return str(cpu_vec_isa.pick_vec_isa())


@contextlib.contextmanager
def compiler_override(path):
    """attn.compile with another attn-compile binary (the before/after baseline)."""
    old = os.environ.get("ATTN_COMPILE")
    os.environ["ATTN_COMPILE"] = os.path.abspath(path)
    try:
        yield
    finally:
        if old is None:
            del os.environ["ATTN_COMPILE"]
        else:
            os.environ["ATTN_COMPILE"] = old


def compile_ours(workload, compiler=None):
    """attn.compile of the workload's IR (f32 only; cached by content in $ATTN_CACHE_DIR);
    returns (attn.Kernel, seconds)."""
    import attn
    t = time.perf_counter()
    with compiler_override(compiler) if compiler else contextlib.nullcontext():
        kernel = attn.compile(workload.ir_text(), dtypes=("f32",))
    return kernel, time.perf_counter() - t
