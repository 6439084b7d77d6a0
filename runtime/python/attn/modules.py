"""torch.nn modules backed by compiled attn kernels."""

import torch
from torch import nn
from torch.nn import functional as F

from .decoding import positions_given
from .masks import kernel_masks, needs_kernel_support, with_mask_input

__all__ = ["MultiheadAttention"]


class MultiheadAttention(nn.Module):
    """torch.nn.MultiheadAttention whose attention is a compiled attn kernel: the same
    constructor and forward signatures and defaults, plus the keyword `normalizer`:

        mha = attn.MultiheadAttention(64, 4, batch_first=True,
                                      normalizer=open("examples/normalizers/multimax.mlir").read())
        out, _ = mha(x, x, x, is_causal=True, need_weights=False)

    `normalizer` is an attn.Kernel, a compiled .so, a .mlir path or an IR string
    (compiled once and cached by content; `cuda_targets` adds GPU code to IR compiled
    here: "auto" for the visible GPUs, "sm_80,sm_90", or None; the GPU code of a dtype and
    head dim is built on the first CUDA call that needs it, see attn.compile). The
    kernel's learnable params (normalizer and score scalars, and score weights such as a
    bilinear W [d, d] with their shapes) are registered as parameters `normalizer.<name>`, so optimisers
    and state_dict see them. A kernel with tensor inputs (attn.input) takes them as
    forward's `inputs=` (a dict name -> tensor, see Kernel.input_names); a learnable input
    whose extents are numbers or the head count (e.g. `attn.input @sink learnable :
    tensor<8xf32>`, or `tensor<?xf32> dims(H)`: [num_heads]) is a parameter `inputs.<name>`
    instead (an entry of forward's `inputs=` overrides it), initialised to
    `input_inits[name]` (a number, or a tensor of the parameter's shape), else to the IR's
    initial value (`attn.input @scale learnable = 0.43 ...`), else to 0.

    forward takes torch's arguments with torch's shape and dtype rules (batched 3-D or
    unbatched 2-D inputs, bool or float masks); masks are handled by attn.masks:
    is_causal (with or without attn_mask: torch's hint that attn_mask is the causal mask),
    a trailing key_padding_mask, or an attn.mask compiled into the kernel; any attn_mask
    and key_padding_mask with a kernel that has the attn_mask input (normalizer=
    attn.compile(ir, attn_mask="bool"), or "additive" / "learnable-additive"), else an
    error saying so. dropout > 0, add_bias_kv and add_zero_attn raise errors naming them. need_weights=True (torch's default) returns the attention
    weights ([B, Nq, Nk] averaged over heads, or [B, H, Nq, Nk]) computed by a second,
    weights-only run of the kernel: no gradient flows through them, they cost an N×N
    tensor and are refused above 2**26 elements; pass need_weights=False when training.

    Positions and generation (docs/decoding.md): forward's query_start and key_start
    (each an int or an int64 [B] tensor) are the absolute positions of the first query
    and key, which the kernel's i and j count from (is_causal keeps j <= i in positions).
    kv_cache=attn.KVCache(layers, B, num_heads, head_dim, capacity) with layer=n appends
    this call's projected keys and values to the cache's layer n and attends to every
    cached key, the queries at the positions that continue the cache: prefill, chunked
    prefill and token-by-token steps (call kv_cache.advance() after the last layer).

    `context_parallel` (an attn.context_parallel.ContextParallel): query, key and value
    are this rank's shard of a sequence sharded over a torch.distributed group (self-
    attention), and the output is that shard, computed by ring attention
    (docs/context-parallel.md); attn_mask, key_padding_mask and need_weights=True are
    refused then (they would span the ranks).
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None, *, normalizer, cuda_targets="auto", input_inits=None,
                 context_parallel=None):
        super().__init__()
        from . import kernel_of

        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        if dropout:
            raise needs_kernel_support(f"dropout={dropout}",
                                       "dropout of the attention weights inside the kernel")
        for name, value in (("add_bias_kv", add_bias_kv), ("add_zero_attn", add_zero_attn)):
            if value:
                raise NotImplementedError(f"attn.MultiheadAttention: {name}=True is not supported")
        factory = {"device": device, "dtype": dtype}
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim, self.vdim = kdim or embed_dim, vdim or embed_dim
        self.head_dim = embed_dim // num_heads
        self.batch_first = batch_first
        # Separate q/k/v projections, as torch's module with kdim/vdim. nn.TransformerEncoder
        # (Layer) reads this flag and keeps its inference fast path, which would run torch's
        # own softmax attention instead of this module, off.
        self._qkv_same_embed_dim = False
        self.kernel = kernel_of(normalizer, cuda_targets)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.k_proj = nn.Linear(self.kdim, embed_dim, bias=bias, **factory)
        self.v_proj = nn.Linear(self.vdim, embed_dim, bias=bias, **factory)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        initial = self.kernel.initial_params(dtype or torch.get_default_dtype(), device)
        self.normalizer = nn.ParameterDict(
            {name: nn.Parameter(value.clone())
             for name, value in self.kernel.split_params(initial).items()})
        self.inputs = nn.ParameterDict(self._input_parameters(input_inits or {}, factory))
        self.context_parallel = context_parallel

    def _input_parameters(self, inits, factory):
        """name -> Parameter for the learnable inputs whose shape the module knows: numbers,
        and H and Hkv, both num_heads (k and v are projected to num_heads heads)."""
        def known(extent):
            return extent in ("H", "Hkv") or isinstance(extent, int)

        created = {i["name"]: i for i in self.kernel.inputs
                   if i["learnable"] and all(known(e) for e in i["shape"])}
        unknown = [name for name in inits if name not in created]
        if unknown:
            raise ValueError(
                f"attn.MultiheadAttention: input_inits names {unknown}, but the module creates "
                f"parameters only for the learnable inputs whose extents are numbers, H or Hkv: "
                f"{list(created) or 'none'} (kernel {self.kernel.name}); pass the others as "
                "forward's inputs=")
        parameters = {}
        for name, declared in created.items():
            shape = tuple(self.num_heads if e in ("H", "Hkv") else e for e in declared["shape"])
            init = inits.get(name, declared["init"] or 0.0)
            if isinstance(init, torch.Tensor):
                if tuple(init.shape) != shape:
                    raise ValueError(
                        f"attn.MultiheadAttention: input_inits['{name}'] has shape "
                        f"{list(init.shape)}, expected {list(shape)} (declared "
                        f"[{', '.join(str(e) for e in declared['shape'])}], num_heads = "
                        f"{self.num_heads})")
                value = init.detach().to(device=factory["device"],
                                         dtype=factory["dtype"] or torch.get_default_dtype(),
                                         copy=True)
            else:
                value = torch.full(shape, float(init), **factory)
            parameters[name] = nn.Parameter(value)
        return parameters

    @property
    def in_proj_bias(self):
        """torch's [3·E] input-projection bias (the q, k, v biases), None with bias=False."""
        if self.q_proj.bias is None:
            return None
        return torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])

    def normalizer_params(self):
        """The kernel's params as one [P] tensor in manifest order (differentiable);
        weights (e.g. a bilinear score's W) are flattened row-major."""
        if not self.kernel.param_names:
            return torch.zeros(0, dtype=self.q_proj.weight.dtype, device=self.q_proj.weight.device)
        return torch.cat([self.normalizer[name].reshape(-1) for name in self.kernel.param_names])

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False, *, inputs=None,
                query_start=None, key_start=0, kv_cache=None, layer=0):
        is_batched = F._mha_shape_check(query, key, value, key_padding_mask, attn_mask,
                                        self.num_heads)
        if not is_batched:
            query, key, value = (t.unsqueeze(0) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        batch, queries, _ = query.shape
        keys = key.size(1)
        if self.context_parallel is not None:
            self.context_parallel.check_module_call(attn_mask, key_padding_mask, need_weights)
        is_causal, lengths, mask_table = kernel_masks(
            self.kernel, (batch, self.num_heads, queries, self.head_dim), keys, attn_mask,
            key_padding_mask, is_causal, mha=True, dtype=query.dtype, device=query.device)

        def heads(x, length):
            return x.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = heads(self.q_proj(query), queries)
        k = heads(self.k_proj(key), keys)
        v = heads(self.v_proj(value), keys)
        if kv_cache is not None:
            if positions_given(query_start, key_start) or lengths is not None:
                raise RuntimeError(
                    "attn.MultiheadAttention: kv_cache gives the positions and key lengths; "
                    "pass no query_start, key_start or key_padding_mask with it")
            k, v, query_start, lengths = kv_cache.append(layer, k, v)
        if mask_table is not None and positions_given(query_start, key_start):
            raise RuntimeError(
                "attn.MultiheadAttention: attn_mask with query_start, key_start or kv_cache is "
                "not supported (the mask input is indexed by absolute position); use "
                "is_causal or a mask compiled into the kernel")
        positions = {"query_start": query_start, "key_start": key_start}
        params = self.normalizer_params()
        if self.kernel.inputs:
            inputs = with_mask_input({**self.inputs, **(inputs or {})}, mask_table)
        if self.context_parallel is None:
            o = self.kernel(q, k, v, params, is_causal, lengths, inputs, **positions)
        elif positions_given(query_start, key_start):
            raise RuntimeError("attn.MultiheadAttention: context_parallel takes no "
                               "query_start, key_start or kv_cache (the ring sets the positions)")
        else:
            o = self.context_parallel(q, k, v, self.kernel, params, is_causal=is_causal,
                                      inputs=inputs)
        out = self.out_proj(o.transpose(1, 2).reshape(batch, queries, self.embed_dim))
        if not is_batched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = self.kernel.attention_weights(q, k, params, is_causal, lengths, inputs,
                                                **positions)
        if average_attn_weights:
            weights = weights.mean(1)
        return out, weights if is_batched else weights.squeeze(0)

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, kernel={self.kernel.name}, "
                f"params={self.kernel.param_names}, batch_first={self.batch_first}")
