"""Context parallelism: one sequence sharded over the ranks of a torch.distributed group,
attention by a ring of key/value blocks, for every online and plain normalizer
(docs/context-parallel.md).

Each rank holds a shard of the sequence's queries, keys and values (dim 2 of
[B, H, N, d]). Forward: the key/value blocks travel around the ring (isend/irecv of the
next block while the kernel runs on the current one); each rank keeps the partial row
state of its queries against every block (the artifact's split-K `partial` mode:
unnormalised Σ g·v, the shift, Σ h, the kept keys' count) and merges them with the
artifact's own merge (attn_merge_T: the online rescale, the row offset β once, C,
O/C), exactly as split-K does on one machine. Backward: the blocks travel again with
their dK/dV accumulators, each rank adding its queries' share; dq stays local; the
row offset's share goes to each query piece's call with the sequence's first key
piece only; learnable params and replicated tables are all-gathered and summed in rank
order, so the gradients are the same bits run to run for a given world size.

Positions: every call gets its query piece's and key piece's first positions as the
ops' query_start / key_start (attn-abi 8), so every region sees the whole sequence's
i and j: masks compiled into the kernel (sliding window, documents, prefix-LM),
scores that read i or j (ALiBi, relative biases) and is_causal (j <= i, applied in
every pair) are exact on any shard. With is_causal, key pieces wholly after a query
piece are skipped. A tensor input with a dim named Nq or Nk is passed as the rank's
shard along that dim; the ring gathers the whole sequence's table once per pass,
because a region may read it at i and at j (the ops take tables longer than a block),
and its gradient is summed over the ranks before each keeps its shard.

Layouts (`layout=`): "contiguous" gives rank r positions [r·N/P, (r+1)·N/P);
"load_balanced" gives it chunks r and 2P−1−r of 2P equal chunks, so that with a causal
mask every rank has the same work. A rank's shard is a list of pieces (one, or two),
each with its start position.
"""

import torch
import torch.distributed as dist

__all__ = ["LAYOUTS", "sequence_pieces", "shard", "unshard", "context_parallel_attention",
           "ContextParallel"]

LAYOUTS = ("contiguous", "load_balanced")


def _group_size_rank(group):
    return dist.get_world_size(group), dist.get_rank(group)


def sequence_pieces(length, world, rank, layout="contiguous"):
    """The pieces of the sequence [0, length) that `rank` of `world` holds, in the order
    its shard concatenates them: a list of (start, size)."""
    if layout not in LAYOUTS:
        raise ValueError(f"attn.context_parallel: layout {layout!r}, expected one of {LAYOUTS}")
    chunks = world if layout == "contiguous" else 2 * world
    if length % chunks:
        raise ValueError(f"attn.context_parallel: a sequence of {length} positions does not split "
                         f"into {chunks} equal chunks ({layout} layout over {world} ranks); pad it "
                         f"to a multiple of {chunks}")
    size = length // chunks
    if layout == "contiguous":
        return [(rank * size, size)]
    return [(rank * size, size), ((chunks - 1 - rank) * size, size)]


def shard(x, dim=2, group=None, layout="contiguous"):
    """This rank's shard of the full tensor `x` along `dim` (the sequence)."""
    world, rank = _group_size_rank(group)
    return torch.cat([x.narrow(dim, start, size)
                      for start, size in sequence_pieces(x.shape[dim], world, rank, layout)], dim)


def unshard(local, dim=2, group=None, layout="contiguous"):
    """The full tensor from every rank's shard `local` (all-gathered; no autograd)."""
    world, _ = _group_size_rank(group)
    shards = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(shards, local.contiguous(), group=group)
    length = local.shape[dim] * world
    full = local.new_empty((*local.shape[:dim], length, *local.shape[dim + 1:]))
    for rank, part in enumerate(shards):
        at = 0
        for start, size in sequence_pieces(length, world, rank, layout):
            full.narrow(dim, start, size).copy_(part.narrow(dim, at, size))
            at += size
    return full


class _Pieces:
    """The pieces of one rank's shard: (start position, offset in the shard, size)."""

    def __init__(self, length, world, rank, layout):
        self.items, at = [], 0
        for start, size in sequence_pieces(length, world, rank, layout):
            self.items.append((start, at, size))
            at += size


class _Inputs:
    """The kernel's tensor inputs by role: 'position' (a dim named Nq or Nk: each rank
    passes its shard along that dim, and the ring gathers the whole sequence's table,
    which the blocks read at absolute positions i and j alike) or 'replicated' (every
    rank passes the whole tensor)."""

    def __init__(self, kernel, tensors):
        self.roles, self.dims = [], []
        for declared, t in zip(kernel.inputs, tensors):
            shape = declared["shape"]
            sequence = [d for d, e in enumerate(shape) if e in ("Nq", "Nk")]
            if len(sequence) > 1:
                raise RuntimeError(
                    f"attn.context_parallel: input {declared['name']} of kernel {kernel.name} has "
                    f"extents {shape}: a table over both queries and keys (or one sequence dim "
                    "twice) cannot be sharded with the sequence; pass it per query and per key "
                    "instead")
            self.roles.append("position" if sequence else "replicated")
            self.dims.append(sequence[0] if sequence else None)
        self.learnable = [i["learnable"] for i in kernel.inputs]

    def of(self, kind):
        return [n for n, role in enumerate(self.roles) if role == kind]

    def whole(self, tensors, group, layout):
        """The inputs as every block's call takes them: the position tables gathered
        into the whole sequence's (in position order), the others as they are."""
        return [unshard(t, dim, group, layout) if role == "position" else t
                for t, role, dim in zip(tensors, self.roles, self.dims)]


def _key_lengths(key_lengths, k_piece):
    """The global key lengths [B] as a key piece's own: keys at or past L masked."""
    if key_lengths is None:
        return None
    start, _, size = k_piece
    return (key_lengths - start).clamp(0, size)


class _Ring:
    """Point-to-point exchange with the ring's neighbours: send to rank + 1, receive
    from rank − 1 (ranks of `group`, tags per tensor)."""

    def __init__(self, group):
        self.group = group
        self.world, self.rank = _group_size_rank(group)
        to_global = (lambda r: r) if group is None else (lambda r: dist.get_global_rank(group, r))
        self.next = to_global((self.rank + 1) % self.world)
        self.prev = to_global((self.rank - 1) % self.world)

    def start(self, tensors, tag=0):
        """Starts sending `tensors` and receiving their likes, tagged tag, tag + 1, ...
        (exchanges in flight together need tags apart): (received, in flight), the
        latter for wait(), holding the sent tensors until then."""
        sends = [t.contiguous() for t in tensors]
        received = [torch.empty_like(t) for t in sends]
        requests = [dist.isend(t, self.next, group=self.group, tag=tag + n)
                    for n, t in enumerate(sends)]
        requests += [dist.irecv(t, self.prev, group=self.group, tag=tag + n)
                     for n, t in enumerate(received)]
        return received, (requests, sends)

    @staticmethod
    def wait(*in_flight):
        for requests, _ in in_flight:
            for r in requests:
                r.wait()

    def around(self, steps, block, carried=None):
        """The ring: for each step yields (its calls, the block in hand) while the next
        block is in flight. `carried` (a list, or None): accumulators travelling with
        the block, added to in place during the step and sent on after it; once the
        ring is done the list holds those of this rank's own block, home again."""
        for step, calls in enumerate(steps):
            in_flight = []
            if step + 1 < self.world:
                incoming, sending = self.start(block)
                in_flight.append(sending)
            yield calls, block
            if carried is not None and self.world > 1:
                carried[:], sending = self.start(carried, tag=len(block))
                in_flight.append(sending)
            self.wait(*in_flight)
            if step + 1 < self.world:
                block = incoming


def _plan(length, world, rank, layout, causal):
    """The calls of each ring step: step t runs this rank's query pieces against the
    pieces of rank (rank − t) mod P, but for key pieces wholly after the query piece
    when causal (the pieces are chunks of one size: a later start is wholly after). A
    list per step of (q piece, k piece, row offset): the row offset's share of the
    backward goes to each query piece's call with the first key piece (position 0,
    which no causal mask hides)."""
    mine = _Pieces(length, world, rank, layout).items
    steps = []
    for step in range(world):
        theirs = _Pieces(length, world, (rank - step) % world, layout).items
        steps.append([(qp, kp, kp[0] == 0) for qp in mine for kp in theirs
                      if not causal or kp[0] <= qp[0]])
    return mine, steps


def _ring_of(setup, kernel, q, inputs):
    """(ring, this rank's query pieces, the steps' calls, the inputs' roles, the inputs
    as the blocks' calls take them) of a call."""
    group, layout, causal, _, _ = setup
    ring = _Ring(group)
    mine, steps = _plan(q.shape[2] * ring.world, ring.world, ring.rank, layout, causal)
    roles = _Inputs(kernel, inputs)
    return ring, mine, steps, roles, roles.whole(inputs, group, layout)


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, artifact, kernel, setup, q, k, v, params, *inputs):
        _, _, causal, key_lengths, _ = setup
        ring, mine, steps, _, whole = _ring_of(setup, kernel, q, inputs)
        # Each query piece's partial states, one per block it sees, in the layout the
        # merge takes: state s in rows [s·n, (s+1)·n) of [B, H, S·n(, dv)].
        states = {}
        for qp in mine:
            count = sum(call[0] == qp for calls in steps for call in calls) * qp[2]
            states[qp] = [q.new_empty((*q.shape[:2], count, v.shape[3])),
                          *[q.new_empty((*q.shape[:2], count)) for _ in range(3)]]
        filled = dict.fromkeys(mine, 0)
        for calls, (bk, bv) in ring.around(steps, [k, v]):
            for qp, kp, _ in calls:
                state = torch.ops.attn.attention_partial_forward(
                    artifact, q.narrow(2, qp[1], qp[2]), bk.narrow(2, kp[1], kp[2]),
                    bv.narrow(2, kp[1], kp[2]), params, causal, _key_lengths(key_lengths, kp),
                    whole, qp[0], kp[0])
                for part, t in zip(states[qp], state):
                    part.narrow(2, filled[qp], qp[2]).copy_(t)
                filled[qp] += qp[2]
        out = q.new_empty((*q.shape[:3], v.shape[3]))
        row_max = q.new_empty(q.shape[:3])
        row_sum = q.new_empty(q.shape[:3])
        for qp in mine:
            rows = lambda t: t.narrow(2, qp[1], qp[2])
            o, m, s = torch.ops.attn.attention_merge(
                artifact, rows(q), rows(k), rows(v), params, *states.pop(qp), None, whole,
                qp[0], qp[0])
            rows(out).copy_(o)
            rows(row_max).copy_(m)
            rows(row_sum).copy_(s)
        ctx.save_for_backward(q, k, v, params, out, row_max, row_sum, *inputs)
        ctx.setup, ctx.artifact, ctx.kernel = setup, artifact, kernel
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, params, out, row_max, row_sum, *inputs = ctx.saved_tensors
        group, layout, causal, key_lengths, reduce_params = ctx.setup
        artifact, kernel = ctx.artifact, ctx.kernel
        ring, _, steps, roles, whole = _ring_of(ctx.setup, kernel, q, inputs)
        grad_out = grad_out.contiguous()
        dq = torch.zeros_like(q)
        dparams = torch.zeros_like(params)
        # The learnable inputs' gradients over the whole tables the calls read.
        dwhole = [torch.zeros_like(t) if learnable else None
                  for t, learnable in zip(whole, roles.learnable)]
        # dk, dv of the block in hand, travelling with it.
        acc = [torch.zeros_like(k), torch.zeros_like(v)]
        for calls, (bk, bv) in ring.around(steps, [k, v], acc):
            for qp, kp, row_offset in calls:
                rows = lambda t: t.narrow(2, qp[1], qp[2])
                keys = lambda t: t.narrow(2, kp[1], kp[2])
                gq, gk, gv, gp, gi = torch.ops.attn.attention_partial_backward(
                    artifact, rows(q), keys(bk), keys(bv), params, rows(out), rows(row_max),
                    rows(row_sum), rows(grad_out), row_offset, causal,
                    _key_lengths(key_lengths, kp), whole, qp[0], kp[0])
                rows(dq).add_(gq)
                keys(acc[0]).add_(gk)
                keys(acc[1]).add_(gv)
                dparams.add_(gp)
                for total, g in zip(dwhole, gi):
                    if total is not None:
                        total.add_(g)
        dk, dv = acc
        # A position table's gradient comes from every rank's queries (they read it at
        # i and j): summed over the ranks, each keeps its shard. Params and replicated
        # tables only when reduce_params.
        positions = [n for n in roles.of("position") if roles.learnable[n]]
        replicated = ([n for n in roles.of("replicated") if roles.learnable[n]]
                      if reduce_params else [])
        if reduce_params:
            dparams, *summed = _sum_in_rank_order(
                [dparams, *[dwhole[n] for n in positions + replicated]], group)
        else:
            summed = _sum_in_rank_order([dwhole[n] for n in positions], group)
        for n, g in zip(positions + replicated, summed):
            dwhole[n] = g
        dinputs = [shard(g, roles.dims[n], group, layout) if n in positions else g
                   for n, g in enumerate(dwhole)]
        return (None, None, None, dq, dk, dv, dparams if ctx.needs_input_grad[6] else None,
                *[g if ctx.needs_input_grad[7 + n] else None for n, g in enumerate(dinputs)])


def _sum_in_rank_order(tensors, group):
    """Each tensor summed over the ranks, rank 0 first: the same bits on every rank and
    every run (an all-reduce's order is the backend's)."""
    if not tensors:
        return []
    flat = torch.cat([t.reshape(-1) for t in tensors])
    world, _ = _group_size_rank(group)
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat, group=group)
    total = gathered[0].clone()
    for part in gathered[1:]:
        total.add_(part)
    out, at = [], 0
    for t in tensors:
        out.append(total[at:at + t.numel()].view_as(t))
        at += t.numel()
    return out


def _without_partial_calls(algorithm):
    """Why a kernel whose manifest's splits.partial_calls is false takes no key blocks, in
    the words of its algorithm: the name explains the refusal, the splits decide it."""
    if algorithm == "kernelised":
        return (" is kernelised (linear attention): its forward has no partial row state to "
                "merge across ranks; context parallelism for it needs prefix sums of psi(k) v^T "
                "across ranks, which attn does not implement. Run it unsharded, or compile a "
                "non-kernelised normalizer")
    if algorithm == "scan":
        return (" is a scan normalizer (stick-breaking): a row's weights depend on the "
                "log-survivals of every key after them, so a rank's key block has no partial "
                "state to merge; run it unsharded")
    if algorithm == "implicit":
        return (" is implicit (sparsemax/entmax-like): its threshold tau_i is solved over all "
                "of a row's keys, so a rank's key block has no partial row state to merge. Run "
                "it unsharded")
    return (" takes no key blocks from its caller (its manifest's splits.partial_calls is "
            "false); run it unsharded")


def context_parallel_attention(q, k, v, kernel, params=None, *, is_causal=False,
                               key_lengths=None, inputs=None, group=None, layout="contiguous",
                               reduce_params=True):
    """The local shard of O for the local shards q [B, H, N/P, d], k [B, H_kv, N/P, d],
    v [B, H_kv, N/P, dv] of a sequence of N positions over the P ranks of `group` (None:
    the default group), sharded by `layout` (see shard). Autograd reaches q, k, v,
    params and the learnable inputs.

    kernel: an attn.Kernel (or anything attn.kernel_of takes) whose manifest's
    splits.partial_calls is true (online or plain; a kernelised, scan or implicit one is
    refused). is_causal: causal over the whole sequence's
    positions.
    key_lengths: int64 [B], keys at or past key_lengths[b] (whole-sequence positions)
    are masked. inputs (dict or list, as Kernel takes them): a tensor with a dim named
    Nq or Nk is this rank's shard along that dim (shard(t, dim)); others are whole and
    equal on every rank. Every rank must call this with the same shapes, kernel and
    arguments: the ranks exchange blocks in lockstep.

    Gradients are those of the sum of every rank's loss. reduce_params=True: params and
    the learnable whole (replicated) inputs get the sum over the ranks, rank 0 first
    (the same on every rank, run to run); False: each rank keeps the share of its own
    queries, for a data-parallel wrapper (DDP, FSDP) that reduces them with the model's
    other parameters (use a separate process group for `group` then, so that its
    all-reduces never interleave with the ring's messages)."""
    from . import kernel_of

    kernel = kernel_of(kernel)
    if not kernel.manifest["splits"]["partial_calls"]:
        raise RuntimeError(f"attn.context_parallel: kernel {kernel.name}"
                           + _without_partial_calls(kernel.manifest["algorithm"]))
    world, _ = _group_size_rank(group)
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise RuntimeError("attn.context_parallel: q, k and v must be [B, H, N/P, d] shards, got "
                           f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if k.shape[2] != q.shape[2] or v.shape[2] != q.shape[2]:
        raise RuntimeError(
            "attn.context_parallel: q, k and v must be shards of one sequence (self-attention: "
            f"the same positions), got {q.shape[2]}, {k.shape[2]} and {v.shape[2]} positions")
    sequence_pieces(q.shape[2] * world, world, 0, layout)  # the layout fits the length
    if key_lengths is not None:
        key_lengths = key_lengths.to(device="cpu", dtype=torch.int64)
    tensors = kernel._inputs(inputs)
    roles = _Inputs(kernel, tensors)
    for n in roles.of("position"):
        declared, dim = kernel.inputs[n], roles.dims[n]
        if tensors[n].shape[dim] != q.shape[2]:
            raise RuntimeError(
                f"attn.context_parallel: input {declared['name']} has {tensors[n].shape[dim]} "
                f"positions in dim {dim} (declared {declared['shape'][dim]}), expected this "
                f"rank's shard of {q.shape[2]}: pass shard(t, {dim}) of the whole sequence's "
                "table")
    params = kernel._params(params, q)
    setup = (group, layout, bool(is_causal), key_lengths, bool(reduce_params))
    return _RingAttention.apply(kernel.artifact_for(q), kernel, setup, q, k, v, params, *tensors)


class ContextParallel:
    """How attn.MultiheadAttention(context_parallel=...) shards its sequence: the group,
    the layout and reduce_params of context_parallel_attention."""

    def __init__(self, group=None, layout="contiguous", reduce_params=True):
        if layout not in LAYOUTS:
            raise ValueError(f"attn.context_parallel: layout {layout!r}, expected one of {LAYOUTS}")
        self.group, self.layout, self.reduce_params = group, layout, reduce_params

    def check_module_call(self, attn_mask, key_padding_mask, need_weights):
        given = [name for name, value in (("attn_mask", attn_mask),
                                          ("key_padding_mask", key_padding_mask))
                 if value is not None]
        if need_weights:
            given.append("need_weights=True")
        if given:
            raise RuntimeError(
                f"attn.MultiheadAttention with context parallelism: {', '.join(given)} would "
                "span the ranks' shards and is not supported; pass need_weights=False and no "
                "masks but is_causal (or a kernel input sharded with the sequence)")

    def __call__(self, q, k, v, kernel, params=None, **options):
        return context_parallel_attention(q, k, v, kernel, params, group=self.group,
                                          layout=self.layout, reduce_params=self.reduce_params,
                                          **options)

    def __repr__(self):
        return f"ContextParallel(layout={self.layout!r}, reduce_params={self.reduce_params})"
