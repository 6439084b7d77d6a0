"""Context parallelism (attn.context_parallel) on CPU with gloo, 2 and 4 processes started
by the test: each rank's shard of O and of every gradient (q, k, v, params, learnable
tables sharded with the queries, with the keys, or whole) equals that shard of one
process's call on the whole sequence, float64 to 1e-12 and float32 to 2e-4, for softmax,
TanhMax, sinks with learnable tables (online with a row offset), sigmoid (plain), ReLU
(count denominator) and MultiMax's learnable params, causal (contiguous and load-
balanced layouts), with GQA and key padding; and what reads positions: sliding window with
sinks, documents (ids passed whole, or sharded with the keys and read at i and j),
prefix-LM, ALiBi (a score of i − j, causal and not), FoX's learnable table over the
queries read at i and j. Then one training step of a small model
under DDP with context parallelism against one process on the whole sequence. One
spawn per world size runs every case; a deadline kills the workers, so nothing hangs."""
import copy
import datetime
import json
import os

import pytest
import torch
import torch.distributed as dist
from torch import nn

from conftest import EXAMPLES, compile_source
from helpers import free_port, run_workers

DEADLINE_S = 240
CHUNK = 7  # positions per chunk: N = 7·P (contiguous) or 14·P (load-balanced), odd on purpose

TABLES_IR = """
attn.input @rows learnable : tensor<?x?x?xf32> dims(B, H, Nq)
attn.input @keys learnable : tensor<?x?xf32> dims(Hkv, Nk)
attn.input @sinks learnable : tensor<?xf32> dims(H)

attn.score @s contract scaled_dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %r = attn.read @rows[%b, %h, %i] : f32
  %k = attn.read @keys[%h, %j] : f32
  %t = arith.addf %s, %r : f32
  %u = arith.addf %t, %k : f32
  attn.yield %u : f32
}

attn.normalizer @softmax_sinks {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %sink = attn.read @sinks[%h] : f32
    %e = math.exp %sink : f32
    attn.yield %e : f32
  }
}

attn.kernel @tables_attention normalizer(@softmax_sinks) score(@s)
"""

# The softmax normalizer of examples/normalizers/softmax.mlir, without its kernel.
SOFTMAX = (EXAMPLES / "softmax.mlir").read_text().split("attn.kernel")[0]

# ALiBi without a mask: every (query, key) pair reads i − j, keys after the queries too.
ALIBI_IR = """
attn.input @slopes learnable : tensor<?xf32> dims(H)

attn.score @alibi contract scaled_dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %slope = attn.read @slopes[%h] : f32
  %delta = arith.subi %i, %j : index
  %delta64 = arith.index_cast %delta : index to i64
  %distance = arith.sitofp %delta64 : i64 to f32
  %penalty = arith.mulf %slope, %distance : f32
  %biased = arith.subf %s, %penalty : f32
  attn.yield %biased : f32
}

{SOFTMAX}
attn.kernel @alibi_both_ways normalizer(@softmax) score(@alibi)
""".replace("{SOFTMAX}", SOFTMAX)

# Document ids over the keys (a dim named Nk, sharded with the sequence), read at i too.
DOC_KEYS_IR = """
attn.input @doc : tensor<?x?xi64> dims(B, Nk)

attn.mask @same_document {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %di = attn.read @doc[%b, %i] : i64
  %dj = attn.read @doc[%b, %j] : i64
  %keep = arith.cmpi eq, %di, %dj : i64
  attn.yield %keep : i1
}

{SOFTMAX}
attn.kernel @documents_over_keys normalizer(@softmax) mask(@same_document)
""".replace("{SOFTMAX}", SOFTMAX)

# name: (kernel, dtype, is_causal, layout, heads of k/v, key padding, learnable params)
CASES = {
    "softmax": ("softmax", torch.float64, False, "contiguous", 2, False, False),
    "softmax_causal_balanced": ("softmax", torch.float64, True, "load_balanced", 2, False, False),
    "softmax_f32_causal": ("softmax", torch.float32, True, "contiguous", 2, False, False),
    "tanhmax_causal": ("tanhmax", torch.float64, True, "load_balanced", 2, False, False),
    "sinks_tables": ("tables", torch.float64, True, "load_balanced", 1, False, False),
    "sinks_tables_f32": ("tables", torch.float32, False, "contiguous", 2, True, False),
    "sigmoid_plain": ("sigmoid", torch.float64, False, "load_balanced", 2, True, True),
    "relu_count": ("relu", torch.float64, True, "contiguous", 2, False, False),
    "multimax_params": ("multimax", torch.float64, True, "load_balanced", 2, False, True),
    "softmax_gqa_padding": ("softmax", torch.float64, False, "load_balanced", 1, True, False),
    "window_sinks": ("window_sinks", torch.float64, False, "load_balanced", 2, False, False),
    "window_sinks_f32_causal": ("window_sinks", torch.float32, True, "contiguous", 2, True,
                                False),
    "documents": ("documents", torch.float64, False, "contiguous", 2, True, False),
    "documents_over_keys": ("doc_keys", torch.float64, True, "load_balanced", 1, False, False),
    "prefix_lm": ("prefix_lm", torch.float64, False, "load_balanced", 2, False, False),
    "alibi_both_ways": ("alibi_both_ways", torch.float64, False, "load_balanced", 2, True,
                        False),
    "alibi_f32": ("alibi_both_ways", torch.float32, False, "contiguous", 2, False, False),
    "alibi_causal_param": ("alibi", torch.float64, True, "load_balanced", 2, False, True),
    "fox_table": ("fox", torch.float64, False, "contiguous", 2, False, False),
}
TOLERANCE = {torch.float64: 1e-12, torch.float32: 2e-4}
B, H, D = 2, 2, 8


def _full_problem(kernel, dtype, positions, kv_heads, padding, learn_params):
    """The whole sequence's tensors (the same on every rank: one seed)."""
    g = torch.Generator().manual_seed(positions)
    rand = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)
    t = {"q": rand(B, H, positions, D), "k": rand(B, kv_heads, positions, D),
         "v": rand(B, kv_heads, positions, D), "weight": rand(B, H, positions, D)}
    if learn_params:   # away from the initial values: every branch in play
        t["params"] = kernel.initial_params(dtype) + 0.1 * rand(len(kernel.initial_params()))
    tables = {}
    for declared in kernel.inputs:
        sizes = {"B": B, "H": H, "Hkv": kv_heads, "Nq": positions, "Nk": positions,
                 None: positions}
        shape = [sizes[e] for e in declared["shape"]]
        if declared["name"] == "doc":  # documents of a few positions, across the pieces
            tables["doc"] = (torch.rand(*shape, generator=g) < 0.3).cumsum(-1)
        elif declared["name"] == "prefix":
            tables["prefix"] = torch.tensor([positions // 3, positions - 5])
        else:
            tables[declared["name"]] = 0.5 * rand(*shape)
    t["key_lengths"] = (torch.tensor([positions - 3, positions // 2]) if padding else None)
    return t, tables


def _sequence_dim(declared):
    return next((d for d, e in enumerate(declared["shape"]) if e in ("Nq", "Nk")), None)


def _check_case(kernel, case, group, world, rank):
    """Max |error| / tolerance over O and every gradient of this rank's shard."""
    from attn import context_parallel as cp

    name, dtype, causal, layout, kv_heads, padding, learn_params = case
    positions = CHUNK * world * (2 if layout == "load_balanced" else 1)
    full, tables = _full_problem(kernel, dtype, positions, kv_heads, padding, learn_params)
    leaves = {n: full[n].clone().requires_grad_() for n in ("q", "k", "v")}
    if learn_params:
        leaves["params"] = full["params"].clone().requires_grad_()
    learnable = {d["name"] for d in kernel.inputs if d["learnable"]}
    leaves.update({n: t.clone().requires_grad_(n in learnable) for n, t in tables.items()})
    out = kernel(leaves["q"], leaves["k"], leaves["v"], leaves.get("params"), causal,
                 full["key_lengths"], {n: leaves[n] for n in tables})
    (out * full["weight"]).sum().backward()
    want = {"out": out.detach(), **{n: t.grad for n, t in leaves.items() if t.requires_grad}}

    local = lambda t, dim=2: cp.shard(t, dim, group, layout)
    mine = {n: local(full[n]).requires_grad_() for n in ("q", "k", "v")}
    if learn_params:
        mine["params"] = full["params"].clone().requires_grad_()
    dims = {d["name"]: _sequence_dim(d) for d in kernel.inputs}
    for n, t in tables.items():
        mine[n] = (t.clone() if dims[n] is None else local(t, dims[n])).requires_grad_(
            n in learnable)
    got_out = cp.context_parallel_attention(
        mine["q"], mine["k"], mine["v"], kernel, mine.get("params"), is_causal=causal,
        key_lengths=full["key_lengths"], inputs={n: mine[n] for n in tables}, group=group,
        layout=layout)
    (got_out * local(full["weight"])).sum().backward()
    got = {"out": got_out.detach(), **{n: t.grad for n, t in mine.items() if t.requires_grad}}
    worst = 0.0
    for n, w in want.items():
        if n in ("q", "k", "v", "out"):
            w = local(w)
        elif n in dims and dims[n] is not None:
            w = local(w, dims[n])
        error = ((got[n] - w).abs() / (1 + w.abs())).max().item()
        assert w.abs().max() > 0, f"{name}: the gradient of {n} is zero: the case tests nothing"
        worst = max(worst, error / TOLERANCE[dtype])
    return worst


def _worker(rank, world, port, artifacts, outdir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    try:
        import attn

        kernels = {n: attn.load(p) for n, p in artifacts.items()}
        results = {name: _check_case(kernels[case[0]], (name, *case[1:]), None, world, rank)
                   for name, case in CASES.items()}
        results["ddp_step"] = _ddp_step(kernels["multimax"], world, rank)
        results["module"] = _module_case(kernels["multimax"], world)
        results["whole_table_refused"] = _refuses_whole_table(kernels["fox"])
        with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
            json.dump(results, f)
    finally:
        dist.destroy_process_group()
    os._exit(0)  # as test_distributed.py: no teardown of torch.distributed's threads


class _Model(nn.Module):
    """x [B, N, 16] -> projections -> attention over the sequence -> projection."""

    def __init__(self, kernel):
        super().__init__()
        torch.manual_seed(0)
        self.qkv = nn.Linear(16, 48, dtype=torch.float64)
        self.out = nn.Linear(16, 16, dtype=torch.float64)
        self.normalizer = nn.Parameter(kernel.initial_params(torch.float64) + 0.1)
        self.kernel = kernel

    def forward(self, x, attend):
        q, k, v = self.qkv(x).view(x.shape[0], x.shape[1], 3, 2, 8).permute(2, 0, 3, 1, 4)
        o = attend(q, k, v, self.normalizer)
        return self.out(o.transpose(1, 2).reshape(x.shape[0], x.shape[1], 16))


def _ddp_step(kernel, world, rank):
    """One SGD step under DDP with context parallelism over a separate group of the same
    ranks, against one process on the whole sequence; max |Δweight| relative."""
    from attn import context_parallel as cp

    positions = 2 * CHUNK * world
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, positions, 16, generator=g, dtype=torch.float64)
    y = torch.randn(2, positions, 16, generator=g, dtype=torch.float64)
    reference = _Model(kernel)
    loss = (reference(x, lambda q, k, v, p: kernel(q, k, v, p, True)) - y).pow(2).mean()
    loss.backward()
    torch.optim.SGD(reference.parameters(), lr=0.1).step()

    cp_group = dist.new_group(list(range(world)))
    model = nn.parallel.DistributedDataParallel(_Model(kernel))
    layout = "load_balanced"
    attend = lambda q, k, v, p: cp.context_parallel_attention(
        q, k, v, kernel, p, is_causal=True, group=cp_group, layout=layout, reduce_params=False)
    local = lambda t: cp.shard(t, 1, cp_group, layout)
    # DDP averages over the ranks: each rank's loss is its tokens' share of the global
    # mean, times the world size.
    shard_loss = (model(local(x), attend) - local(y)).pow(2).sum() * world / y.numel()
    shard_loss.backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    worst = 0.0
    for (n, want), got in zip(reference.named_parameters(), model.module.parameters()):
        moved = (want - _Model(kernel).state_dict()[n]).abs().max().item()
        assert moved > 0, n
        worst = max(worst, ((got - want).abs() / (1 + want.abs())).max().item() / 1e-12)
    return worst


def _refuses_whole_table(kernel):
    """A table over the positions passed whole instead of as the rank's shard is refused
    on every rank before any message, naming the input: 0; otherwise pytest.raises ends
    the worker, and the spawn fails the test."""
    from attn.context_parallel import context_parallel_attention

    q = torch.randn(1, 2, 4, 8)
    world = dist.get_world_size()
    with pytest.raises(RuntimeError, match=r"input c has %d positions in dim 2 \(declared Nq\), "
                                           r"expected this rank's shard of 4" % (4 * world)):
        context_parallel_attention(q, q, q, kernel, inputs={"c": torch.zeros(1, 2, 4 * world)})
    return 0.0


def _module_case(kernel, world):
    """attn.MultiheadAttention(context_parallel=...) on shards against the module on the
    whole sequence: output, input gradient, and every parameter's gradient (the
    projections' summed over the ranks by hand, the normalizer's by the module)."""
    import copy

    import attn
    from attn import context_parallel as cp

    torch.manual_seed(3)
    whole = attn.MultiheadAttention(16, 2, batch_first=True, dtype=torch.float64,
                                    normalizer=kernel)
    with torch.no_grad():
        for i, value in enumerate(whole.normalizer.values()):
            value.add_(0.1 * (1 + i % 3))
    sharded = copy.deepcopy(whole)
    sharded.context_parallel = cp.ContextParallel(layout="load_balanced")
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 2 * CHUNK * world, 16, generator=g, dtype=torch.float64,
                    requires_grad=True)
    w = torch.randn(2, 2 * CHUNK * world, 16, generator=g, dtype=torch.float64)
    (whole(x, x, x, is_causal=True, need_weights=False)[0] * w).sum().backward()
    local = lambda t: cp.shard(t, 1, None, "load_balanced")
    xs = local(x.detach()).requires_grad_()
    out = sharded(xs, xs, xs, is_causal=True, need_weights=False)[0]
    (out * local(w)).sum().backward()
    pairs = [(out.detach(), local(whole(x, x, x, is_causal=True, need_weights=False)[0])),
             (xs.grad, local(x.grad))]
    for (name, want), got in zip(whole.named_parameters(), sharded.parameters()):
        grad = got.grad.clone()
        if not name.startswith("normalizer."):
            dist.all_reduce(grad)
        pairs.append((grad, want.grad))
    with pytest.raises(RuntimeError, match=r"context parallelism: need_weights=True would span"):
        sharded(xs, xs, xs)
    return max(((g - w).abs() / (1 + w.abs())).max().item() for g, w in pairs) / 1e-12


@pytest.fixture(scope="module")
def artifacts(attn_mod, tmp_path_factory):
    out = tmp_path_factory.mktemp("cp")
    paths = {n: str(attn_mod.compile(EXAMPLES / f"{n}.mlir").path)
             for n in ("softmax", "tanhmax", "sigmoid", "relu", "multimax")}
    paths["tables"] = str(compile_source(TABLES_IR, out, "tables"))
    paths["alibi_both_ways"] = str(compile_source(ALIBI_IR, out, "alibi_both_ways"))
    paths["doc_keys"] = str(compile_source(DOC_KEYS_IR, out, "doc_keys"))
    families = EXAMPLES.parent / "families"
    for name, source in (("window_sinks", "sliding_window_sinks"), ("documents", "document_mask"),
                         ("prefix_lm", "prefix_lm"), ("alibi", "alibi"), ("fox", "fox")):
        paths[name] = str(attn_mod.compile(families / f"{source}.mlir").path)
    return paths


@pytest.fixture(scope="module", params=[2, 4])
def results(request, artifacts, tmp_path_factory):
    world = request.param
    outdir = tmp_path_factory.mktemp(f"cp{world}")
    run_workers(_worker, (world, free_port(), artifacts, str(outdir)), world, DEADLINE_S,
                f"context parallelism over {world} ranks")
    return [json.loads((outdir / f"rank{r}.json").read_text()) for r in range(world)]


@pytest.mark.parametrize("case", [*CASES, "ddp_step", "module", "whole_table_refused"])
def test_context_parallel_matches_one_process(results, case):
    """Error over tolerance (|got − want| / (1 + |want|) against 1e-12 in float64, 2e-4
    in float32), worst over O and every gradient, on every rank."""
    for rank, result in enumerate(results):
        assert result[case] <= 1.0, f"rank {rank}: {case} is {result[case]:.3g}× the tolerance"


# ---- one process: the layouts, the ops on their own, the refusals ----------------------

def test_layouts_give_each_rank_its_pieces():
    from attn.context_parallel import sequence_pieces

    assert [sequence_pieces(16, 4, r) for r in range(4)] == [[(0, 4)], [(4, 4)], [(8, 4)], [(12, 4)]]
    assert [sequence_pieces(16, 4, r, "load_balanced") for r in range(4)] == [
        [(0, 2), (14, 2)], [(2, 2), (12, 2)], [(4, 2), (10, 2)], [(6, 2), (8, 2)]]
    with pytest.raises(ValueError, match=r"18 positions does not split into 8 equal chunks"):
        sequence_pieces(18, 4, 0, "load_balanced")
    with pytest.raises(ValueError, match=r"layout 'striped', expected one of"):
        sequence_pieces(16, 4, 0, "striped")


def test_causal_plans_skip_later_keys_and_give_the_row_offset_once():
    """Causal, load-balanced over 4 ranks: rank 0 (chunks 0 and 7) computes 1 + 8 chunk
    pairs of the 36 on or below the diagonal, as every rank does: the layout balances the
    work. Each query piece takes the row offset's share in exactly one call, the one with
    the first key piece."""
    from attn.context_parallel import _plan

    work = []
    for rank in range(4):
        mine, steps = _plan(64, 4, rank, "load_balanced", True)
        calls = [call for step in steps for call in step]
        assert all(kp[0] <= qp[0] for qp, kp, _ in calls)
        for piece in mine:
            assert [kp[0] for qp, kp, offset in calls if qp == piece and offset] == [0]
        work.append(len(calls))
    assert work == [9, 9, 9, 9]
    _, steps = _plan(64, 4, 3, "contiguous", True)
    assert [len(step) for step in steps] == [1, 1, 1, 1]
    _, steps = _plan(64, 4, 0, "contiguous", True)
    assert [len(step) for step in steps] == [1, 0, 0, 0]
    _, steps = _plan(64, 4, 0, "contiguous", False)
    assert [len(step) for step in steps] == [1, 1, 1, 1]


@pytest.fixture(scope="module")
def softmax1(attn_mod):
    return attn_mod.compile(EXAMPLES / "softmax1.mlir")


def test_key_blocks_merge_and_differentiate_like_one_call(softmax1):
    """Three key blocks of one query block: the merged partial states are the forward
    of the whole call, and the blocks' backward (the row offset's share to the first)
    adds up to its gradients, to rounding."""
    g = torch.Generator().manual_seed(0)
    q, k, v, dout = (torch.randn(2, 3, 13, 8, generator=g, dtype=torch.float64) for _ in range(4))
    path, params = softmax1.path, softmax1.initial_params(torch.float64)
    out, row_max, row_sum = softmax1.forward_with_stats(q, k, v)
    blocks = [(0, 5), (5, 5), (10, 3)]
    states = [torch.ops.attn.attention_partial_forward(
        path, q, k[:, :, a:a + n], v[:, :, a:a + n], params, False, None, [], 0, a)
        for a, n in blocks]
    merged = torch.ops.attn.attention_merge(path, q, k[:, :, :5], v[:, :, :5], params,
                                            *[torch.cat(s, 2) for s in zip(*states)])
    for got, want in zip(merged, (out, row_max, row_sum)):
        torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-13)
    want = torch.ops.attn.attention_backward(path, q, k, v, params, out, row_max, row_sum, dout)
    parts = [torch.ops.attn.attention_partial_backward(
        path, q, k[:, :, a:a + n], v[:, :, a:a + n], params, out, row_max, row_sum, dout,
        a == 0, False, None, [], 0, a) for a, n in blocks]
    torch.testing.assert_close(sum(p[0] for p in parts), want[0], rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(torch.cat([p[1] for p in parts], 2), want[1], rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(torch.cat([p[2] for p in parts], 2), want[2], rtol=1e-13, atol=1e-13)


def test_blocks_at_positions_merge_and_differentiate_like_one_call(attn_mod):
    """A sliding-window kernel (16 keys) with a row offset (sinks), one query block at
    positions [20, 30) of a 30-position sequence against three key blocks at their
    positions (the first one out of the window for most rows),
    is_causal: the merged states are those rows of the whole call, and the blocks'
    backward (the row offset's share to the block at key position 0) adds up to its
    gradients, the sinks' included."""
    kernel = attn_mod.compile(EXAMPLES.parent / "families" / "sliding_window_sinks.mlir")
    g = torch.Generator().manual_seed(2)
    q, k, v, dout = (torch.randn(1, 2, 30, 8, generator=g, dtype=torch.float64)
                     for _ in range(4))
    sinks = [torch.randn(2, generator=g, dtype=torch.float64)]
    path, params = kernel.path, kernel.initial_params(torch.float64)
    out, row_max, row_sum = torch.ops.attn.attention_forward(path, q, k, v, params, True, None,
                                                             sinks)
    want = torch.ops.attn.attention_backward(path, q, k, v, params, out, row_max, row_sum, dout,
                                             True, None, sinks)
    rows = lambda t: t[:, :, 20:30]
    blocks = [(0, 10), (10, 10), (20, 10)]
    states = [torch.ops.attn.attention_partial_forward(
        path, rows(q), k[:, :, a:a + n], v[:, :, a:a + n], params, True, None, sinks, 20, a)
        for a, n in blocks]
    merged = torch.ops.attn.attention_merge(path, rows(q), rows(k), rows(v), params,
                                            *[torch.cat(s, 2) for s in zip(*states)], None,
                                            sinks, 20, 20)
    for got, whole in zip(merged, (out, row_max, row_sum)):
        torch.testing.assert_close(got, rows(whole), rtol=1e-13, atol=1e-13)
    # The rows' share of the whole call's gradients: their own backward on all the keys.
    share = torch.ops.attn.attention_backward(path, rows(q), k, v, params, rows(out),
                                              rows(row_max), rows(row_sum), rows(dout), True,
                                              None, sinks, torch.tensor(20), 0)
    torch.testing.assert_close(share[0], rows(want[0]), rtol=1e-13, atol=1e-13)
    parts = [torch.ops.attn.attention_partial_backward(
        path, rows(q), k[:, :, a:a + n], v[:, :, a:a + n], params, rows(out), rows(row_max),
        rows(row_sum), rows(dout), a == 0, True, None, sinks, 20, a) for a, n in blocks]
    torch.testing.assert_close(sum(p[0] for p in parts), share[0], rtol=1e-13, atol=1e-13)
    for n in (1, 2):
        torch.testing.assert_close(torch.cat([p[n] for p in parts], 2), share[n], rtol=1e-13,
                                   atol=1e-13)
    torch.testing.assert_close(sum(p[4][0] for p in parts), share[4][0], rtol=1e-13, atol=1e-13)
    assert share[4][0].abs().max() > 0


def test_block_calls_refuse_bad_positions_and_shapes(softmax1):
    q = torch.randn(1, 2, 4, 8, dtype=torch.float64)
    path, params = softmax1.path, softmax1.initial_params(torch.float64)
    with pytest.raises(RuntimeError, match=r"a block at key_start = 0 must take the row "
                                           r"offset's share"):
        torch.ops.attn.attention_partial_backward(path, q, q, q, params, q, q[..., 0], q[..., 0],
                                                  q, False, True, None, [], 4, 0)
    with pytest.raises(RuntimeError, match=r"key_start = -4, expected a position >= 0"):
        torch.ops.attn.attention_partial_forward(path, q, q, q, params, False, None, [], 0, -4)
    with pytest.raises(RuntimeError, match=r"o_parts must have shape \[B, H, S\*Nq, dv\] with "
                                           r"S >= 1 .* got \[1, 2, 6, 8\]"):
        torch.ops.attn.attention_merge(path, q, q, q, params, torch.zeros(1, 2, 6, 8,
                                       dtype=torch.float64), *[torch.zeros(1, 2, 6,
                                       dtype=torch.float64)] * 3)


def test_block_tables_span_at_least_the_block(attn_mod):
    """A block's table over the queries may be the whole sequence's (longer than the
    block's positions), not shorter."""
    fox = attn_mod.compile(EXAMPLES.parent / "families" / "fox.mlir")
    q = torch.randn(1, 2, 4, 8)
    with pytest.raises(RuntimeError, match=r"input c has extent 10 in dim 2, expected at least "
                                           r"Nq = 12"):
        torch.ops.attn.attention_partial_forward(fox.path, q, q, q, fox.initial_params(), False,
                                                 None, [torch.zeros(1, 2, 10)], 8, 0)
    torch.ops.attn.attention_partial_forward(fox.path, q, q, q, fox.initial_params(), False,
                                             None, [torch.zeros(1, 2, 16)], 8, 0)


def test_kernelised_normalizers_are_refused(attn_mod):
    from attn.context_parallel import context_parallel_attention

    linear = attn_mod.compile(EXAMPLES / "linear.mlir")
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(RuntimeError, match=r"kernel \w+ is kernelised \(linear attention\): its "
                                           r"forward has no partial row state"):
        context_parallel_attention(q, q, q, linear)
    with pytest.raises(RuntimeError, match=r"is kernelised \(linear attention\)"):
        torch.ops.attn.attention_partial_forward(linear.path, q, q, q, linear.initial_params())


def test_the_manifests_splits_decide_the_refusal(softmax1):
    """An online kernel whose manifest said it takes no key blocks (hand-edited here:
    attn-compile writes partial_calls true for it) is refused by that field, not by its
    algorithm's name."""
    from attn.context_parallel import context_parallel_attention

    edited = copy.copy(softmax1)
    edited.manifest = dict(softmax1.manifest, splits=dict(softmax1.manifest["splits"],
                                                          partial_calls=False))
    assert edited.manifest["algorithm"] == "online"
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(RuntimeError, match=r"takes no key blocks from its caller \(its "
                                           r"manifest's splits.partial_calls is false\)"):
        context_parallel_attention(q, q, q, edited)


def test_documented_example_runs(tmp_path):
    """docs/context-parallel.md's command, on a short sequence: every rank's gradient of
    the normalizer's learnable temperature equals one process's on the whole sequence."""
    import re
    import subprocess
    import sys

    script = EXAMPLES.parents[1] / "examples" / "context_parallel.py"
    run = subprocess.run([sys.executable, str(script), "--positions", "64", "--ranks", "2",
                          "--dim", "8"], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    grads = [float(g) for g in re.findall(r"d temperature (\S+)", run.stdout)]
    assert len(grads) == 3, run.stdout
    assert grads[0] != 0 and all(abs(g - grads[-1]) <= 1e-4 * abs(grads[-1]) for g in grads), \
        run.stdout


def test_opcheck_partial_ops(softmax1):
    """The three ops against their schemas and fakes (attn.ops), as test_torch_library
    checks the others."""
    g = torch.Generator().manual_seed(1)
    q, k, v, dout = (torch.randn(1, 2, 5, 8, generator=g, dtype=torch.float64) for _ in range(4))
    path, params = softmax1.path, softmax1.initial_params(torch.float64)
    state = torch.ops.attn.attention_partial_forward(path, q, k, v, params, False, None, [], 0, 0)
    out, row_max, row_sum = softmax1.forward_with_stats(q, k, v)
    for op, args in ((torch.ops.attn.attention_partial_forward,
                      (path, q, k, v, params, True, None, [], 5, 5)),
                     (torch.ops.attn.attention_merge, (path, q, k, v, params, *state)),
                     (torch.ops.attn.attention_partial_backward,
                      (path, q, k, v, params, out, row_max, row_sum, dout, False, False, None, [],
                       0, 5))):
        torch.library.opcheck(op.default, args)
