"""Hugging Face transformers models with attn kernels (docs/decoding.md):

    attn.hf.register("attn_tanhmax", "examples/normalizers/tanhmax.mlir")
    model = LlamaForCausalLM(config)
    model.set_attn_implementation("attn_tanhmax")

registers the kernel in transformers' AttentionInterface under that name. Queries sit at
the last positions of the keys (query_start = S - L, the queries of a cached generate()
step), causal in absolute positions, grouped-query heads read without a copy, and
transformers' `scaling` rescales the score as attn.attention's `scale`. transformers is
not a dependency of attn: it is imported when register() is called.
"""

import torch

__all__ = ["register"]


def register(name, kernel, inputs=None):
    """Registers `kernel` (an attn.Kernel, .so, .mlir path or IR text) as transformers'
    attention implementation `name`; `inputs`: the kernel's tensor inputs, passed to every
    call. Returns the attention function."""
    from transformers import AttentionInterface

    from . import kernel_of
    from .functional import attention as attn_attention

    kernel = kernel_of(kernel)

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                  is_causal=None, **kwargs):
        if dropout:
            raise NotImplementedError(f"attn ({name}): dropout={dropout} in the attention "
                                      "weights is not supported")
        queries, keys = query.shape[2], key.shape[2]
        causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
        start = keys - queries if causal else 0
        if attention_mask is not None:
            _check_causal(name, attention_mask, queries, keys, start if causal else None)
        out = attn_attention(query, key, value, kernel, is_causal=causal, scale=scaling,
                             enable_gqa=key.shape[1] != query.shape[1], inputs=inputs,
                             query_start=start)
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register(name, attention)
    return attention


def _check_causal(name, mask, queries, keys, start):
    """transformers' mask must be what attn applies itself (the queries the last of the
    keys, causal or not): padded batches would need key_lengths, which it does not say."""
    kept = mask if mask.dtype == torch.bool else mask == 0
    i = torch.arange(queries, device=mask.device).view(-1, 1) + (start or 0)
    j = torch.arange(keys, device=mask.device).view(1, -1)
    expected = (j <= i) if start is not None else torch.ones_like(j <= i)
    if not bool((kept[..., :queries, :keys] == expected).all()):
        raise NotImplementedError(
            f"attn ({name}): transformers passed an attention mask other than the causal one "
            "(padding?); this integration runs unpadded batches whose queries are the last "
            "of the keys")
