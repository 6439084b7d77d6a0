"""Fake implementations of the torch.ops.attn tensor ops, for FakeTensor, torch.compile,
torch.export and torch.library.opcheck.

The ops are defined in C++ (runtime/ops.cpp), whose TORCH_LIBRARY block names this module
(`m.set_python_module("attn.ops")`, which torch's errors quote when a fake is missing).
attn.load / attn.compile import it; so does `import attn.ops`, which also loads the runtime
library if nobody has (do that before compiling code that calls torch.ops.attn.* directly).
Each fake returns what the CPU/CUDA kernels return, symbolic sizes included: fresh
contiguous tensors of these shapes and dtypes (runtime/attention.cpp):

    attention          O [B, H, Nq, dv]                          q's dtype
    attention_forward  O, row_max [B, H, Nq], row_sum [B, H, Nq]  stats: q's dtype on the
                                                                 CPU, float32 on the GPU
    attention_backward dq like q, dk like k, dv like v, dparams like params,
                       drow_inputs like row_inputs ([B, H, 0, Nq] without them)
    attention_weights  [B, H, Nq, Nk]                            q's dtype
    key_lengths_from_padding  int64 [B] on the CPU

Inputs the kernels refuse get their errors from the kernels themselves, at run time. One
exception: an eager call with some tensors on the meta device dispatches to these fakes
instead of the kernels (the meta key wins), so the fakes refuse a mix of meta and other
devices themselves rather than return uninitialised memory on q's device.
"""

import torch

from . import _load_library

__all__ = []

_load_library()


def _one_device(op, key_lengths, **tensors):
    """Refuses tensors (None: absent) of which some, not all, are on the meta device;
    key_lengths may be on the CPU, as for the kernels."""
    present = {name: t for name, t in tensors.items() if t is not None}
    if key_lengths is not None and key_lengths.device.type == "meta":
        present["key_lengths"] = key_lengths
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


@torch.library.register_fake("attn::attention")
def _attention(artifact, q, k, v, params, is_causal=False, key_lengths=None, row_inputs=None):
    _one_device("attention", key_lengths, q=q, k=k, v=v, params=params, row_inputs=row_inputs)
    return _output(q, v)


@torch.library.register_fake("attn::attention_forward")
def _attention_forward(artifact, q, k, v, params, is_causal=False, key_lengths=None,
                       row_inputs=None):
    _one_device("attention_forward", key_lengths, q=q, k=k, v=v, params=params,
                row_inputs=row_inputs)
    stats = q.shape[:-1]
    return (_output(q, v), _new(q, stats, _stats_dtype(q)), _new(q, stats, _stats_dtype(q)))


@torch.library.register_fake("attn::attention_backward")
def _attention_backward(artifact, q, k, v, params, out, row_max, row_sum, grad_out,
                        is_causal=False, key_lengths=None, row_inputs=None):
    _one_device("attention_backward", key_lengths, q=q, k=k, v=v, params=params, out=out,
                row_max=row_max, row_sum=row_sum, grad_out=grad_out, row_inputs=row_inputs)
    B, H, Nq = q.shape[:-1]
    drow_inputs = (_new(q, (B, H, 0, Nq)) if row_inputs is None
                   else _new(row_inputs, row_inputs.shape))
    return (_new(q, q.shape), _new(k, k.shape), _new(v, v.shape), _new(params, params.shape),
            drow_inputs)


@torch.library.register_fake("attn::attention_weights")
def _attention_weights(artifact, q, k, params, is_causal=False, key_lengths=None,
                       row_inputs=None):
    _one_device("attention_weights", key_lengths, q=q, k=k, params=params, row_inputs=row_inputs)
    return _new(q, (*q.shape[:-1], k.shape[-2]))


@torch.library.register_fake("attn::key_lengths_from_padding")
def _key_lengths_from_padding(key_padding_mask, keys):
    if key_padding_mask.device.type == "meta":
        raise RuntimeError("attn::key_lengths_from_padding: key_padding_mask is on the meta device; "
                           "expected a CPU or CUDA tensor (the key lengths, returned on the CPU, "
                           "are computed from its values)")
    return key_padding_mask.new_empty((key_padding_mask.shape[0],), dtype=torch.int64,
                                      device="cpu")
