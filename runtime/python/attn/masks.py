"""The one place where the masks torch users pass become what attn kernels run.

Both attn.MultiheadAttention and attn.attention hand their masks here. The kernels run
exactly three kinds of masking (besides an attn.mask compiled into the kernel):

    nothing; is_causal (key j > query i masked, top-left aligned like SDPA);
    trailing key padding, as key_lengths (int64 [B]: keys j >= key_lengths[b] masked).

Everything else — an arbitrary attn_mask, a key_padding_mask that is not trailing padding
(or whose float values are not 0 / -inf), and so their sum — is one additive *score bias*
[B, H, Nq, Nk] (torch's canonical form: bool masks become 0 / -inf): the kernels will take
it as an input once the compiler adds one, and until then it is refused with an error
that names the argument and says it needs kernel support. An attn_mask is never
pattern-matched (not even against the causal mask): with attn.MultiheadAttention,
is_causal=True is torch's hint that attn_mask *is* the causal mask, and is taken as such.
"""

import torch
from torch.nn import functional as F

__all__ = ["kernel_masks", "needs_kernel_support"]

SCORE_BIAS = "a score-bias input to the compiled kernels"


def needs_kernel_support(argument, capability):
    """The error for something a torch user may pass that attn kernels cannot run yet:
    it names the argument and the kernel capability it waits for."""
    return NotImplementedError(f"attn: {argument} needs kernel support ({capability}), which "
                               "the compiled attn kernels do not have yet")


def kernel_masks(keys, dtype, attn_mask=None, key_padding_mask=None, is_causal=False,
                 mha=False):
    """(is_causal, key_lengths) for the kernels from torch-style masks, for queries of
    `dtype` and `keys` keys.

    mha: nn.MultiheadAttention's conventions: masks go through torch's F._canonical_mask
    (bool or float only; bool True = masked becomes -inf; its dtype warnings), and
    is_causal=True is the hint that attn_mask is the causal mask. Otherwise
    F.scaled_dot_product_attention's: attn_mask with is_causal=True is an error.
    attn_mask cannot run yet, whatever its values. key_padding_mask [B, Nk] (True or -inf
    = padded): trailing padding runs as key_lengths; the check reads the mask, so it
    happens inside the op key_lengths_from_padding (no graph break under torch.compile),
    and another pattern raises there, at run time."""
    if mha:
        key_padding_mask = F._canonical_mask(
            mask=key_padding_mask, mask_name="key_padding_mask",
            other_type=F._none_or_dtype(attn_mask), other_name="attn_mask", target_type=dtype)
        attn_mask = F._canonical_mask(mask=attn_mask, mask_name="attn_mask", other_type=None,
                                      other_name="", target_type=dtype, check_other=False)
        if is_causal:
            attn_mask = None
    elif attn_mask is not None and is_causal:
        raise RuntimeError("attn: pass either attn_mask or is_causal=True, not both "
                           "(as F.scaled_dot_product_attention)")
    if attn_mask is not None:
        raise needs_kernel_support(
            f"attn_mask (an arbitrary mask of shape {tuple(attn_mask.shape)}; is_causal=True "
            "runs the causal mask)", SCORE_BIAS)
    key_lengths = (None if key_padding_mask is None else
                   torch.ops.attn.key_lengths_from_padding(key_padding_mask, keys))
    return is_causal, key_lengths
