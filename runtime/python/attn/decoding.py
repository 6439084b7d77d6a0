"""Absolute positions and a KV cache for generation (docs/decoding.md).

    cache = attn.KVCache(layers=2, batch=1, heads=4, head_dim=16, capacity=128)
    out, _ = mha(x_prompt, x_prompt, x_prompt, is_causal=True, need_weights=False,
                 kv_cache=cache, layer=0)                   # prefill (or chunks of it)
    ...
    cache.advance()                                         # after every layer appended
    out, _ = mha(x_step, x_step, x_step, is_causal=True, need_weights=False,
                 kv_cache=cache, layer=0)                   # one token per batch entry

Every call of a kernel may say where its rows sit in the sequence: query_start (an int,
or an int64 [B] tensor: one per batch entry) is the absolute position of q's first row
and key_start (likewise) that of k's first row. The regions' i and j are these positions, so a
decoding step sees the positions the model was trained with, and is_causal keeps
j <= i in them.
"""

import torch

__all__ = ["KVCache", "query_start_tensor", "key_start_arguments", "positions_given"]


def _check_int(name, start):
    if isinstance(start, bool) or not isinstance(start, int):
        raise TypeError(f"attn: {name} must be an int or an int64 tensor [B], got "
                        f"{type(start).__name__}")


def query_start_tensor(query_start):
    """The torch ops' query_start: None, or an int64 tensor (0-d for an int)."""
    if query_start is None or isinstance(query_start, torch.Tensor):
        return query_start
    _check_int("query_start", query_start)
    return torch.tensor(query_start, dtype=torch.int64)


def key_start_arguments(key_start):
    """The torch ops' (key_start, key_starts) for a key_start that is an int (it, None) or
    an int64 0-d or [B] tensor, one start per batch entry (0, it)."""
    if isinstance(key_start, torch.Tensor):
        return 0, key_start
    _check_int("key_start", key_start)
    return key_start, None


def positions_given(query_start, key_start):
    """Whether a call names positions: a query_start, or a key_start other than the int 0."""
    return query_start is not None or isinstance(key_start, torch.Tensor) or key_start != 0


class KVCache:
    """Preallocated keys and values of `layers` attention layers, [batch, heads,
    capacity, head_dim] each, and how many positions each batch entry holds (`lengths`,
    int64 [batch] on the CPU).

    A step appends every layer's new keys and values at the entries' current lengths
    (append), attends to the cache over them (the positions below), then moves the
    lengths on once (advance). Entries may hold different lengths (prompts of different
    lengths, each prefilled with its own `counts`): keys past an entry's length are
    masked by key_lengths, and its queries sit at positions lengths[b], lengths[b] + 1, ...
    """

    def __init__(self, layers, batch, heads, head_dim, capacity, value_dim=None,
                 dtype=torch.float32, device=None):
        for name, value in (("layers", layers), ("batch", batch), ("heads", heads),
                            ("head_dim", head_dim), ("capacity", capacity)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"attn.KVCache: {name} must be an int >= 1, got {value!r}")
        value_dim = value_dim or head_dim
        self.capacity = capacity
        self.keys = torch.zeros(layers, batch, heads, capacity, head_dim, dtype=dtype,
                                device=device)
        self.values = torch.zeros(layers, batch, heads, capacity, value_dim, dtype=dtype,
                                  device=device)
        self.lengths = torch.zeros(batch, dtype=torch.int64)
        self._pending = None  # the counts of the step being appended, for advance()

    @property
    def layers(self):
        return self.keys.shape[0]

    def append(self, layer, k, v, counts=None):
        """Writes layer `layer`'s new keys and values k [B, heads, n, head_dim], v [B,
        heads, n, value_dim] at positions lengths[b] ... lengths[b] + n - 1 of each entry
        and returns what the attention call over the cache takes:
            (keys [B, heads, S, head_dim], values [B, heads, S, value_dim],
             query_start int64 [B] = lengths, key_lengths int64 [B] = lengths + counts)
        with S the longest entry's end. counts [B] (default n each): how many of the n
        rows are real for each entry (right-padded chunks); the rows past them are
        written but masked, and the next step overwrites them. The lengths move on at
        advance(), after the step's last layer."""
        if not 0 <= layer < self.layers:
            raise IndexError(f"attn.KVCache: layer {layer} out of range [0, {self.layers})")
        batch, heads, _, head_dim = self.keys.shape[1:]
        if (k.dim() != 4 or v.dim() != 4 or k.shape[:2] != (batch, heads)
                or v.shape[:3] != k.shape[:3] or k.shape[3] != head_dim
                or v.shape[3] != self.values.shape[4]):
            raise RuntimeError(
                f"attn.KVCache.append: expected k [{batch}, {heads}, n, {head_dim}] and v "
                f"[{batch}, {heads}, n, {self.values.shape[4]}], got k {tuple(k.shape)} and v "
                f"{tuple(v.shape)}")
        n = k.shape[2]
        if counts is None:
            counts = torch.full((batch,), n, dtype=torch.int64)
        counts = torch.as_tensor(counts, dtype=torch.int64).cpu()
        if counts.shape != (batch,) or bool((counts < 0).any()) or bool((counts > n).any()):
            raise RuntimeError(f"attn.KVCache.append: counts must be [{batch}] values in "
                               f"[0, {n}], got {counts.tolist()}")
        end = int(self.lengths.max()) + n
        if end > self.capacity:
            raise RuntimeError(f"attn.KVCache.append: {n} new positions after "
                               f"{int(self.lengths.max())} exceed the capacity {self.capacity}")
        if self._pending is not None and not torch.equal(self._pending, counts):
            raise RuntimeError("attn.KVCache.append: the layers of one step must append the "
                               "same counts; call advance() between steps")
        self._pending = counts
        for b, start in enumerate(self.lengths.tolist()):
            self.keys[layer, b, :, start:start + n] = k[b]
            self.values[layer, b, :, start:start + n] = v[b]
        return (self.keys[layer, :, :, :end], self.values[layer, :, :, :end],
                self.lengths.clone(), self.lengths + counts)

    def advance(self):
        """Ends a step: every entry's length grows by the counts appended."""
        if self._pending is None:
            raise RuntimeError("attn.KVCache.advance: nothing was appended since the last step")
        self.lengths += self._pending
        self._pending = None

    def reset(self):
        """Empties the cache (the buffers stay allocated)."""
        self.lengths.zero_()
        self._pending = None
