"""attn.attention: a compiled attn kernel called like F.scaled_dot_product_attention."""

import torch

from .decoding import positions_given, query_start_tensor
from .masks import kernel_masks, needs_kernel_support, with_mask_input

__all__ = ["attention"]


def _heads(t):
    """[*batch, H, N, E] (or [N, E]) as [B, H, N, E] (a view where strides allow)."""
    return t.reshape(-1, t.shape[-3] if t.dim() >= 3 else 1, *t.shape[-2:])


def _batch_starts(name, start, batch):
    """A start position as the kernel takes it: an int, or a tensor [*batch] flattened."""
    if not isinstance(start, torch.Tensor) or start.dim() == 0:
        return start
    if start.shape != batch:
        raise RuntimeError(f"attn.attention: {name} must be an int or have the batch shape "
                           f"{tuple(batch)} of query, got {tuple(start.shape)}")
    return start.reshape(-1)


def attention(query, key, value, kernel, attn_mask=None, dropout_p=0.0, is_causal=False,
              scale=None, enable_gqa=False, *, params=None, key_lengths=None, inputs=None,
              query_start=None, key_start=0, kv_cache=None, layer=0):
    """Attention with a compiled attn kernel, with the arguments and shapes of
    torch.nn.functional.scaled_dot_product_attention:

        query [*batch, H, L, E], key [*batch, H_kv, S, E], value [*batch, H_kv, S, Ev]
        -> [*batch, H, L, Ev]        (*batch: any number of batch dims, none included)

    kernel: an attn.Kernel, a compiled .so, or IR text / a .mlir path (compiled by
    attn.compile and cached, with GPU code for the visible GPUs built on the first CUDA
    call of each dtype and head dim; pass a Kernel inside torch.compile). is_causal: keys at
    positions after the query's are masked (query_start 0: top-left aligned, as SDPA). scale: None uses the kernel's own
    score; otherwise q·k is scaled by `scale` instead (exact for the dot and scaled_dot
    contractions without a feature map; other kernels raise, naming their contract).
    enable_gqa=True: grouped-query attention, as in SDPA: H a multiple of H_kv, query
    head h reads key/value head h // (H // H_kv) (no copy of key or value; their
    gradients sum over the group; CPU only). Without it the head counts must agree.

    attn's own keywords: params [P] (the kernel's learnable params; default: their
    initial values), key_lengths int64 [*batch] (keys j >= key_lengths masked: trailing
    padding), inputs: the kernel's tensor inputs (attn.input; a dict name -> tensor, see
    Kernel.input_names), whose batch index b counts the batch dims flattened. Autograd
    reaches query, key, value, params and the learnable inputs.

    Positions (docs/decoding.md): query_start and key_start (each an int, or an int64
    tensor [*batch]) are the absolute positions of the first query and key; the
    kernel's i and j count from them, and is_causal keeps j <= i in positions
    (query_start = S - L: bottom-right aligned, as FlashAttention's causal).
    kv_cache: an attn.KVCache; key and value are then this step's new keys and values,
    appended to the cache's layer `layer`, and the queries attend to all the cached keys
    at positions continuing the cache (query_start and key_lengths come from the cache).

    attn_mask (bool: True takes part; float: added to the score; broadcast to
    [*batch, H, L, S]) runs in a kernel with the attn_mask input, compiled by
    attn.compile(source, attn_mask="bool" | "additive" | "learnable-additive"); a kernel
    without it raises an error saying so (attn.masks). A float attn_mask that requires
    grad gets its gradient from a "learnable-additive" kernel; other kernels refuse it.
    dropout_p > 0 is not supported yet (an error naming it).
    """
    from . import kernel_of

    kernel = kernel_of(kernel, cuda_targets="auto")
    if kv_cache is not None:
        if positions_given(query_start, key_start) or key_lengths is not None:
            raise RuntimeError("attn.attention: kv_cache gives the positions and key lengths; "
                               "pass no query_start, key_start or key_lengths with it")
        if query.dim() < 3:
            raise RuntimeError("attn.attention: kv_cache needs query [*batch, H, L, E]")
        new_keys, new_values = _heads(key), _heads(value)
        key, value, query_start, key_lengths = kv_cache.append(layer, new_keys, new_values)
        key = key.reshape(*query.shape[:-3], *key.shape[1:])
        value = value.reshape(*query.shape[:-3], *value.shape[1:])
        key_lengths = key_lengths.reshape(query.shape[:-3])
        query_start = query_start.reshape(query.shape[:-3])
    if dropout_p:
        raise needs_kernel_support(f"dropout_p={dropout_p}",
                                   "dropout of the attention weights inside the kernel")
    if query.dim() < 2 or key.dim() != query.dim() or value.dim() != query.dim():
        raise RuntimeError(
            "attn.attention: query, key and value must have the same number of dims (at least "
            f"2: [*batch, H, L, E]), got query {tuple(query.shape)}, key {tuple(key.shape)}, "
            f"value {tuple(value.shape)}")
    batch = query.shape[:-3]
    if key.shape[:-3] != batch or value.shape[:-2] != key.shape[:-2]:
        raise RuntimeError(
            "attn.attention: the batch dims of query, key and value and the head and length "
            f"dims of key and value must agree, got query {tuple(query.shape)}, key "
            f"{tuple(key.shape)}, value {tuple(value.shape)}")
    q, k, v = _heads(query), _heads(key), _heads(value)
    if q.shape[1] != k.shape[1] and not enable_gqa:
        raise RuntimeError(f"attn.attention: {q.shape[1]} query heads and {k.shape[1]} "
                           "key/value heads: the head counts must agree (enable_gqa=True "
                           "asks for grouped-query attention)")
    is_causal, _, mask_table = kernel_masks(kernel, query.shape, key.shape[-2], attn_mask,
                                            is_causal=is_causal, dtype=query.dtype,
                                            device=query.device)
    if scale is not None:
        factor = kernel.query_factor(scale, query.shape[-1])
        if factor != 1.0:
            q = q * factor
    query_start, key_start = (_batch_starts(name, start, batch) for name, start in
                              (("query_start", query_start), ("key_start", key_start)))
    if mask_table is not None and positions_given(query_start, key_start):
        raise RuntimeError("attn.attention: attn_mask with query_start, key_start or kv_cache "
                           "is not supported (the mask input is indexed by absolute position); "
                           "use is_causal, key_lengths or a mask compiled into the kernel")
    if key_lengths is not None:
        if key_lengths.shape != batch:
            raise RuntimeError(f"attn.attention: key_lengths must have the batch shape "
                               f"{tuple(batch)} of query, got {tuple(key_lengths.shape)}")
        key_lengths = key_lengths.reshape(-1)
    out = kernel(q, k, v, params, is_causal, key_lengths, with_mask_input(inputs, mask_table),
                 query_start=query_start_tensor(query_start), key_start=key_start)
    return out.reshape(*query.shape[:-1], value.shape[-1])
