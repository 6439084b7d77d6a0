#!/usr/bin/env python3
"""Hierarchical attention (Yang et al., "Hierarchical Attention Networks"): attention
pooling with a LEARNED CONTEXT VECTOR as the query.

    u_t = tanh(W h_t + b),   α_t = softmax_t(u_w · u_t),   s = Σ_t α_t h_t

The query u_w is a learned parameter [d] (one query row per document); the keys are u_t,
the values h_t. The attention is the compiled Luong-dot kernel
(examples/families/luong_dot.mlir: s = q·k, softmax), so padding is key_lengths and the
scores are never materialised. Two levels: words -> sentence vectors -> document vector.

Task (synthetic): a document is S sentences of T random word vectors; exactly one
sentence holds a "marker" word whose first feature is the label sign. The classifier has
to find it: attention pooling learns to attend to the marker at both levels.

    .venv/bin/python examples/families/hierarchical_attention.py --steps 200
"""
import argparse
from pathlib import Path

import torch
import torch.nn as nn

import attn

REPO = Path(__file__).resolve().parents[2]


def compile_example(name):
    """examples/families/<name>.mlir, compiled (and cached) by attn.compile."""
    return attn.compile(str(REPO / "examples" / "families" / f"{name}.mlir"))


class AttentionPool(nn.Module):
    """s = Σ_t softmax_t(u_w · tanh(W h_t + b)) h_t with a learned context vector u_w."""

    def __init__(self, kernel, dim):
        super().__init__()
        self.kernel = kernel
        self.proj = nn.Linear(dim, dim)
        self.context = nn.Parameter(torch.randn(dim) / dim ** 0.5)   # u_w: the query

    def forward(self, h, lengths=None):                        # h [B, T, d]
        B = h.shape[0]
        keys = torch.tanh(self.proj(h)).unsqueeze(1)           # [B, 1, T, d]
        query = self.context.view(1, 1, 1, -1).expand(B, 1, 1, -1)
        pooled = self.kernel(query, keys, h.unsqueeze(1), key_lengths=lengths)
        return pooled[:, 0, 0]                                 # [B, d]


class HierarchicalClassifier(nn.Module):
    def __init__(self, kernel, dim):
        super().__init__()
        self.words = AttentionPool(kernel, dim)
        self.sentences = AttentionPool(kernel, dim)
        self.readout = nn.Linear(dim, 1)

    def forward(self, docs, word_lengths):                     # docs [B, S, T, d]
        B, S, T, d = docs.shape
        sentences = self.words(docs.reshape(B * S, T, d), word_lengths.reshape(-1))
        document = self.sentences(sentences.view(B, S, d))
        return self.readout(document).squeeze(-1)


def make_batch(gen, batch, sentences, words, dim):
    docs = 0.5 * torch.randn(batch, sentences, words, dim, generator=gen)
    lengths = torch.randint(2, words + 1, (batch, sentences), generator=gen)
    label = torch.randint(0, 2, (batch,), generator=gen).float()
    where = torch.randint(0, sentences, (batch,), generator=gen)
    for b in range(batch):
        s = int(where[b])
        t = int(torch.randint(0, int(lengths[b, s]), (1,), generator=gen))
        docs[b, s, t] = 0.0
        docs[b, s, t, 0] = 3.0 * (2 * label[b] - 1)            # the label's sign
        docs[b, s, t, 1] = 3.0                                 # "this is the marker"
    return docs, lengths, label


def train(steps=200, dim=16, batch=32, sentences=4, words=6, lr=0.02, seed=0, kernel=None, log=print):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = HierarchicalClassifier(kernel or compile_example("luong_dot"), dim)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        docs, lengths, label = make_batch(gen, batch, sentences, words, dim)
        loss = nn.functional.binary_cross_entropy_with_logits(model(docs, lengths), label)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if log and (step % 50 == 0 or step == steps - 1):
            log(f"step {step:4d}  loss {loss.item():.4f}")
    return model, losses


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200)
    a = p.parse_args()
    train(a.steps)
