#!/usr/bin/env python3
"""Train a tiny causal transformer on the NT delayed-addition task with an attn artifact.

Task (Gros, "Reorganizing attention-space geometry with expressive attention", NT tasks,
../../../shared/seeds/002_*): a sequence over the basis N,

    x_t = (x_{t-τ1} + x_{t-τ2}) mod N,   τ1 = 1, τ2 = τ + 1,

started from τ+1 random symbols (N2T1 is the delayed XOR series 011011...; N16T2 has
64/16/4/1/1 cycles of length 56/28/14/7/1, as in the paper). The model reads x_0..x_{L-1}
and predicts every next symbol; positions t < τ, whose successor is not determined by
the context, are left out of the loss and the accuracy.

Model: token embedding (+ learned position embedding), `--layers` pre-LayerNorm blocks
of causal multi-head attention and a tanh feed-forward layer (width 4·d_model, as in the
paper), final LayerNorm and a linear readout. Differences from the paper, for a demo that
learns in a minute on 2 cores: cross-entropy instead of squared error, Adam instead of
SGD with momentum, a position embedding, minibatches of independent sequences.

The attention goes through a compiled attn artifact (`--artifact x.so`; default: compile
examples/normalizers/<--normalizer>.mlir with attn.compile, cached), whose learnable
normalizer parameters (e.g. MultiMax's 8, sigmoid's bias) are trained with the model.
`--reference-softmax` swaps in plain eager torch softmax attention for comparison.

    .venv/bin/python examples/train/train.py                         # compiled softmax
    .venv/bin/python examples/train/train.py --normalizer tanhmax
    .venv/bin/python examples/train/train.py --artifact /tmp/multimax.so
    .venv/bin/python examples/train/train.py --reference-softmax
"""
import argparse
import math
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import attn

REPO = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------- task
def nt_batch(batch, length, base, tau, gen):
    """[batch, length + 1] int64 sequences of the N{base}T{tau} task."""
    x = torch.empty(batch, length + 1, dtype=torch.int64)
    x[:, : tau + 1] = torch.randint(0, base, (batch, tau + 1), generator=gen)
    for t in range(tau + 1, length + 1):
        x[:, t] = (x[:, t - 1] + x[:, t - 1 - tau]) % base
    return x


# --------------------------------------------------------------------- attention
class CompiledAttention(nn.Module):
    """Causal attention through an attn artifact; normalizer params are learnable."""

    def __init__(self, kernel, dtype):
        super().__init__()
        self.kernel = kernel
        self.params = nn.Parameter(kernel.initial_params(dtype))

    def forward(self, q, k, v):
        return self.kernel(q, k, v, params=self.params, is_causal=True)


class ReferenceSoftmaxAttention(nn.Module):
    """Plain eager softmax attention: softmax(q·kᵀ/sqrt(d) + causal mask)·v."""

    def forward(self, q, k, v):
        n, m = q.shape[-2], k.shape[-2]
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        causal = torch.ones(n, m, dtype=torch.bool).tril()
        s = s.masked_fill(~causal, float("-inf"))
        return torch.softmax(s, dim=-1) @ v


# ------------------------------------------------------------------------- model
class Block(nn.Module):
    def __init__(self, d_model, heads, attention):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.ff1 = nn.Linear(d_model, 4 * d_model)
        self.ff2 = nn.Linear(4 * d_model, d_model)
        self.attention = attention

    def forward(self, x):
        B, L, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        split = lambda t: t.view(B, L, self.heads, D // self.heads).transpose(1, 2)
        o = self.attention(split(q), split(k), split(v))            # [B, H, L, dh]
        x = x + self.proj(o.transpose(1, 2).reshape(B, L, D))
        return x + self.ff2(torch.tanh(self.ff1(self.ln2(x))))


class TinyTransformer(nn.Module):
    def __init__(self, base, length, d_model, heads, layers, make_attention,
                 positions=True):
        super().__init__()
        self.tok = nn.Embedding(base, d_model)
        self.pos = nn.Parameter(0.1 * torch.randn(length, d_model)) if positions else None
        self.blocks = nn.ModuleList(
            Block(d_model, heads, make_attention()) for _ in range(layers))
        self.ln = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, base)

    def forward(self, x):
        h = self.tok(x)
        if self.pos is not None:
            h = h + self.pos[: x.shape[1]]
        for b in self.blocks:
            h = b(h)
        return self.out(self.ln(h))


def build_model(args, dtype=torch.float32):
    """Model and optimizer; the random init does not depend on the attention kind."""
    if args.reference_softmax:
        make = ReferenceSoftmaxAttention
    else:
        if args.artifact is None:
            kernel = attn.compile(str(REPO / "examples" / "normalizers" / f"{args.normalizer}.mlir"))
            args.artifact = kernel.path
        else:
            kernel = attn.load(args.artifact)
        make = lambda: CompiledAttention(kernel, dtype)
    torch.manual_seed(args.seed)
    model = TinyTransformer(args.base, args.seq_len, args.d_model, args.heads, args.layers,
                            make, positions=not args.no_positions).to(dtype)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    return model, opt


def loss_and_accuracy(model, x, tau):
    logits = model(x[:, :-1])                                       # [B, L, base]
    target = x[:, 1:]
    logits, target = logits[:, tau:], target[:, tau:]               # determined targets
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
    acc = (logits.argmax(-1) == target).double().mean().item()
    return loss, acc


def train(args, dtype=torch.float32, log=print):
    """Runs up to args.steps steps; returns [(step, loss, accuracy)] (with --resume, the
    whole run's, the checkpointed steps included). Progress goes to `log` with steps/s;
    with args.checkpoint the run is checkpointed every args.checkpoint_every steps and on
    SIGINT/SIGTERM, and args.resume continues it (attn.training.TrainingLoop)."""
    model, opt = build_model(args, dtype)
    gen = torch.Generator().manual_seed(args.seed + 1)
    loop = attn.training.TrainingLoop(checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every,
                                 resume=args.resume, log_every=args.log_every, log=log,
                                 model=model, optimizer=opt, data=gen)

    def step(_):
        x = nt_batch(args.batch, args.seq_len, args.base, args.tau, gen)
        loss, acc = loss_and_accuracy(model, x, args.tau)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return {"loss": loss.item(), "acc": acc}

    history = [(h["step"], h["loss"], h["acc"]) for h in loop.run(args.steps, step)]
    if args.history:
        with open(args.history, "w") as f:
            f.write("step,loss,acc\n")
            f.writelines(f"{s},{l},{a}\n" for s, l, a in history)
    if log:
        x = nt_batch(512, args.seq_len, args.base, args.tau, gen)
        with torch.no_grad():
            loss, acc = loss_and_accuracy(model, x, args.tau)
        log(f"eval on 512 fresh sequences: loss {loss.item():.4f}  acc {acc:.3f}")
        extra = [(n, p.detach().tolist()) for n, p in model.named_parameters()
                 if n.endswith("attention.params") and p.numel()]
        for n, p in extra:
            log(f"learned normalizer params {n}: {[round(t, 4) for t in p]}")
    return history


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--artifact", help="compiled attn artifact (.so)")
    p.add_argument("--normalizer", default="softmax",
                   help="example normalizer to compile when --artifact is not given")
    p.add_argument("--reference-softmax", action="store_true",
                   help="use eager torch softmax attention instead of an artifact")
    p.add_argument("--base", type=int, default=16, help="N of the NT task")
    p.add_argument("--tau", type=int, default=2, help="T of the NT task (delay)")
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-positions", action="store_true",
                   help="no position embedding (as in the paper; learns much slower)")
    p.add_argument("--float64", action="store_true")
    p.add_argument("--checkpoint", help="checkpoint file, written every --checkpoint-every "
                   "steps, at the end and on Ctrl-C/SIGTERM")
    p.add_argument("--checkpoint-every", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    p.add_argument("--history", help="write step,loss,acc per step to this CSV file "
                   "(plot with examples/plot_curves.py)")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    kind = "reference torch softmax" if args.reference_softmax else "attn artifact"
    dtype = torch.float64 if args.float64 else torch.float32
    print(f"NT task N={args.base} T={args.tau}, L={args.seq_len}; "
          f"{args.layers} layer(s), d_model {args.d_model}, {args.heads} head(s); {kind}")
    try:
        history = train(args, dtype)
    except attn.training.Interrupted as e:
        raise SystemExit(f"{e}; continue with --resume")
    if not args.reference_softmax:
        print(f"artifact: {args.artifact}")
    first = sum(l for _, l, _ in history[:10]) / min(10, len(history))
    last = sum(l for _, l, _ in history[-10:]) / min(10, len(history))
    print(f"mean loss first 10 steps {first:.4f} -> last 10 steps {last:.4f}")


if __name__ == "__main__":
    main()
