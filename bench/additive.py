"""The additive (Bahdanau / Luong concat) score against its eager composition, same run.

    .venv/bin/python bench/additive.py                       # markdown on stdout
    .venv/bin/python bench/additive.py --n 2048 --hidden 64 --reps 3 --json build/bench/additive.json
    .venv/bin/python bench/additive.py --baseline-compiler OTHER/bin/attn-compile   # before/after

e_ij = vᵀ tanh(W_q q_i + W_k k_j), softmax over j, learnable W_q, W_k [hidden x d] and
v [hidden] (examples/families/bahdanau.mlir at hidden = d = --hidden), f32, B·H = --bh,
2 threads. Peers: the eager composition a PyTorch user writes (the [B, H, N, N, hidden]
tanh tensor, autograd for the backward) and torch.compile of it. Each pass is checked
against the eager result (O and every gradient) before it is timed; every
implementation is timed interleaved (rotating order) after a warm-up, median of --reps.
"""
import argparse
import json
import os
import re
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench  # noqa: E402  (machine facts, JSON output)
import peers  # noqa: E402
import thread_scaling  # noqa: E402  (interleaved timing)


def additive_ir(hidden):
    """examples/families/bahdanau.mlir with hidden = d = `hidden`."""
    with open(os.path.join(REPO, "examples", "families", "bahdanau.mlir"), encoding="utf-8") as f:
        text = f.read()
    text, count = re.subn(r"hidden 32 weights\(W_q: 32x32 = identity, W_k: 32x32 = identity, "
                          r"v: 32 = 0.125\)",
                          f"hidden {hidden} weights(W_q: {hidden}x{hidden} = identity, "
                          f"W_k: {hidden}x{hidden} = identity, v: {hidden} = 0.125)", text)
    if count != 1:
        raise RuntimeError("bench/additive.py: examples/families/bahdanau.mlir no longer has the "
                           "score line this benchmark rewrites")
    return text


def eager_additive(q, k, v, params, hidden):
    """The composition: projections, the [B, H, Nq, Nk, hidden] tanh, softmax, O."""
    d = q.shape[-1]
    w_q = params[:hidden * d].view(hidden, d)
    w_k = params[hidden * d:2 * hidden * d].view(hidden, d)
    w_v = params[2 * hidden * d:]
    e = torch.tanh((q @ w_q.T).unsqueeze(-2) + (k @ w_k.T).unsqueeze(-3)) @ w_v
    return torch.softmax(e, dim=-1) @ v


def runners(impls, q, k, v, params, do, pss):
    """{name: callable doing one pass}, each returning O (and the gradients)."""
    out = {}
    for name, fn in impls.items():
        if pss == "fwd":
            def forward(fn=fn):
                with torch.no_grad():
                    return {"O": fn(q, k, v, params)}
            out[name] = forward
            continue
        leaves = [t.clone().requires_grad_() for t in (q, k, v, params)]

        def step(fn=fn, leaves=leaves):
            for t in leaves:
                t.grad = None
            o = fn(*leaves)
            o.backward(do)
            grads = dict(zip(("dq", "dk", "dv", "dparams"), (t.grad for t in leaves)))
            return {"O": o.detach(), **grads}
        out[name] = step
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--bh", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
    ap.add_argument("--baseline-compiler", default=None,
                    help="another attn-compile, timed beside this build's as 'ours-baseline'")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    peers.prepare_torch_compile()
    import attn
    text = additive_ir(args.hidden)
    ours = attn.compile(text, dtypes=("f32",))
    impls = {"ours": lambda q, k, v, p: ours(q, k, v, params=p)}
    if args.baseline_compiler:
        with peers.compiler_override(args.baseline_compiler):
            baseline = attn.compile(text, dtypes=("f32",))
        impls["ours-baseline"] = lambda q, k, v, p: baseline(q, k, v, params=p)
    hidden = args.hidden
    impls["eager"] = lambda q, k, v, p: eager_additive(q, k, v, p, hidden)
    if not args.no_compile:
        compiled = torch.compile(eager_additive, dynamic=False)
        impls["compiled"] = lambda q, k, v, p: compiled(q, k, v, p, hidden)

    g = torch.Generator().manual_seed(0)
    d, n = args.hidden, args.n
    q, k, v, do = (torch.randn(1, args.bh, n, d, generator=g) for _ in range(4))
    params = torch.cat([torch.randn(hidden, d, generator=g).reshape(-1) / d ** 0.5,
                        torch.randn(hidden, d, generator=g).reshape(-1) / d ** 0.5,
                        torch.randn(hidden, generator=g) / hidden ** 0.5])
    info = bench.machine_info(args.threads, vec_isa=None)
    result = {"machine": info, "n": n, "hidden": hidden, "d": d, "bh": args.bh,
              "threads": args.threads, "rows": []}
    for pss in ("fwd", "fwd+bwd"):
        fns = runners(impls, q, k, v, params, do, pss)
        reference = fns["eager"]()
        checks = {name: peers.compare(fn(), reference, 2e-4)
                  for name, fn in fns.items() if name != "eager"}
        for name, check in checks.items():
            if not check["ok"]:
                raise RuntimeError(f"bench/additive.py: {name} {pss} differs from the eager "
                                   f"composition: {check}")
        med, samples, foreign = thread_scaling.time_interleaved(
            {name: (args.threads, fn) for name, fn in fns.items()}, args.reps)
        row = {"pass": pss, "ms": {name: round(s * 1e3, 2) for name, s in med.items()},
               "samples_ms": {name: [round(x * 1e3, 2) for x in s] for name, s in samples.items()},
               "speedup_vs_eager": {name: round(med["eager"] / s, 2) for name, s in med.items()},
               "rel_err": {name: c["rel_err"] for name, c in checks.items()},
               "foreign_cpus": round(foreign, 3)}
        result["rows"].append(row)
        print(json.dumps(row), file=sys.stderr)

    names = list(impls)
    print(f"{info['cpu_model']}, torch {info['torch_version']}, {args.threads} threads; additive "
          f"score, B·H = {args.bh}, N = {n}, hidden = d = {hidden}, f32\n")
    print("| pass | " + " | ".join(f"{name} (ms)" for name in names) + " | "
          + " | ".join(f"{name} vs eager" for name in names if name != "eager")
          + " | foreign CPUs |")
    print("|---" * (2 * len(names)) + "|---|")
    for row in result["rows"]:
        print(f"| {row['pass']} | " + " | ".join(f"{row['ms'][name]:.1f}" for name in names)
              + " | " + " | ".join(f"**{row['speedup_vs_eager'][name]:.2f}×**"
                                   for name in names if name != "eager")
              + f" | {row['foreign_cpus']:.2f} |")
    if args.json:
        bench.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
