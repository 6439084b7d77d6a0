"""Context parallelism on CPU: P ranks × 1 thread (gloo on 127.0.0.1) against 1 rank ×
P threads on the whole sequence, forward + backward of one attention call.

    python bench/context_parallel.py [--positions 16384] [--heads 2] [--dim 64]
        [--kernel examples/normalizers/softmax.mlir] [--causal] [--ranks 2] [--json out.json]
    python bench/context_parallel.py --unreachable-blocks [--block 4096]

--unreachable-blocks: instead, one process, one thread: what one block's call costs
(forward, backward) when it must be computed (softmax, and the 16-key window of
examples/families/sliding_window_sinks.mlir on its own block) against a block the
window cannot reach and a block after the queries under is_causal (the ring skips only
the latter): whether skipping the blocks a mask cannot reach would pay.

Reports per rank: seconds (median of --repeats fwd+bwd after a first call), the resident
memory before the first call (torch, the artifact, the inputs) and what that call adds at
its peak (VmHWM after resetting it, less VmRSS before: the call's own memory), and the bytes this rank sent around the ring against the
analytic minimum: every rank must receive the other ranks' K and V once in forward and
once more in backward (or keep them: O(N) memory), and the dK, dV of its own keys from
the P − 1 others (a reduce-scatter: (P − 1)/P of them), i.e. (P − 1)/P · (2·|K,V| +
|dK, dV|) of the whole sequence's tensors per rank. The ring sends its dK, dV
accumulators one extra hop (home), P/(P − 1) of that term.
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _status_mib(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":")) / 1024


def _call_mib(step):
    """The resident memory one call of step() adds at its peak: the kernel's peak RSS
    (VmHWM) is reset first (Linux >= 4.0: clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status_mib("VmRSS")
    step()
    return _status_mib("VmHWM") - before


def _inputs(args, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    shape = (1, args.heads, args.positions, args.dim)
    q, k, v, w = (torch.randn(*shape, generator=g, dtype=dtype) for _ in range(4))
    return q, k, v, w


def _timed(step, repeats):
    """(MiB the first call adds at its peak, median seconds of `repeats` calls after it).
    The memory is the first call's: later ones reuse what the allocator kept resident."""
    memory = _call_mib(step)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return memory, statistics.median(times)


def _single(args):
    import attn

    torch.set_num_threads(args.ranks)
    kernel = attn.compile(args.kernel)
    q, k, v, w = _inputs(args)

    def step():
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        (kernel(*leaves, is_causal=args.causal) * w).sum().backward()

    rss = _status_mib("VmRSS")
    memory, seconds = _timed(step, args.repeats)
    return {"seconds": seconds, "rss_mib": rss, "call_mib": memory}


def _rank(rank, args, port, outdir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks,
                            timeout=datetime.timedelta(seconds=600))
    try:
        import attn
        from attn import context_parallel as cp

        kernel = attn.compile(args.kernel)
        layout = "load_balanced" if args.causal else "contiguous"
        full = _inputs(args)
        q, k, v, w = (cp.shard(t, 2, None, layout) for t in full)
        del full
        sent = [0]
        isend = dist.isend

        def counting_isend(tensor, *a, **kw):
            sent[0] += tensor.numel() * tensor.element_size()
            return isend(tensor, *a, **kw)

        dist.isend = counting_isend

        def step():
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            out = cp.context_parallel_attention(*leaves, kernel, is_causal=args.causal,
                                                layout=layout)
            (out * w).sum().backward()

        dist.barrier()
        rss = _status_mib("VmRSS")
        memory, seconds = _timed(step, args.repeats)
        result = {"seconds": seconds, "sent_bytes_per_step": sent[0] / (args.repeats + 1),
                  "rss_mib": rss, "call_mib": memory}
        # The forward's communication alone: the ring's P − 1 exchanges of one K, V block
        # against one all-gather of every block.
        ring = cp._Ring(None)

        def ring_only():
            block = [k, v]
            for _ in range(args.ranks - 1):
                block, in_flight = ring.start(block)
                ring.wait(in_flight)

        def all_gather_only():
            for t in (k, v):
                dist.all_gather([torch.empty_like(t) for _ in range(args.ranks)], t.contiguous())

        dist.barrier()
        result["ring_exchange_s"] = _timed(ring_only, args.repeats)[1]
        dist.barrier()
        result["all_gather_s"] = _timed(all_gather_only, args.repeats)[1]
        with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
            json.dump(result, f)
    finally:
        dist.destroy_process_group()
    os._exit(0)


def _block_costs(args):
    """Median ms of one block's partial forward and backward, one thread."""
    import attn

    torch.set_num_threads(1)
    families = os.path.join(os.path.dirname(__file__), "..", "examples", "families")
    kernels = (("softmax", attn.compile(args.kernel), []),
               ("window 16 + sinks",
                attn.compile(os.path.join(families, "sliding_window_sinks.mlir")),
                [torch.zeros(args.heads)]))
    n = args.block
    g = torch.Generator().manual_seed(0)
    q, k, v, dout = (torch.randn(1, args.heads, n, args.dim, generator=g) for _ in range(4))
    ms = lambda call: _timed(call, args.repeats)[1] * 1e3
    for name, kernel, inputs in kernels:
        path, params = kernel.path, kernel.initial_params()
        out, row_max, row_sum = torch.ops.attn.attention_forward(path, q, k, v, params, False,
                                                                 None, inputs)
        for label, query_start, key_start, causal in (
                ("its own block", 0, 0, False),
                (f"keys {n} positions before the queries", 2 * n, n, False),
                ("keys after the queries, is_causal", 0, n, True)):
            forward = lambda: torch.ops.attn.attention_partial_forward(
                path, q, k, v, params, causal, None, inputs, query_start, key_start)
            backward = lambda: torch.ops.attn.attention_partial_backward(
                path, q, k, v, params, out, row_max, row_sum, dout, key_start == 0, causal,
                None, inputs, query_start, key_start)
            print(f"{name}, {label}: forward {ms(forward):.1f} ms, backward "
                  f"{ms(backward):.1f} ms", flush=True)


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=16384)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--kernel", default="examples/normalizers/softmax.mlir")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--unreachable-blocks", action="store_true")
    parser.add_argument("--block", type=int, default=4096)
    args = parser.parse_args()
    if args.unreachable_blocks:
        return _block_costs(args)

    import tempfile

    single = _single(args)
    with tempfile.TemporaryDirectory() as outdir:
        mp.start_processes(_rank, args=(args, _port(), outdir), nprocs=args.ranks,
                           start_method="spawn")
        ranks = [json.load(open(os.path.join(outdir, f"rank{r}.json"))) for r in range(args.ranks)]
    P, N = args.ranks, args.positions
    kv_bytes = 2 * args.heads * N * args.dim * 4          # K and V of the whole sequence, f32
    minimum = (P - 1) / P * (2 * kv_bytes + kv_bytes)   # K, V twice; dK, dV reduce-scattered
    report = {"args": vars(args), "single": single, "ranks": ranks,
              "minimum_bytes_per_rank": minimum}
    print(f"N = {N}, H = {args.heads}, d = {args.dim}, f32, {os.path.basename(args.kernel)}"
          f"{', causal' if args.causal else ''}; forward + backward")
    print(f"1 rank x {P} threads: {single['seconds']:.3f} s, RSS {single['rss_mib']:.0f} MiB "
          f"+ {single['call_mib']:.0f} MiB at the call's peak")
    for r, res in enumerate(ranks):
        print(f"rank {r} of {P} x 1 thread: {res['seconds']:.3f} s, RSS {res['rss_mib']:.0f} "
              f"MiB + {res['call_mib']:.0f} MiB at the call's peak, sent "
              f"{res['sent_bytes_per_step'] / 2**20:.1f} MiB per step (analytic minimum "
              f"{minimum / 2**20:.1f} MiB); the forward's K, V exchange alone: ring "
              f"{res['ring_exchange_s'] * 1e3:.1f} ms, all-gather {res['all_gather_s'] * 1e3:.1f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
