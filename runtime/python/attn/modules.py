"""torch.nn modules backed by compiled attn kernels."""

import os

import torch
from torch import nn

__all__ = ["MultiheadAttention"]


def _kernel_from(normalizer, cuda_targets):
    from . import Kernel, compile, load

    if isinstance(normalizer, Kernel):
        return normalizer
    text = os.fspath(normalizer)
    if "\n" not in text and text.endswith(".so"):
        return load(text)
    return compile(text, cuda_targets=cuda_targets)


class MultiheadAttention(nn.Module):
    """Multi-head attention whose attention is a compiled attn kernel, with an API close
    to torch.nn.MultiheadAttention:

        mha = attn.MultiheadAttention(64, 4, open("examples/normalizers/multimax.mlir").read(),
                                      batch_first=True)
        out, _ = mha(x, x, x, is_causal=True)

    `normalizer` is an attn.Kernel, a compiled .so, a .mlir path or an IR string
    (compiled once and cached by content; `cuda_targets` adds GPU code to IR compiled
    here: "auto" for the visible GPUs, "sm_80,sm_90", or None). The kernel's learnable
    params (normalizer and score scalars, and score weights such as a bilinear W [d, d]
    with their shapes) are
    registered as parameters `normalizer.<name>`, so optimisers and state_dict see them.
    A kernel with tensor inputs (attn.input) takes them as `inputs=` of forward (a dict
    name -> tensor, see Kernel.input_names).
    Masks: `is_causal`, trailing `key_padding_mask`, or an attn.mask compiled into the
    kernel; `attn_mask` tensors are not supported. Unlike torch, `need_weights` defaults
    to False: the weights are an extra N×N computation (see Kernel.attention_weights),
    returned for inspection only ([B, Nq, Nk] averaged over heads, or [B, H, Nq, Nk]
    with average_attn_weights=False); otherwise the second result is None.
    """

    def __init__(self, embed_dim, num_heads, normalizer, bias=True, kdim=None, vdim=None,
                 batch_first=False, device=None, dtype=None, cuda_targets="auto"):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        factory = {"device": device, "dtype": dtype}
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.batch_first = batch_first
        self.kernel = _kernel_from(normalizer, cuda_targets)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.k_proj = nn.Linear(kdim or embed_dim, embed_dim, bias=bias, **factory)
        self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, bias=bias, **factory)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        initial = self.kernel.initial_params(dtype or torch.get_default_dtype(), device)
        self.normalizer = nn.ParameterDict(
            {name: nn.Parameter(value.clone())
             for name, value in self.kernel.split_params(initial).items()})

    def normalizer_params(self):
        """The kernel's params as one [P] tensor in manifest order (differentiable);
        weights (e.g. a bilinear score's W) are flattened row-major."""
        if not self.kernel.param_names:
            return torch.zeros(0, dtype=self.q_proj.weight.dtype, device=self.q_proj.weight.device)
        return torch.cat([self.normalizer[name].reshape(-1) for name in self.kernel.param_names])

    def forward(self, query, key, value, key_padding_mask=None, need_weights=False,
                attn_mask=None, average_attn_weights=True, is_causal=False, inputs=None):
        if attn_mask is not None:
            raise ValueError("attn_mask is not supported: use is_causal, a trailing "
                             "key_padding_mask, or an attn.mask in the kernel")
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        batch, queries, _ = query.shape
        keys = key.size(1)

        def heads(x, length):
            return x.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = heads(self.q_proj(query), queries)
        k = heads(self.k_proj(key), keys)
        v = heads(self.v_proj(value), keys)
        lengths = (None if key_padding_mask is None
                   else torch.ops.attn.key_lengths_from_padding(key_padding_mask, keys))
        params = self.normalizer_params()
        o = self.kernel(q, k, v, params, is_causal, lengths, inputs)
        out = self.out_proj(o.transpose(1, 2).reshape(batch, queries, self.embed_dim))
        if not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        with torch.no_grad():
            weights = self.kernel.attention_weights(q, k, params, is_causal, lengths, inputs)
        return out, weights.mean(1) if average_attn_weights else weights

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, kernel={self.kernel.name}, "
                f"params={self.kernel.param_names}, batch_first={self.batch_first}")
