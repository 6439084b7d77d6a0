"""attn kernels as attention implementations of Hugging Face transformers.

    import attn.huggingface
    attn.huggingface.register("attn_tanhmax", "examples/normalizers/tanhmax.mlir")
    model = LlamaForCausalLM._from_config(config, attn_implementation="attn_tanhmax")

register() adds the kernel to transformers' AttentionInterface (the attention call of
every model written against it: Llama, Mistral, Qwen, GPT-2, ...) and the matching mask
function to its AttentionMaskInterface. transformers then builds the masks (causal,
padding, sliding window, chunked, packed sequences, the cache's positions) as for SDPA:
a boolean [B, 1, Nq, Nk] keep table, or none where a plain causal (or no) mask does. The
kernel runs them as its attn_mask input (attn.compile(..., attn_mask="bool")), so every
pair transformers keeps, and only those, reaches the normalizer, in training, in a
forward without cache and in generate() with transformers' own cache alike. Grouped-query
attention runs without copying keys or values (attn.attention's enable_gqa).

What a kernel sees as i and j is the row and column of the call: a normalizer or score
that reads positions (ALiBi, SSMax's log n_i) sees the call's rows during decoding, not
the absolute positions, so register() is for kernels whose regions do not read i or j
(RoPE, which the model applies to q and k, is fine); it refuses the others, naming them.
transformers is not a dependency of attn: import this module only where it is installed.
"""

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from .functional import attention

__all__ = ["register"]


def register(name, normalizer, *, dtypes=("f32", "f64")):
    """Registers `normalizer` (IR text, a .mlir path or traced IR: what attn.compile
    takes) as transformers' attention implementation `name`; returns the attn.Kernel.
    Models select it with attn_implementation=name (from_config / from_pretrained) or
    model.set_attn_implementation(name)."""
    from . import compile as compile_kernel

    kernel = compile_kernel(normalizer, dtypes=dtypes, attn_mask="bool")

    def forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                is_causal=None, **kwargs):
        """transformers' attention call: [B, H, Nq, d] query, [B, H_kv, Nk, d] key and
        value -> ([B, Nq, H, d] output, no weights)."""
        for unsupported in ("softcap", "s_aux", "sinks", "position_bias"):
            if kwargs.get(unsupported) is not None:
                raise NotImplementedError(
                    f"attn implementation {name!r}: the model passes {unsupported}=, which "
                    "this integration does not forward to the kernel yet")
        if dropout and module.training:
            raise NotImplementedError(f"attn implementation {name!r}: attention dropout "
                                      f"{dropout} is not supported; set the config's "
                                      "attention_dropout to 0")
        causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
        # A mask, when transformers gives one, is the whole mask (causal included); without
        # one, a square call is causal where the module is, and a single query (decoding)
        # sees every cached key, as SDPA's is_causal convention has it.
        causal = bool(causal) and attention_mask is None and query.shape[2] > 1
        if causal and query.shape[2] != key.shape[2]:
            raise RuntimeError(
                f"attn implementation {name!r}: a causal call of {query.shape[2]} queries "
                f"against {key.shape[2]} keys came without a mask")
        out = attention(query, key, value, kernel, attn_mask=attention_mask, is_causal=causal,
                        scale=scaling, enable_gqa=query.shape[1] != key.shape[1])
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register(name, forward)
    AttentionMaskInterface.register(name, sdpa_mask)
    return kernel
