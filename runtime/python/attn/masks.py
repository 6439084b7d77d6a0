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

__all__ = ["kernel_masks", "needs_kernel_support"]

SCORE_BIAS = "a score-bias input to the compiled kernels"


def needs_kernel_support(argument, capability):
    """The error for something a torch user may pass that attn kernels cannot run yet:
    it names the argument and the kernel capability it waits for."""
    return NotImplementedError(f"attn: {argument} needs kernel support ({capability}), which "
                               "the compiled attn kernels do not have yet")


def kernel_masks(keys, attn_mask=None, key_padding_mask=None, is_causal=False,
                 is_causal_is_hint=False):
    """(is_causal, key_lengths) for the kernels from torch-style masks.

    keys: Nk. attn_mask: None or a mask in either of torch's conventions (it cannot run
    yet whatever its values). key_padding_mask: None, bool [B, Nk] (True = padded) or
    additive float [B, Nk] (0 kept, -inf padded): trailing padding runs as key_lengths;
    the check reads the mask, so it happens inside the op key_lengths_from_padding (no
    graph break under torch.compile) and another pattern raises there, at run time.
    is_causal_is_hint: is_causal=True asserts that attn_mask is the causal mask
    (nn.MultiheadAttention's convention); otherwise the two together are an error, as
    in F.scaled_dot_product_attention."""
    if attn_mask is not None and is_causal:
        if not is_causal_is_hint:
            raise RuntimeError("attn: pass either attn_mask or is_causal=True, not both "
                               "(as F.scaled_dot_product_attention)")
        attn_mask = None
    if attn_mask is not None:
        raise needs_kernel_support(
            f"attn_mask (an arbitrary {attn_mask.dtype} mask of shape {tuple(attn_mask.shape)}"
            "; is_causal=True runs the causal mask)", SCORE_BIAS)
    key_lengths = (None if key_padding_mask is None else
                   torch.ops.attn.key_lengths_from_padding(key_padding_mask, keys))
    return is_causal, key_lengths
