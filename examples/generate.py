"""Train a tiny causal language model whose attention is a custom attn normalizer with a
position-dependent score, then generate greedily with attn.KVCache (docs/decoding.md).

    python examples/generate.py --family ssmax --train-steps 200 --tokens 64

The model: token embedding, `layers` pre-norm blocks of attn.MultiheadAttention (the
family's kernel) and an MLP, and a linear head. The task: continue a sequence that
repeats a random pattern of `period` tokens, learnt by next-token prediction. Generation
prefills the prompt into the cache, then feeds one token per step; every step's logits
are those of the whole causal forward over the prefix (test/python/test_generation.py
checks this for every family below in float64).
"""
import argparse
from pathlib import Path

import torch
from torch import nn

import attn

ROOT = Path(__file__).resolve().parent.parent

# family -> (kernel source, is_causal at the call): the families with a causal attn.mask
# region need no flag, the others take is_causal=True.
FAMILIES = {
    "alibi": (ROOT / "examples" / "families" / "alibi_heads.mlir", False),
    "ssmax": (ROOT / "examples" / "families" / "ssmax.mlir", False),
    "sinks_window": (ROOT / "examples" / "families" / "sliding_window_sinks.mlir", False),
    "documents": (ROOT / "examples" / "families" / "document_mask.mlir", True),
    "tanhmax": (ROOT / "examples" / "normalizers" / "tanhmax.mlir", True),
}


class TinyLM(nn.Module):
    def __init__(self, kernel, is_causal, vocab=16, dim=32, heads=4, layers=2,
                 dtype=torch.float64):
        super().__init__()
        self.is_causal, self.heads, self.head_dim = is_causal, heads, dim // heads
        self.embed = nn.Embedding(vocab, dim, dtype=dtype)
        self.norms = nn.ModuleList(nn.LayerNorm(dim, dtype=dtype) for _ in range(2 * layers))
        self.attention = nn.ModuleList(
            attn.MultiheadAttention(dim, heads, batch_first=True, normalizer=kernel, dtype=dtype)
            for _ in range(layers))
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, 4 * dim, dtype=dtype), nn.GELU(),
                          nn.Linear(4 * dim, dim, dtype=dtype))
            for _ in range(layers))
        self.head = nn.Linear(dim, vocab, dtype=dtype)

    def forward(self, tokens, inputs=None, cache=None):
        """Logits [B, L, vocab] of tokens [B, L]: the whole causal forward, or with `cache`
        the next positions after those it holds (then the cache moves on)."""
        x = self.embed(tokens)
        for layer, (mha, mlp) in enumerate(zip(self.attention, self.mlps)):
            h = self.norms[2 * layer](x)
            a, _ = mha(h, h, h, is_causal=self.is_causal, need_weights=False, inputs=inputs,
                       kv_cache=cache, layer=layer)
            x = x + a
            x = x + mlp(self.norms[2 * layer + 1](x))
        if cache is not None:
            cache.advance()
        return self.head(x)

    def new_cache(self, batch, capacity):
        return attn.KVCache(len(self.attention), batch, self.heads, self.head_dim, capacity,
                            dtype=self.head.weight.dtype)


def family_inputs(family, heads, positions, batch=1):
    """The family's tensor inputs over `positions` positions (those the model does not
    own): ALiBi's slopes; document ids (a new document every 24 positions)."""
    if family == "alibi":
        return {"slopes": attn.alibi_slopes(heads, torch.float64)}
    if family == "documents":
        return {"doc": (torch.arange(positions) // 24).expand(batch, positions)}
    return None


def pattern_batch(gen, batch, length, period=5, vocab=16):
    pattern = torch.randint(0, vocab, (batch, period), generator=gen)
    return pattern.repeat(1, -(-length // period))[:, :length]


def train(model, family, steps, gen, batch=8, length=48, lr=3e-3, tokens=None):
    """Next-token prediction on repeated random patterns (a fresh batch each step, or
    `tokens` [batch, length + 1] every step); returns the losses."""
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    inputs = family_inputs(family, model.heads, length, batch)
    losses = []
    fixed = tokens
    for _ in range(steps):
        tokens = pattern_batch(gen, batch, length + 1) if fixed is None else fixed
        logits = model(tokens[:, :-1], inputs)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                           tokens[:, 1:].reshape(-1))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    return losses


@torch.no_grad()
def generate(model, family, prompt, tokens):
    """Greedy continuation of prompt [1, P] by `tokens` tokens with a KV cache: (the
    sequence [1, P + tokens], the logits that chose each new token)."""
    total = prompt.shape[1] + tokens
    inputs = family_inputs(family, model.heads, total)
    cache = model.new_cache(1, total)
    logits = model(prompt, inputs, cache)
    sequence, chosen = prompt, []
    for _ in range(tokens):
        last = logits[:, -1]
        chosen.append(last)
        next_token = last.argmax(-1, keepdim=True)
        sequence = torch.cat([sequence, next_token], dim=1)
        logits = model(next_token, inputs, cache)
    return sequence, chosen


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", choices=sorted(FAMILIES), default="ssmax")
    parser.add_argument("--train-steps", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    source, is_causal = FAMILIES[args.family]
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model = TinyLM(attn.compile(source), is_causal)
    losses = train(model, args.family, args.train_steps, gen)
    print(f"{args.family}: loss {losses[0]:.3f} -> {losses[-1]:.3f} in {args.train_steps} steps")
    prompt = pattern_batch(gen, 1, 10)
    sequence, _ = generate(model, args.family, prompt, args.tokens)
    print("prompt:   ", prompt[0].tolist())
    print("generated:", sequence[0, prompt.shape[1]:].tolist())


if __name__ == "__main__":
    main()
