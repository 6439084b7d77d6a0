"""One long sequence over P CPU processes (gloo): context-parallel attention with a custom
normalizer, forward and backward, and each rank's memory against one process holding
the whole sequence (docs/context-parallel.md).

    python examples/context_parallel.py --positions 65536 --ranks 4

The normalizer is TanhMax with a learnable scale on its score (TANHMAX_IR below); the
sequence is sharded in the load-balanced layout with a causal mask.
"""
import argparse
import datetime
import json
import os
import socket
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

TANHMAX_IR = """
attn.normalizer @tanhmax params(temperature = 1.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %x = arith.mulf %s, %t : f32
    %e = math.exp %x : f32
    %nx = arith.negf %x : f32
    %f = math.exp %nx : f32
    %g = arith.subf %e, %f : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %x = arith.mulf %s, %t : f32
    %e = math.exp %x : f32
    %nx = arith.negf %x : f32
    %f = math.exp %nx : f32
    %c = arith.addf %e, %f : f32
    attn.yield %c : f32
  }
}
attn.kernel @tanhmax_attention normalizer(@tanhmax)
"""


def status_mib(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":")) / 1024


def timed_with_memory(step):
    """(seconds, MiB resident before, MiB the call added at its peak) of step(): the
    peak RSS (VmHWM) is reset first (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status_mib("VmRSS")
    start = time.perf_counter()
    step()
    return time.perf_counter() - start, before, status_mib("VmHWM") - before


def full_sequence(positions, heads, dim):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1, heads, positions, dim, generator=g) for _ in range(4)]  # q k v dO


def rank_main(rank, args, artifact, port, outdir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks,
                            timeout=datetime.timedelta(seconds=1800))
    import attn
    from attn.context_parallel import context_parallel_attention, shard

    kernel = attn.load(artifact)
    params = kernel.initial_params().requires_grad_()
    # Each rank makes the whole sequence and keeps its shard; a real run would load
    # only its shard.
    q, k, v, grad = (shard(t, 2, layout="load_balanced")
                     for t in full_sequence(args.positions, args.heads, args.dim))
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
    dist.barrier()
    seconds, rss, call = timed_with_memory(lambda: context_parallel_attention(
        q, k, v, kernel, params, is_causal=True, layout="load_balanced").backward(grad))
    with open(os.path.join(outdir, f"{rank}.json"), "w") as f:
        json.dump({"seconds": seconds, "rss_mib": rss, "call_mib": call,
                   "dtemperature": params.grad.item()}, f)
    dist.destroy_process_group()
    os._exit(0)


def one_process(args, artifact):
    import attn

    torch.set_num_threads(args.ranks)
    kernel = attn.load(artifact)
    params = kernel.initial_params().requires_grad_()
    q, k, v, grad = full_sequence(args.positions, args.heads, args.dim)
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
    seconds, rss, call = timed_with_memory(
        lambda: kernel(q, k, v, params, is_causal=True).backward(grad))
    return {"seconds": seconds, "rss_mib": rss, "call_mib": call,
            "dtemperature": params.grad.item()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=65536)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--heads", type=int, default=1)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--no-compare", action="store_true",
                        help="skip the one-process run on the whole sequence")
    args = parser.parse_args()
    import attn

    with tempfile.TemporaryDirectory() as outdir:
        artifact = str(attn.compile(TANHMAX_IR).path)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.start_processes(rank_main, args=(args, artifact, port, outdir), nprocs=args.ranks,
                           start_method="spawn")
        ranks = [json.load(open(os.path.join(outdir, f"{r}.json"))) for r in range(args.ranks)]
    print(f"{args.positions} positions, {args.heads} head(s) of dim {args.dim}, float32, causal, "
          f"TanhMax with a learnable temperature; forward + backward")
    for r, res in enumerate(ranks):
        print(f"rank {r} of {args.ranks}: {res['seconds']:.1f} s, RSS {res['rss_mib']:.0f} MiB "
              f"+ {res['call_mib']:.1f} MiB at the call's peak; d temperature "
              f"{res['dtemperature']:.6g}")
    if not args.no_compare:
        one = one_process(args, artifact)
        print(f"one process, {args.ranks} threads: {one['seconds']:.1f} s, RSS "
              f"{one['rss_mib']:.0f} MiB + {one['call_mib']:.1f} MiB at the call's peak; "
              f"d temperature {one['dtemperature']:.6g}")


if __name__ == "__main__":
    main()
