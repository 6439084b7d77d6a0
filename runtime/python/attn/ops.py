"""Fake implementations of the torch.ops.attn tensor ops, for FakeTensor, torch.compile,
torch.export and torch.library.opcheck.

The ops are defined in C++ (runtime/ops.cpp), whose TORCH_LIBRARY block names this module
(`m.set_python_module("attn.ops")`, which torch's errors quote when a fake is missing).
attn.load / attn.compile import it; so does `import attn.ops`, which also loads the runtime
library if nobody has (do that before compiling code that calls torch.ops.attn.* directly).
Each fake returns what the CPU/CUDA kernels return, symbolic sizes included: fresh
contiguous tensors of these shapes and dtypes (runtime/cpu_dispatch.cpp, gpu_launch.cpp):

    attention          O [B, H, Nq, dv]                          q's dtype
    attention_forward  O, row_max [B, H, Nq], row_sum [B, H, Nq]  stats: q's dtype on the
                                                                 CPU, float32 on the GPU
    attention_backward dq like q, dk like k, dv like v, dparams like params, and one
                       gradient per tensor input: like the input (q's dtype) for a
                       learnable one, an empty [0] tensor of q's dtype for the others
                       (the manifest's inputs say which, read once per artifact)
    attention_weights  [B, H, Nq, Nk]                            q's dtype
    key_lengths_from_padding  int64 [B] on the CPU
    keep_from_bias     bool, the bias's shape and device
    attention_partial_forward  o like O, row_max, row_sum, row_count [B, H, Nq] (q's dtype)
    attention_merge    O, row_max, row_sum as attention_forward
    attention_partial_backward  as attention_backward

Inputs the kernels refuse get their errors from the kernels themselves, at run time. One
exception: an eager call with some tensors on the meta device dispatches to these fakes
instead of the kernels (the meta key wins), so the fakes refuse a mix of meta and other
devices themselves rather than return uninitialised memory on q's device.
"""

import functools

import torch

from . import _load_library, parse_manifest

__all__ = []

_load_library()


def _one_device(op, key_lengths, inputs, query_start=None, key_starts=None, **tensors):
    """Refuses tensors (None: absent) of which some, not all, are on the meta device;
    key_lengths, query_start and key_starts may be on the CPU, as for the kernels."""
    present = {name: t for name, t in tensors.items() if t is not None}
    present.update({f"inputs[{n}]": t for n, t in enumerate(inputs or [])})
    for name, t in (("key_lengths", key_lengths), ("query_start", query_start),
                    ("key_starts", key_starts)):
        if t is not None and t.device.type == "meta":
            present[name] = t
    meta = sorted(name for name, t in present.items() if t.device.type == "meta")
    if meta and len(meta) != len(present):
        other = next(name for name in present if name not in meta)
        raise RuntimeError(f"attn::{op}: {', '.join(meta)} on the meta device but {other} on "
                           f"{present[other].device}; expected {', '.join(present)} on one device")


def _new(like, shape, dtype=None):
    return like.new_empty(tuple(shape), dtype=dtype)


def _stats_dtype(q):
    return torch.float32 if q.device.type == "cuda" else q.dtype


def _output(q, v):
    return _new(q, (*q.shape[:-1], v.shape[-1]))


@functools.lru_cache(maxsize=None)
def _learnable_inputs(artifact):
    """Whether each tensor input of the artifact gets a gradient (its manifest)."""
    return tuple(i["learnable"] for i in parse_manifest(torch.ops.attn.manifest(artifact))["inputs"])


@torch.library.register_fake("attn::attention")
def _attention(artifact, q, k, v, params, is_causal=False, key_lengths=None, inputs=None,
               query_start=None, key_start=0, key_starts=None):
    _one_device("attention", key_lengths, inputs, query_start, key_starts, q=q, k=k, v=v,
                params=params)
    return _output(q, v)


@torch.library.register_fake("attn::attention_forward")
def _attention_forward(artifact, q, k, v, params, is_causal=False, key_lengths=None,
                       inputs=None, query_start=None, key_start=0, key_starts=None):
    _one_device("attention_forward", key_lengths, inputs, query_start, key_starts, q=q, k=k, v=v,
                params=params)
    stats = q.shape[:-1]
    return (_output(q, v), _new(q, stats, _stats_dtype(q)), _new(q, stats, _stats_dtype(q)))


@torch.library.register_fake("attn::attention_backward")
def _attention_backward(artifact, q, k, v, params, out, row_max, row_sum, grad_out,
                        is_causal=False, key_lengths=None, inputs=None, query_start=None,
                        key_start=0, key_starts=None):
    _one_device("attention_backward", key_lengths, inputs, query_start, key_starts, q=q, k=k,
                v=v, params=params, out=out, row_max=row_max, row_sum=row_sum,
                grad_out=grad_out)
    dinputs = [_new(q, t.shape) if learnable else _new(q, (0,))
               for t, learnable in zip(inputs or [], _learnable_inputs(artifact))]
    return (_new(q, q.shape), _new(k, k.shape), _new(v, v.shape), _new(params, params.shape),
            dinputs)


@torch.library.register_fake("attn::attention_weights")
def _attention_weights(artifact, q, k, params, is_causal=False, key_lengths=None,
                       inputs=None, query_start=None, key_start=0, key_starts=None):
    _one_device("attention_weights", key_lengths, inputs, query_start, key_starts, q=q, k=k,
                params=params)
    return _new(q, (*q.shape[:-1], k.shape[-2]))


@torch.library.register_fake("attn::attention_partial_forward")
def _attention_partial_forward(artifact, q, k, v, params, is_causal=False, key_lengths=None,
                               inputs=None, query_start=0, key_start=0):
    _one_device("attention_partial_forward", key_lengths, inputs, q=q, k=k, v=v, params=params)
    stats = q.shape[:-1]
    return (_output(q, v), *[_new(q, stats) for _ in range(3)])


@torch.library.register_fake("attn::attention_merge")
def _attention_merge(artifact, q, k, v, params, o_parts, max_parts, sum_parts, count_parts,
                     key_lengths=None, inputs=None, query_start=0, key_start=0):
    _one_device("attention_merge", key_lengths, inputs, q=q, k=k, v=v, params=params,
                o_parts=o_parts, max_parts=max_parts, sum_parts=sum_parts,
                count_parts=count_parts)
    stats = q.shape[:-1]
    return (_output(q, v), _new(q, stats), _new(q, stats))


@torch.library.register_fake("attn::attention_partial_backward")
def _attention_partial_backward(artifact, q, k, v, params, out, row_max, row_sum, grad_out,
                                row_offset, is_causal=False, key_lengths=None, inputs=None,
                                query_start=0, key_start=0):
    return _attention_backward(artifact, q, k, v, params, out, row_max, row_sum, grad_out,
                               is_causal, key_lengths, inputs)


@torch.library.register_fake("attn::keep_from_bias")
def _keep_from_bias(bias, argument, kernel):
    return torch.empty_like(bias, dtype=torch.bool)


@torch.library.register_fake("attn::key_lengths_from_padding")
def _key_lengths_from_padding(key_padding_mask, keys):
    if key_padding_mask.device.type == "meta":
        raise RuntimeError("attn::key_lengths_from_padding: key_padding_mask is on the meta device; "
                           "expected a CPU or CUDA tensor (the key lengths, returned on the CPU, "
                           "are computed from its values)")
    return key_padding_mask.new_empty((key_padding_mask.shape[0],), dtype=torch.int64,
                                      device="cpu")
