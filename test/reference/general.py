"""Eager float64 reference of DESIGN.md section 2 with every term a Python function of
the pair's indices: for batch b, head h, query i and key j,

    s_ij    = score(q, k, ix)                       the score, mod included
    keep_ij = keep(ix)                              (and causal, key padding)
    O_i     = Σ_j keep_ij g(s_ij, ix) v_j / C_i
    C_i     = Σ_j keep_ij h(s_ij, ix)               (denominator "sum")
            | constant | Σ_j keep_ij               ("constant", "count")

where ix holds the index grids b [B,1,1,1], h [1,H,1,1], i [1,1,Nq,1], j [1,1,1,Nk]
(int64, broadcasting to [B, H, Nq, Nk]). Nothing is stabilised: the tests keep scores
O(1), where float64 exponentials are exact enough. A row without a kept key gives
O_i = 0. Gradients come from torch.autograd on these formulas (nothing hand-derived):
of q, k, v and of every tensor in `leaves` (params, tables) the functions read.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Indices:
    b: torch.Tensor
    h: torch.Tensor
    i: torch.Tensor
    j: torch.Tensor


def indices(B, H, Nq, Nk):
    ar = lambda n, shape: torch.arange(n, dtype=torch.int64).view(shape)
    return Indices(ar(B, (B, 1, 1, 1)), ar(H, (1, H, 1, 1)), ar(Nq, (1, 1, Nq, 1)),
                   ar(Nk, (1, 1, 1, Nk)))


def attention(q, k, v, score, g, h=None, keep=None, denominator="sum", constant=1.0,
              is_causal=False, key_lengths=None):
    B, H, Nq, _ = q.shape
    Nk = k.shape[-2]
    ix = indices(B, H, Nq, Nk)
    kept = torch.ones(B, H, Nq, Nk, dtype=torch.bool)
    if keep is not None:
        kept = kept & keep(ix)
    if is_causal:
        kept = kept & (ix.j <= ix.i)
    if key_lengths is not None:
        kept = kept & (ix.j < key_lengths.view(B, 1, 1, 1))
    zero = torch.zeros((), dtype=q.dtype)
    s = torch.where(kept, score(q, k, ix), zero)
    weights = torch.where(kept, g(s, ix), zero)
    if denominator == "sum":
        C = torch.where(kept, h(s, ix), zero).sum(-1, keepdim=True)
    elif denominator == "constant":
        C = torch.full((B, H, Nq, 1), constant, dtype=q.dtype)
    else:
        C = kept.sum(-1, keepdim=True).to(q.dtype)
    has_key = kept.any(-1, keepdim=True)
    O = (weights @ v) / torch.where(has_key, C, torch.ones((), dtype=q.dtype))
    return torch.where(has_key, O, zero)


def attention_and_grads(fn, q, k, v, dout, leaves=()):
    """fn(q, k, v, *leaves) -> O, evaluated in float64; returns O and the gradients
    "dq", "dk", "dv" and "d<n>" for the n-th leaf (leaves without a gradient, such as
    integer tables, get None)."""
    f64 = lambda t: t.detach().to(torch.float64) if t.is_floating_point() else t.detach()
    qkv = [f64(t).clone().requires_grad_(True) for t in (q, k, v)]
    rest = [f64(t).clone().requires_grad_(t.is_floating_point()) for t in leaves]
    O = fn(*qkv, *rest)
    wanted = qkv + [t for t in rest if t.requires_grad]
    grads = iter(torch.autograd.grad(O, wanted, grad_outputs=dout.to(torch.float64),
                                     allow_unused=True))
    out = {"O": O.detach()}
    for name, t in zip(("dq", "dk", "dv"), qkv):
        g = next(grads)
        out[name] = torch.zeros_like(t) if g is None else g
    for n, t in enumerate(rest):
        if t.requires_grad:
            g = next(grads)
            out[f"d{n}"] = torch.zeros_like(t) if g is None else g
        else:
            out[f"d{n}"] = None
    return out
