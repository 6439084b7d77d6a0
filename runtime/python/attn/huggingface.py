"""attn kernels as attention implementations of Hugging Face transformers.

    import attn.huggingface
    attn.huggingface.register("attn_tanhmax", "examples/normalizers/tanhmax.mlir")
    model = LlamaForCausalLM._from_config(config, attn_implementation="attn_tanhmax")

register() adds the kernel to transformers' AttentionInterface (the attention call of
every model written against it: Llama, Mistral, Qwen, GPT-2, ...) and SDPA's mask function
to its AttentionMaskInterface, so transformers builds the masks (causal, padding, sliding
window, chunked, packed sequences, the cache's positions) as for SDPA: a boolean
[B, 1, Nq, Nk] keep table, or none where a plain causal (or no) mask does.

Every call passes absolute positions (docs/decoding.md), so a kernel whose regions read
i or j (ALiBi, SSMax's log n_i, documents, its own causal mask) sees the positions the
model gives its tokens: query row r of batch entry b is at position_ids[b, r] (the
positions transformers passes the attention call; generate() counts them from each
prompt's first token, left padding excluded), and the keys are the cache's, the queries
being its last Nq (transformers' DynamicCache, sliding-window layers included, and a
forward without cache). Left padding thus puts an entry's keys before position 0: those
columns (masked) are cut off, which gives each padding length its own kernel call. The
mask then runs as is_causal where, on the unmasked queries, it is exactly j <= i in
positions, as nothing where it keeps every key, and otherwise as the kernel's attn_mask
input (attn.compile(..., attn_mask="bool")), a table indexed by position.
transformers is not a dependency of attn: import this module only where it is installed.
"""

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from .masks import MASK_INPUT

__all__ = ["register"]


class _Group:
    """One kernel call: the batch entries `entries` (a list), their query rows from
    `first_row` and keys from `first_key` on, at positions query_start (int64 [G]) and
    key_start, with is_causal or the position-indexed keep table `table` (int8, or None)."""

    def __init__(self, entries, first_row, first_key, query_start, key_start):
        self.entries, self.first_row, self.first_key = entries, first_row, first_key
        self.query_start = torch.tensor(query_start, dtype=torch.int64)
        self.key_start = key_start
        self.is_causal, self.table = False, None


def _query_positions(name, position_ids, batch, queries, keys):
    """The positions of the call's queries, int64 [B, Nq] on the CPU: position_ids, or
    without them the last Nq of the Nk key positions 0, 1, ..."""
    if position_ids is None:
        return (torch.arange(queries) + (keys - queries)).expand(batch, queries)
    if (position_ids.dim() != 2 or position_ids.shape[1] != queries
            or position_ids.shape[0] not in (1, batch)):
        raise NotImplementedError(
            f"attn implementation {name!r}: position_ids of shape {tuple(position_ids.shape)}; "
            f"expected [B, Nq] = [{batch}, {queries}] (or [1, {queries}])")
    return position_ids.to("cpu", torch.int64).expand(batch, queries)


def _plan(name, positions, mask, queries, keys, causal):
    """The kernel calls ([_Group]) of a call of `queries` queries at `positions` [B, Nq]
    against `keys` keys under transformers' bool mask [B|1, 1|H, Nq, Nk] (or None)."""
    batch = positions.shape[0]
    if mask is not None:
        mask = mask.to("cpu").expand(batch, -1, queries, keys)
        unmasked = mask.any(dim=3).any(dim=1)  # [B, Nq]: the queries that attend to a key
    else:
        unmasked = torch.ones(batch, queries, dtype=torch.bool)
    groups = {}
    rows = torch.arange(queries)
    for b in range(batch):
        real = rows[unmasked[b]]
        if len(real) == 0:
            continue  # every query of this entry is padding: its output rows are 0
        start = int(positions[b, real[0]]) - int(real[0])
        if not torch.equal(positions[b, real], real + start) or start + int(real[0]) < 0:
            raise NotImplementedError(
                f"attn implementation {name!r}: batch entry {b}'s position_ids over its "
                f"unmasked queries, {positions[b, real].tolist()}, are not consecutive "
                "positions >= 0 (packed sequences restart them): a call passes one query start "
                "per batch entry")
        key_start = start - (keys - queries)  # the queries are the last Nq keys
        first_row, first_key = max(0, -start), max(0, -key_start)
        # A masked token between unmasked ones does not see its own key; when no query
        # does, the queries are not the last keys (a static cache's unfilled slots follow).
        if mask is not None and not mask[b, :, real, keys - queries + real].any():
            raise NotImplementedError(
                f"attn implementation {name!r}: no query of batch entry {b} sees its own key: "
                "the keys are not the cache's positions up to the queries (a static cache?), "
                "which this integration does not derive positions for")
        if first_key and (mask is None or mask[b, :, :, :first_key].any()):
            raise NotImplementedError(
                f"attn implementation {name!r}: batch entry {b}'s queries at positions "
                f"{start}.. put {first_key} of its {keys} keys before position 0 without masking "
                "them: the keys are not the cache's positions up to the queries")
        group = groups.setdefault((first_row, first_key, key_start + first_key),
                                  ([], []))
        group[0].append(b)
        group[1].append(start + first_row)
    plan = [_Group(entries, first_row, first_key, starts, key_start)
            for (first_row, first_key, key_start), (entries, starts) in groups.items()]
    for group in plan:
        if mask is None:
            group.is_causal = causal
            continue
        keep = mask[group.entries][:, :, group.first_row:, group.first_key:]
        real = unmasked[group.entries][:, group.first_row:, None, None].transpose(1, 2)
        i = group.query_start[:, None, None, None] + torch.arange(keep.shape[2])[:, None]
        j = group.key_start + torch.arange(keep.shape[3])
        if ((keep == (j <= i)) | ~real).all():
            group.is_causal = True
        elif not (keep | ~real).all():
            group.table = _position_table(keep, group.query_start, group.key_start)
    return plan


def _position_table(keep, query_start, key_start):
    """The keep table [G, H, rows, Nk] (rows of call positions) as the kernel's mask input,
    read at (b, h, i, j) in positions: [G, H, 1, key_start + Nk] for one query (reads clamp
    the row to 0), else [G, H, max(query_start) + Nq, key_start + Nk]."""
    entries, heads, queries, keys = keep.shape
    if key_start == 0 and (queries == 1 or not query_start.any()):
        return keep.contiguous().view(torch.int8)
    rows = 1 if queries == 1 else int(query_start.max()) + queries
    table = torch.zeros(entries, heads, rows, key_start + keys, dtype=torch.bool)
    for g in range(entries):
        first = 0 if queries == 1 else int(query_start[g])
        table[g, :, first:first + queries, key_start:] = keep[g]
    return table.view(torch.int8)


def register(name, normalizer, *, dtypes=("f32", "f64"), inputs=None):
    """Registers `normalizer` (IR text, a .mlir path or traced IR: what attn.compile
    takes) as transformers' attention implementation `name`; returns the attn.Kernel.
    Models select it with attn_implementation=name (from_config / from_pretrained) or
    model.set_attn_implementation(name). inputs: the kernel's tensor inputs other than the
    mask, a dict name -> tensor (e.g. ALiBi's slopes [H]), passed to every call (float
    ones in q's dtype and on q's device)."""
    from . import compile as compile_kernel

    kernel = compile_kernel(normalizer, dtypes=dtypes, attn_mask="bool")
    fixed_inputs = dict(inputs or {})
    if MASK_INPUT in fixed_inputs:
        raise ValueError(f"attn.huggingface.register: inputs= names {MASK_INPUT!r}, the mask "
                         "input, which transformers' masks fill")
    last = {}  # the plan of the last call: every layer of a forward shares its mask

    def plan_for(positions_key, mask, batch, queries, keys, causal):
        key = (batch, queries, keys, causal)
        if last.get("key") == key and last["positions"] is positions_key and last["mask"] is mask:
            return last["plan"]
        positions = _query_positions(name, positions_key, batch, queries, keys)
        plan = _plan(name, positions, mask, queries, keys, causal)
        last.update(key=key, positions=positions_key, mask=mask, plan=plan)
        return plan

    def forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                is_causal=None, position_ids=None, **kwargs):
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
        if attention_mask is not None and attention_mask.dtype != torch.bool:
            raise NotImplementedError(
                f"attn implementation {name!r}: a {attention_mask.dtype} attention mask; "
                "expected transformers' bool mask (the SDPA mask function register() sets)")
        batch, heads, queries, _ = query.shape
        keys = key.shape[2]
        # A mask, when transformers gives one, is the whole mask (causal included); without
        # one the call is causal where the module is, in positions: the queries see the
        # keys up to their own, wherever the cache starts.
        causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
        plan = plan_for(position_ids, attention_mask, batch, queries, keys, causal)
        if scaling is not None:
            factor = kernel.query_factor(scaling, query.shape[-1])
            if factor != 1.0:
                query = query * factor
        given = {n: (t.to(query.device, query.dtype) if t.is_floating_point() else
                     t.to(query.device)) for n, t in fixed_inputs.items()}
        keep_all = torch.ones(1, 1, 1, 1, dtype=torch.int8, device=query.device)
        parts, order = [], []
        for group in plan:
            whole = len(group.entries) == batch
            index = torch.tensor(group.entries, device=query.device)
            q, k, v = ((t if whole else t.index_select(0, index)) for t in (query, key, value))
            table = keep_all if group.table is None else group.table.to(query.device)
            out = kernel(q[:, :, group.first_row:], k[:, :, group.first_key:],
                         v[:, :, group.first_key:], None, group.is_causal, None,
                         {**given, MASK_INPUT: table}, query_start=group.query_start,
                         key_start=group.key_start)
            if group.first_row:  # rows before position 0: padding, whose output is 0
                out = torch.nn.functional.pad(out, (0, 0, group.first_row, 0))
            parts.append(out)
            order += group.entries
        if order == list(range(batch)):
            out = parts[0] if len(parts) == 1 else torch.cat(parts)
        else:  # entries of several calls, or fully padded ones (0)
            out = query.new_zeros(batch, heads, queries, value.shape[-1])
            out = out.index_put((torch.tensor(order, device=query.device),), torch.cat(parts)) \
                if parts else out
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register(name, forward)
    AttentionMaskInterface.register(name, sdpa_mask)
    return kernel
