"""attn: call attention kernels compiled by ``attn-compile`` from PyTorch.

    import attn
    k = attn.load("tanhmax.so")            # validates the artifact (ABI, manifest, entry points)
    params = k.initial_params().requires_grad_()
    out = k(q, k_, v, params, is_causal=True)   # q [B,H,Nq,d], k [B,H,Nk,d], v [B,H,Nk,dv]
    out.sum().backward()                   # gradients for q, k, v and params
    out = attn.attention(q, k_, v, k, is_causal=True)   # like F.scaled_dot_product_attention

Kernels can also be written in Python (attn.frontend, docs/TUTORIAL.md):

    from attn import exp
    tanhmax = attn.normalizer(numerator=lambda s: exp(s) - exp(-s),
                              denominator=lambda s: exp(s) + exp(-s), name="tanhmax")
    kernel = attn.compile(attn.kernel(tanhmax, mask=lambda i, j: j <= i))

A thin layer over the ops that ``libattn_runtime.so`` registers (``torch.ops.attn.*``, with
fake implementations in attn.ops for torch.compile and torch.export).
CUDA tensors run the artifact's GPU kernels (compile with ``attn.compile(ir,
cuda_targets="auto")``, which builds the GPU code of a dtype and head dim on first use, or
``attn-compile --cuda-targets=sm_80,...``).
Where the runtime library and attn-compile are found: see attn.paths.
"""

import math
import operator
import os
import threading
from collections import OrderedDict

import torch

from .decoding import KVCache, key_start_arguments, query_start_tensor
from .paths import runtime_library_path
from .manifest import ManifestError, param_inits, parse_manifest, tensor_inputs

__all__ = ["load", "compile", "opt", "kernel_of", "Kernel", "Attention", "MultiheadAttention",
           "attention", "alibi_slopes", "runtime_library_path", "parse_manifest", "ManifestError",
           "training", "min_thread_work_ns", "set_min_thread_work_ns",
           "KVCache"]

_lock = threading.Lock()
_loaded_from = None


def _ops_registered():
    try:
        torch.ops.attn.manifest  # noqa: B018 (raises when the op is not registered)
        return True
    except (AttributeError, RuntimeError):
        return False


def _load_library():
    """Load libattn_runtime.so once (it registers torch.ops.attn.*), unless it is loaded,
    and register the package's resolver of portable artifact references with it (exported
    programs name their artifacts so: attn.compiler.artifact_reference)."""
    global _loaded_from
    if _loaded_from is not None:
        return
    with _lock:
        if _loaded_from is not None:
            return
        from .compiler import register_artifact_resolver

        path = runtime_library_path()
        if _ops_registered():  # loaded by someone else (e.g. torch.ops.load_library)
            register_artifact_resolver(path)
            _loaded_from = "<already registered>"
            return
        torch.ops.load_library(path)
        register_artifact_resolver(path)
        _loaded_from = path


def _ensure_runtime():
    """torch.ops.attn.* and their fake implementations (attn.ops)."""
    _load_library()
    from . import ops  # noqa: F401  (registers the fakes on first import)


# The dtypes of the GPU kernels, as the manifest and attn-compile --cuda-dtypes name them.
_CUDA_DTYPE_TAGS = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}



class Kernel:
    """A loaded attn artifact. Call it like an attention op; autograd works.

    `lazy_cuda` (attn.compile with cuda_targets; an attn.compiler.LazyCuda): CUDA calls
    run the artifact of their dtype and head dim, built on first use and kept here.
    `reference` (attn.compile sets it; attn.compiler.artifact_reference): what a
    torch.export of a call records instead of the path, so that the exported program
    loads on another machine; None (attn.load of a .so): the path is recorded, and the
    program needs that file at that path."""

    def __init__(self, path, lazy_cuda=None, reference=None):
        _ensure_runtime()
        path = os.fspath(path)
        # abspath("") is the working directory: the runtime names the empty path instead.
        self.path = os.path.abspath(path) if path else path
        # Loads and validates the artifact in the runtime (raises RuntimeError).
        self.manifest_text = torch.ops.attn.manifest(self.path)
        self.manifest = parse_manifest(self.manifest_text)
        self.param_names = [p["name"] for p in self.manifest["params"]]
        # the kernel's tensor inputs (attn.input), in argument order, passed as inputs=
        self.inputs = tensor_inputs(self.manifest)
        self.input_names = [i["name"] for i in self.inputs]
        # name -> shape: () for a scalar param, e.g. (64, 64) for a weight W[64x64]
        self.param_shapes = OrderedDict(
            (p["name"], tuple(p["shape"])) for p in self.manifest["params"])
        self.lazy_cuda = lazy_cuda
        self.reference = reference
        self._cuda_kernels = {}  # (dtype tag, head dim) -> Kernel, with lazy_cuda

    @property
    def name(self):
        return self.manifest.get("kernel", "")

    @property
    def cuda_targets(self):
        """The GPU targets compiled in, or with lazy GPU code to be compiled for (e.g.
        ['sm_80', 'sm_90']); empty: CPU only."""
        if self.lazy_cuda is not None:
            return list(self.lazy_cuda.targets)
        return list(self.manifest.get("cuda", {}).get("targets", []))

    def cuda_head_dims(self, dtype=torch.bfloat16):
        """Head dims with a GPU forward kernel for a dtype; with lazy GPU code, those built
        so far."""
        tag = _CUDA_DTYPE_TAGS.get(dtype)
        if self.lazy_cuda is not None:
            with _cuda_build_lock:
                return sorted(d for t, d in self._cuda_kernels if t == tag)
        return sorted(k["head_dim"] for k in self.manifest.get("cuda", {}).get("kernels", [])
                      if k["dtype"] == tag)

    def artifact_for(self, q):
        """The artifact a call with query q runs: this kernel's, or with lazy GPU code and
        q on a GPU, the one of q's dtype and head dim (built now if needed); its path, or
        while torch.export traces, its portable reference where it has one."""
        exporting = torch.compiler.is_exporting()
        if self.lazy_cuda is None or q.device.type != "cuda":
            return self.reference if exporting and self.reference else self.path
        # operator.index: under torch.compile a head dim that became dynamic is
        # specialised here (one artifact per head dim) instead of reaching the build.
        return _cuda_artifact(self, q.dtype, operator.index(q.shape[-1]), exporting)

    def initial_params(self, dtype=torch.float32, device=None):
        """[P] tensor of the manifest's initial parameter values (no grad); weights are
        flattened row-major in manifest order (see param_shapes)."""
        parts = [torch.as_tensor(v, dtype=torch.float64).reshape(-1)
                 for v in param_inits(self.manifest).values()]
        flat = torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)
        return flat.to(dtype=dtype, device=device)

    def split_params(self, params):
        """The [P] params vector as name -> tensor of its shape (views of `params`)."""
        out, at = OrderedDict(), 0
        for name, shape in self.param_shapes.items():
            size = math.prod(shape)
            out[name] = params[at:at + size].reshape(shape)
            at += size
        return out

    def query_factor(self, scale, head_dim):
        """The factor q is multiplied by so that this kernel scores with `scale` instead of
        its own scale (SDPA's scale=): exact where the contracted score is c·q·k, i.e. the
        dot and scaled_dot contractions without a feature map (the manifest's contract:
        kind, c or None for 1/sqrt(d), feature). A mod region then sees scale·q·k. Raises
        RuntimeError naming the contract for other kernels."""
        contract = self.manifest["contract"]
        if contract["kind"] not in ("dot", "scaled_dot") or contract["feature"]:
            what = f"contract {contract['kind']}" + (
                " with a feature map" if contract["feature"] else "")
            raise RuntimeError(
                f"attn: scale={scale} needs a score that is a constant times q·k, but kernel "
                f"{self.name} has {what}: write the scale into its attn.score instead")
        own = 1.0 / math.sqrt(head_dim) if contract["scale"] is None else contract["scale"]
        return scale / own

    def _params(self, params, q):
        return self.initial_params(q.dtype, q.device) if params is None else params

    def _inputs(self, inputs):
        """The tensor inputs as the ordered list the ops take, from a dict name -> tensor
        (every input by name) or a sequence in argument order (see input_names)."""
        if inputs is None:
            inputs = {}
        if not isinstance(inputs, dict):
            return list(inputs)
        unknown = [n for n in inputs if n not in self.input_names]
        missing = [n for n in self.input_names if n not in inputs]
        if unknown or missing:
            raise RuntimeError(
                f"attn: kernel {self.name} takes the tensor inputs {self.input_names}"
                + (f"; unknown: {unknown}" if unknown else "")
                + (f"; missing: {missing}" if missing else ""))
        return [inputs[n] for n in self.input_names]

    def __call__(self, q, k, v, params=None, is_causal=False, key_lengths=None, inputs=None,
                 query_start=None, key_start=0):
        """O [B,H,Nq,dv]. params=None uses the initial values (no gradient for them).
        inputs: the kernel's tensor inputs (see input_names), a dict name -> tensor or a
        list in that order; learnable ones get gradients. query_start and key_start (each
        an int or an int64 [B] tensor) are the absolute positions of q's and k's first
        rows, which every region's i and j count from (docs/decoding.md)."""
        jit = self._jit_kernel(q)
        if jit is not None:
            return jit(q, k, v, self._params(params, q), is_causal, key_lengths,
                       dict(zip(self.input_names, self._inputs(inputs))),
                       query_start=query_start, key_start=key_start)
        return torch.ops.attn.attention(self.artifact_for(q), q, k, v, self._params(params, q),
                                        is_causal, key_lengths, self._inputs(inputs),
                                        query_start_tensor(query_start),
                                        *key_start_arguments(key_start))

    def _jit_kernel(self, q):
        """On a GPU none of the artifact's cubins runs on: its embedded Triton source as a
        triton_backend.TritonKernel (compiled by the user's Triton), else None."""
        if (q.device.type != "cuda" or self.lazy_cuda is not None
                or "cuda" not in self.manifest.get("devices", [])):
            return None
        from . import triton_backend
        return triton_backend.jit_kernel_for(self.path, self.cuda_targets,
                                             torch.cuda.get_device_capability(q.device))

    def attention_weights(self, q, k, params=None, is_causal=False, key_lengths=None,
                          inputs=None, query_start=None, key_start=0):
        """[B,H,Nq,Nk] weights w_ij = g(s_ij) / C_i, for inspection only (no autograd;
        refused above 2**26 elements). Computed by this kernel's own forward, so they are
        exactly the weights it applies (masks, params and tensor inputs included)."""
        return torch.ops.attn.attention_weights(self.artifact_for(q), q, k,
                                                self._params(params, q), is_causal, key_lengths,
                                                self._inputs(inputs),
                                                query_start_tensor(query_start),
                                                *key_start_arguments(key_start))

    def forward_with_stats(self, q, k, v, params=None, is_causal=False, key_lengths=None,
                           inputs=None, query_start=None, key_start=0):
        """Forward only, no autograd: (O, row_max, row_sum)."""
        return torch.ops.attn.attention_forward(self.artifact_for(q), q, k, v,
                                                self._params(params, q), is_causal, key_lengths,
                                                self._inputs(inputs),
                                                query_start_tensor(query_start),
                                                *key_start_arguments(key_start))

    def __repr__(self):
        return (f"attn.Kernel({self.name!r}, params={self.param_names}, "
                f"dtypes={self.manifest.get('dtypes')}, devices={self.manifest.get('devices')}, "
                f"cuda_targets={self.cuda_targets}, "
                f"path={self.path!r})")


# Guards Kernel._cuda_kernels (a Kernel holds no lock: modules holding one are deep-copied,
# e.g. by nn.TransformerEncoder); one build at a time, which a process rarely has to wait
# for: a model needs a new (dtype, head dim) once.
_cuda_build_lock = threading.Lock()


@torch.compiler.assume_constant_result
def _cuda_artifact(kernel, dtype, head_dim, portable):
    """Kernel.artifact_for on a GPU with lazy GPU code: the artifact of (dtype, head_dim),
    built and loaded on first use; its path, or with `portable` its reference.
    torch.compile runs this while it traces and keeps the result as a constant of the
    graph, as it keeps Kernel.path: the build never becomes part of the graph."""
    tag = _CUDA_DTYPE_TAGS.get(dtype)
    if tag is None:
        raise RuntimeError(
            f"attn: kernel {kernel.name}: q has dtype {dtype} on the GPU; the GPU kernels take "
            f"{', '.join(map(str, _CUDA_DTYPE_TAGS))}")
    with _cuda_build_lock:
        built = kernel._cuda_kernels.get((tag, head_dim))
        if built is None:
            try:
                built = Kernel(kernel.lazy_cuda.build(tag, head_dim),
                               reference=kernel.lazy_cuda.reference(tag, head_dim))
            except RuntimeError as e:
                raise RuntimeError(
                    f"attn: kernel {kernel.name} has no GPU code for {dtype} and head dim "
                    f"{head_dim}, and cannot build it (attn-compile "
                    f"{' '.join(kernel.lazy_cuda.options_for(tag, head_dim))}):\n{e}") from e
            kernel._cuda_kernels[(tag, head_dim)] = built
    return built.reference if portable else built.path


def load(path):
    """Load and validate an artifact compiled by attn-compile; returns a Kernel."""
    return Kernel(path)


def min_thread_work_ns():
    """The least work (estimated one-thread time, ns) a CPU call gives each thread it
    wakes: smaller calls run on fewer of torch.get_num_threads() threads, down to the
    calling one (attn/runtime.h, min_thread_work_nanos). 100 µs unless set."""
    _ensure_runtime()
    return torch.ops.attn.min_thread_work_ns()


def set_min_thread_work_ns(nanoseconds):
    """Sets min_thread_work_ns() for the process and returns the value it replaces; 0
    splits every call over every thread as far as its sizes allow."""
    _ensure_runtime()
    return torch.ops.attn.set_min_thread_work_ns(float(nanoseconds))


def kernel_of(source, cuda_targets=None):
    """An attn.Kernel from a Kernel (returned as is), a compiled .so path, or IR text, a
    .mlir path or traced IR (attn.kernel / attn.normalizer; compiled by attn.compile,
    cached by content)."""
    if isinstance(source, Kernel):
        return source
    if isinstance(source, frontend.Traced):
        return compile(source, cuda_targets=cuda_targets)
    text = os.fspath(source)
    if "\n" not in text and text.endswith(".so"):
        return load(text)
    return compile(text, cuda_targets=cuda_targets)


class Attention(torch.nn.Module):
    """nn.Module holding the kernel's learnable parameters (as one [P] Parameter)."""

    def __init__(self, path, dtype=torch.float32, is_causal=False):
        super().__init__()
        self.kernel = path if isinstance(path, Kernel) else load(path)
        self.is_causal = is_causal
        self.params = torch.nn.Parameter(self.kernel.initial_params(dtype),
                                         requires_grad=len(self.kernel.param_names) > 0)

    def forward(self, q, k, v, key_lengths=None, query_start=None, key_start=0):
        return self.kernel(q, k, v, self.params, self.is_causal, key_lengths,
                           query_start=query_start, key_start=key_start)

    def extra_repr(self):
        return f"{self.kernel.name}, params={self.kernel.param_names}, is_causal={self.is_causal}"


from .compiler import compile, opt  # noqa: E402  (needs load, defined above)
from . import frontend  # noqa: E402
from .frontend import *  # noqa: E402,F401,F403  (attn.normalizer, attn.kernel, attn.exp, ...)
from .functional import attention  # noqa: E402
from .modules import MultiheadAttention  # noqa: E402
from .tables import alibi_slopes  # noqa: E402
from . import training  # noqa: E402

__all__ += frontend.__all__
