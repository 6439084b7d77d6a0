"""The one place where the masks torch users pass become what attn kernels run.

Both attn.MultiheadAttention and attn.attention hand their masks here. Every kernel runs,
besides an attn.mask compiled into it:

    nothing; is_causal (key j > query i masked, top-left aligned like SDPA);
    trailing key padding, as key_lengths (int64 [B]: keys j >= key_lengths[b] masked).

Any attn_mask, and a key_padding_mask of any pattern, run in a kernel with the *mask
input*: the tensor input `attn_mask` [B, H, Nq, Nk] read at (b, h, i, j), which
attn.compile(source, attn_mask=KIND) (attn-compile --attn-mask=KIND, the pass
attn-add-mask-input) adds to a kernel:

    "bool"                a keep table (int8, nonzero = the pair takes part), and-ed into
                          the kernel's mask;
    "additive"            a score bias in q's dtype, added to the final score; its -inf
                          entries are masked (weight exactly 0);
    "learnable-additive"  the same, and a float attn_mask that requires grad gets its
                          gradient, as SDPA's does.

torch's conventions, all kept: SDPA's bool attn_mask is True = takes part, its float one
is added to the score; nn.MultiheadAttention's bool attn_mask and key_padding_mask are
True = masked (torch's F._canonical_mask turns them into 0 / -inf), its float ones are
added. Every mask given becomes one table: for a "bool" kernel a float mask may hold only
0 and -inf (others raise, naming the additive kind; checked inside the op keep_from_bias,
so torch.compile sees no graph break); for an additive kernel a bool mask becomes
0 / -inf. Several masks combine (keep tables and-ed, biases added). Shapes follow torch:
SDPA's attn_mask broadcasts to [*batch, H, L, S] (the batch dims flattened into b);
nn.MultiheadAttention's is [L, S] or [B*H, L, S], and key_padding_mask [B, S] acts as
[B, 1, 1, S]. The table keeps the size-1 dims of the mask: the kernel's reads are clamped
to the table's extents, so a size-1 dim is read at index 0 for every b, h, i or j. That
is broadcasting without a copy, and a learnable table's gradient is summed over the
broadcast dims inside the kernel (into buffers the size of the mask, never [B, H, Nq, Nk]).
A kernel with the input that gets no mask reads a [1, 1, 1, 1] table that keeps all.

A fully masked row gives 0 and zero gradients (as with every attn mask), where torch may
give NaN. Without the input: key_padding_mask runs as key_lengths when it is trailing
padding (checked inside the op key_lengths_from_padding, so torch.compile sees no graph
break; another pattern raises there), and an attn_mask raises an error that says how to
compile a kernel with the input. An attn_mask is never pattern-matched (not even against
the causal mask): with attn.MultiheadAttention, is_causal=True is torch's hint that
attn_mask *is* the causal mask, and is taken as such.
"""

import torch
from torch.nn import functional as F

__all__ = ["MASK_INPUT", "mask_input_kind", "kernel_masks", "with_mask_input",
           "needs_kernel_support"]

#: The name of the mask input (attn-add-mask-input adds it under this name).
MASK_INPUT = "attn_mask"

_COMPILE_HINT = ("attn.compile(source, attn_mask={kind!r}) (attn-compile --attn-mask={kind})")


def needs_kernel_support(argument, capability):
    """The error for something a torch user may pass that attn kernels cannot run yet:
    it names the argument and the kernel capability it waits for."""
    return NotImplementedError(f"attn: {argument} needs kernel support ({capability}), which "
                               "the compiled attn kernels do not have yet")


def mask_input_kind(kernel):
    """"bool", "additive" or "learnable-additive": the kind of the kernel's mask input
    (a rank-4 input named attn_mask of element i8 or float), or None without one."""
    for declared in kernel.inputs:
        if declared["name"] != MASK_INPUT or declared["shape"] != (None,) * 4:
            continue
        if declared["element"] == "i8":
            return "bool"
        if declared["element"] == "float":
            return "learnable-additive" if declared["learnable"] else "additive"
    return None


def _needs_mask_input(kernel, argument):
    return NotImplementedError(
        f"attn: {argument} needs the kernel's attn_mask input, which kernel {kernel.name} "
        f"does not have: compile it with {_COMPILE_HINT.format(kind='bool')} for bool masks "
        "and float masks of 0 / -inf; attn_mask='additive' for other float masks, "
        "'learnable-additive' for their gradient")


def _sdpa_terms(attn_mask, query_shape, keys):
    """SDPA's attn_mask as [(name, table)]: broadcast to query_shape[:-1] + (keys,) =
    [*batch, H, L, S] (torch's rule) and viewed as [b, h, i, j] with the batch dims
    flattened into b; size-1 dims stay (the kernel's clamped reads broadcast them)."""
    if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
        raise RuntimeError(f"attn: attn_mask has dtype {attn_mask.dtype}, expected bool "
                           "(True: the pair takes part) or a float dtype (added to the score)")
    full = (*query_shape[:-1], keys)
    try:
        fits = torch.broadcast_shapes(attn_mask.shape, full) == full
    except RuntimeError:
        fits = False
    if not fits:
        raise RuntimeError(f"attn: attn_mask of shape {tuple(attn_mask.shape)} does not "
                           f"broadcast to [*batch, H, L, S] = {list(full)}")
    mask = attn_mask.reshape((1,) * (len(full) - attn_mask.dim()) + tuple(attn_mask.shape))
    if len(full) == 2:  # [L, E] queries: no head or batch dims
        return [("attn_mask", mask.reshape(1, 1, *mask.shape))]
    lead = len(full) - 3
    if all(extent == 1 for extent in mask.shape[:lead]):
        return [("attn_mask", mask.reshape(1, *mask.shape[lead:]))]
    # b flattens the batch dims: a mask that varies along some of them is expanded
    # along the others first (a copy only where the strides cannot be merged).
    expanded = mask.expand(*full[:lead], *mask.shape[lead:])
    return [("attn_mask", expanded.reshape(-1, *mask.shape[lead:]))]


def _table(kernel, kind, terms, dtype, device):
    """The mask input from [(name, bool keep table | float bias)], all [b, h, i, j]
    (size-1 dims broadcast): the and of the keep tables (as int8) for a "bool" kernel,
    the sum of the biases (in `dtype`) for an additive one."""
    if kind != "learnable-additive" and torch.is_grad_enabled():
        for name, term in terms:
            if term.requires_grad:
                raise RuntimeError(
                    f"attn: {name} requires grad, but the attn_mask input of kernel "
                    f"{kernel.name} is {kind}, which gets no gradient: compile it with "
                    f"{_COMPILE_HINT.format(kind='learnable-additive')} for its gradient, or "
                    f"pass {name}.detach()")
    if kind == "bool":
        keep = None
        for name, term in terms:
            # The op checks the values (0 / -inf) where torch.compile sees no graph break.
            term = (term if term.dtype == torch.bool else
                    torch.ops.attn.keep_from_bias(term, name, kernel.name))
            keep = term if keep is None else keep & term
        if keep is None:
            keep = torch.ones(1, 1, 1, 1, dtype=torch.bool, device=device)
        return keep.view(torch.int8)  # bool and int8 share their layout: no copy
    bias = None
    for _, term in terms:
        if term.dtype == torch.bool:  # 0 where kept, -inf where masked
            term = torch.where(term, torch.zeros((), dtype=dtype, device=device),
                               torch.full((), float("-inf"), dtype=dtype, device=device))
        term = term.to(dtype)
        bias = term if bias is None else bias + term
    return torch.zeros(1, 1, 1, 1, dtype=dtype, device=device) if bias is None else bias


def kernel_masks(kernel, query_shape, keys, attn_mask=None, key_padding_mask=None,
                 is_causal=False, mha=False, dtype=None, device=None):
    """(is_causal, key_lengths, table) for `kernel` from torch-style masks, for queries of
    shape query_shape ([*batch, H, L, E], or [B, H, L, E] with mha) and `keys` keys.
    table is the kernel's mask input (see with_mask_input), None when the kernel has none;
    dtype and device are q's.

    mha: nn.MultiheadAttention's conventions: masks go through torch's F._canonical_mask
    (bool or float only; bool True = masked; its dtype warnings), attn_mask is [L, S] or
    [B*H, L, S], key_padding_mask [B, S] (True or -inf = padded), and is_causal=True is the
    hint that attn_mask is the causal mask. Otherwise F.scaled_dot_product_attention's:
    attn_mask (bool True = takes part, or float) broadcasts to [*batch, H, L, S], and with
    is_causal=True it is an error."""
    kind = mask_input_kind(kernel)
    terms = []
    if mha:
        batch, heads, queries = query_shape[0], query_shape[1], query_shape[2]
        canonical_padding = F._canonical_mask(
            mask=key_padding_mask, mask_name="key_padding_mask",
            other_type=F._none_or_dtype(attn_mask), other_name="attn_mask", target_type=dtype)
        canonical_attn = F._canonical_mask(
            mask=attn_mask, mask_name="attn_mask", other_type=None, other_name="",
            target_type=dtype, check_other=False)
        if is_causal:
            attn_mask = canonical_attn = None
        # Bool masks (True = masked) enter as keep tables, float ones as biases.
        if attn_mask is not None:
            table = ~attn_mask if attn_mask.dtype == torch.bool else canonical_attn
            table = (table.reshape(1, 1, queries, keys) if table.dim() == 2 else
                     table.reshape(batch, heads, queries, keys))
            terms.append(("attn_mask", table))
        if key_padding_mask is not None and kind is not None:
            table = (~key_padding_mask if key_padding_mask.dtype == torch.bool
                     else canonical_padding)
            terms.append(("key_padding_mask", table.reshape(batch, 1, 1, keys)))
    elif attn_mask is not None:
        if is_causal:
            raise RuntimeError("attn: pass either attn_mask or is_causal=True, not both "
                               "(as F.scaled_dot_product_attention)")
        terms = _sdpa_terms(attn_mask, query_shape, keys)
    if kind is None:
        if terms:
            raise _needs_mask_input(kernel, f"attn_mask (a mask of shape {tuple(attn_mask.shape)}; "
                                    "is_causal=True runs the causal mask)")
        key_lengths = (None if key_padding_mask is None else
                       torch.ops.attn.key_lengths_from_padding(key_padding_mask, keys))
        return is_causal, key_lengths, None
    return is_causal, None, _table(kernel, kind, terms, dtype, device)


def with_mask_input(inputs, table):
    """The kernel's tensor inputs (a dict name -> tensor, or None) with the mask input
    `table` from kernel_masks; `inputs` unchanged when table is None."""
    if table is None:
        return inputs
    if inputs is not None and not isinstance(inputs, dict):
        raise RuntimeError("attn: a kernel with the attn_mask input takes inputs= as a dict "
                           "name -> tensor (the mask comes from attn_mask= and key_padding_mask=)")
    if inputs and MASK_INPUT in inputs:
        raise RuntimeError("attn: inputs= names 'attn_mask', the kernel's mask input: pass the "
                           "mask as attn_mask= (or key_padding_mask=) instead")
    return {**(inputs or {}), MASK_INPUT: table}
