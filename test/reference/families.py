"""Eager float64 references for the attention families of examples/families/.

Every family is softmax attention over a score s_ij(q, k, θ, i, j) and a keep mask:

    cosine        s = scale · q̂·k̂, x̂ = x / sqrt(x·x + ε²), ε = 1e-6
    dot           s = q·k                        (Luong dot)
    bilinear      s = scale · q·W·k              (Luong general), W [d, d]
    additive      s = v·tanh(W_q q + W_k k)      (Bahdanau, Luong concat), W_q, W_k [n, d], v [n]
    alibi         s = q·k/sqrt(d) - slope·|i - j|, causal mask
    softcap       s = cap·tanh(q·k/sqrt(d) / cap)
    relative_bias s = q·k/sqrt(d) + b[clip(j - i, -2, 2)]
    window        s = q·k/sqrt(d), keep |i - j| <= 3
    luong_local   s = q·k - (j - p_i)²/(2σ²), p [B, H, 1, Nq] a per-query tensor input
    nested_tanh   s = tanh(W q)·tanh(W k), W [m, d]

Gradients come from torch.autograd on these formulas (nothing hand-derived).
"""
from __future__ import annotations

import math
from collections import OrderedDict

import torch

COSINE_EPSILON = 1e-6


def unit_rows(x, eps=COSINE_EPSILON):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps * eps)


def positions(Nq, Nk, dtype):
    i = torch.arange(Nq, dtype=dtype).view(Nq, 1)
    j = torch.arange(Nk, dtype=dtype).view(1, Nk)
    return i, j


def cosine_score(scale):
    return lambda q, k, p: scale * unit_rows(q) @ unit_rows(k).transpose(-1, -2)


def dot_score(q, k, p):
    return q @ k.transpose(-1, -2)


def scaled_dot(q, k):
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])


def bilinear_score(scale=1.0):
    return lambda q, k, p: scale * (q @ p["W"]) @ k.transpose(-1, -2)


def additive_score(q, k, p):
    names = list(p)
    wq, wk, v = (p[n] for n in names)           # declaration order: W_q, W_k, v
    pre = (q @ wq.T).unsqueeze(-2) + (k @ wk.T).unsqueeze(-3)   # [B,H,Nq,Nk,n]
    return torch.tanh(pre) @ v


def nested_tanh_score(q, k, p):
    W = p["W"]
    return torch.tanh(q @ W.T) @ torch.tanh(k @ W.T).transpose(-1, -2)


def alibi_score(q, k, p):
    i, j = positions(q.shape[-2], k.shape[-2], q.dtype)
    return scaled_dot(q, k) - p["slope"] * (i - j).abs()


def softcap_score(q, k, p):
    return p["cap"] * torch.tanh(scaled_dot(q, k) / p["cap"])


def relative_bias_score(q, k, p):
    i, j = positions(q.shape[-2], k.shape[-2], torch.int64)
    bucket = torch.clamp(j - i, -2, 2) + 2
    table = torch.stack([p[n] for n in ("b_m2", "b_m1", "b_0", "b_p1", "b_p2")])
    return scaled_dot(q, k) + table[bucket]


def luong_local_score(q, k, p, rows):
    j = torch.arange(k.shape[-2], dtype=q.dtype).view(1, 1, 1, -1)
    centre = rows[:, :, 0, :].unsqueeze(-1)                     # p_i: [B, H, Nq, 1]
    return q @ k.transpose(-1, -2) - (j - centre) ** 2 / (2 * p["sigma"] ** 2)


def plain_scaled_dot(q, k, p):
    return scaled_dot(q, k)


def causal_keep(Nq, Nk):
    i, j = positions(Nq, Nk, torch.int64)
    return j <= i


def window_keep(Nq, Nk, width=3):
    i, j = positions(Nq, Nk, torch.int64)
    return (i - j).abs() <= width


def split_params(flat, shapes):
    out, at = OrderedDict(), 0
    for name, shape in shapes.items():
        size = math.prod(shape)
        out[name] = flat[at:at + size].reshape(shape)
        at += size
    return out


def softmax_attention(s, keep, v):
    """O = Σ_j softmax over kept keys · v_j; a row with no kept key gives 0."""
    zero = torch.zeros((), dtype=s.dtype)
    s = torch.where(keep, s, zero)
    m = torch.where(keep, s, torch.full((), -math.inf, dtype=s.dtype)).amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, zero).detach()
    e = torch.where(keep, torch.exp(s - m), zero)
    C = e.sum(-1, keepdim=True)
    has_key = keep.any(-1, keepdim=True)
    O = (e @ v) / torch.where(has_key, C, torch.ones((), dtype=s.dtype))
    return torch.where(has_key, O, zero)


def attention(score, keep_fn, q, k, v, params, shapes, is_causal=False, key_lengths=None,
              rows=None):
    """score(q, k, params dict[, rows]) -> s [B,H,Nq,Nk]; keep_fn(Nq, Nk) -> bool [Nq,Nk]
    or None; rows: per-query tensor inputs [B, H, R, Nq] when the score takes them."""
    B, H, Nq, _ = q.shape
    Nk = k.shape[-2]
    keep = torch.ones(B, 1, Nq, Nk, dtype=torch.bool)
    if keep_fn is not None:
        keep = keep & keep_fn(Nq, Nk)
    if is_causal:
        keep = keep & causal_keep(Nq, Nk)
    if key_lengths is not None:
        j = torch.arange(Nk).view(1, 1, 1, Nk)
        keep = keep & (j < key_lengths.view(B, 1, 1, 1))
    p = split_params(params, shapes)
    s = score(q, k, p) if rows is None else score(q, k, p, rows)
    return softmax_attention(s, keep.expand(B, H, Nq, Nk), v)


def attention_and_grads(score, keep_fn, q, k, v, params, shapes, dout, is_causal=False,
                        key_lengths=None, rows=None, dtype=torch.float64):
    """O and the gradients of q, k, v, params (and of the per-query inputs as "drows"),
    computed eagerly in `dtype` (float64: the reference; float32: how far plain f32
    arithmetic lands from it on the same inputs)."""
    inputs = (q, k, v, params) + (() if rows is None else (rows,))
    leaves = [t.detach().to(dtype).clone().requires_grad_(True) for t in inputs]
    O = attention(score, keep_fn, *leaves[:4], shapes, is_causal, key_lengths,
                  None if rows is None else leaves[4])
    grads = torch.autograd.grad(O, leaves, grad_outputs=dout.to(dtype), allow_unused=True)
    grads = [torch.zeros_like(x) if g is None else g for x, g in zip(leaves, grads)]
    out = {"O": O.detach(), "dq": grads[0], "dk": grads[1], "dv": grads[2], "dparams": grads[3]}
    if rows is not None:
        out["drows"] = grads[4]
    return out
