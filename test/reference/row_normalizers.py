"""Eager float64 references for normalizers outside the Σg/Σh form (issue 37): weights
that depend on the other keys of the row, through a scan over the keys or a threshold
found per row. Each takes a score tensor s [..., Nq, Nk] and a keep mask broadcasting
to it, and returns the weights w [..., Nq, Nk] (0 where not kept; O = w @ v).

Stick-breaking (Tan et al., arXiv 2410.17980): each kept key, from the nearest (largest
j) to the farthest, takes a share σ(s_ij) of what the nearer keys left:

    w_ij = σ(s_ij) · Π_{k kept, k > j} (1 − σ(s_ik))
    log w_ij = log σ(s_ij) − Σ_{k kept, k > j} softplus(s_ik)

(with keys j < i kept this is the paper's product over j < k < i). What no key took,
r_i = Π_{k kept} (1 − σ(s_ik)) = 1 − Σ_j w_ij, is the left-over weight.

α-entmax (Peters et al. 2019; sparsemax for α = 2; AdaSplash, arXiv 2502.12082):

    w_ij = f(s_ij − τ_i),  f(x) = [(α − 1) x]_+^{1/(α−1)},  Σ_j kept_ij w_ij = 1

sparsemax and entmax15 solve τ exactly from the sorted row (differentiable by autograd
a.e.: the support is locally constant); entmax_bisect solves any α > 1 by bisection and
differentiates implicitly: with w'_ij = f'(s_ij − τ_i),
ds_ij = w'_ij (dw_ij − Σ_k w'_ik dw_ik / Σ_k w'_ik). The exact forms check it.
A row without a kept key has w = 0.
"""
from __future__ import annotations

import torch
from torch.nn.functional import logsigmoid, softplus


def _suffix_sum_after(x):
    """Σ_{k > j} x_k along the last dim (exclusive suffix sum)."""
    total = x.flip(-1).cumsum(-1).flip(-1)
    return total - x


def stick_breaking(s, keep):
    """The stick-breaking weights w and the left-over weight r [..., Nq, 1]."""
    keep = keep.expand_as(s)
    zero = torch.zeros((), dtype=s.dtype)
    discount = _suffix_sum_after(torch.where(keep, softplus(s), zero))
    w = torch.where(keep, torch.exp(logsigmoid(s) - discount), zero)
    left_over = torch.exp(-torch.where(keep, softplus(s), zero).sum(-1, keepdim=True))
    return w, left_over


def stick_breaking_by_products(s, keep):
    """stick_breaking written as the paper's products, key by key (the check of the
    log-space form above; slow, small shapes only)."""
    keep = keep.expand_as(s)
    beta = torch.sigmoid(s)
    w = torch.zeros_like(s)
    for j in range(s.shape[-1]):
        remaining = torch.ones_like(s[..., 0])
        for k in range(j + 1, s.shape[-1]):
            remaining = remaining * torch.where(keep[..., k], 1 - beta[..., k], 1.0)
        w[..., j] = torch.where(keep[..., j], beta[..., j] * remaining, 0.0)
    return w


def _masked_scores(s, keep):
    """s with the unkept entries set to the row's kept maximum − 2 − n, below τ ≥ max −
    1/(α−1) for α ≥ 1.5 (the exact forms), so that sorting puts them last and they
    never enter the support; the bisection masks them itself."""
    keep = keep.expand_as(s)
    lowest = torch.finfo(s.dtype).min
    row_max = torch.where(keep, s, lowest).amax(-1, keepdim=True)
    row_max = torch.where(keep.any(-1, keepdim=True), row_max, torch.zeros_like(row_max))
    floor = (row_max - 2 - s.shape[-1]).detach()
    return torch.where(keep, s, floor), keep


def sparsemax(s, keep):
    """α = 2: w = [s − τ]_+, τ exact from the sorted row."""
    z, keep = _masked_scores(s, keep)
    z_sorted, _ = z.sort(-1, descending=True)
    ks = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    cumulative = z_sorted.cumsum(-1)
    in_support = 1 + ks * z_sorted > cumulative
    support = in_support.sum(-1, keepdim=True)
    tau = (cumulative.gather(-1, support - 1) - 1) / support.to(z.dtype)
    w = torch.clamp(z - tau, min=0)
    return torch.where(keep & keep.any(-1, keepdim=True), w, torch.zeros((), dtype=s.dtype))


def entmax15(s, keep):
    """α = 1.5: w = [(s − τ)/2]_+², τ exact from the sorted row (the entmax package's
    algorithm, on x = s/2)."""
    z, keep = _masked_scores(s, keep)
    x = z / 2
    x_sorted, _ = x.sort(-1, descending=True)
    ks = torch.arange(1, x.shape[-1] + 1, dtype=x.dtype)
    mean = x_sorted.cumsum(-1) / ks
    mean_sq = (x_sorted * x_sorted).cumsum(-1) / ks
    delta = torch.clamp((1 - ks * (mean_sq - mean * mean)) / ks, min=0)
    tau_k = mean - torch.sqrt(delta)
    support = (tau_k <= x_sorted).sum(-1, keepdim=True)
    tau = tau_k.gather(-1, support - 1)
    w = torch.clamp(x - tau, min=0) ** 2
    return torch.where(keep & keep.any(-1, keepdim=True), w, torch.zeros((), dtype=s.dtype))


def _entmax_f(x, alpha):
    return torch.clamp((alpha - 1) * x, min=0) ** (1 / (alpha - 1))


def _entmax_f_prime(x, alpha):
    # 0 off the support, also for α = 2, where the power is 0 and 0^0 would be 1.
    inside = x > 0
    return torch.where(inside, ((alpha - 1) * torch.where(inside, x, 1.0))
                       ** ((2 - alpha) / (alpha - 1)), 0.0)


class _EntmaxBisect(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, keep, alpha, iterations):
        z, keep = _masked_scores(s, keep)
        n = z.shape[-1]
        top = z.amax(-1, keepdim=True)
        lo = top - 1 / (alpha - 1)                        # Σ f(z − lo) ≥ f(1/(α−1)) = 1
        hi = top - (1 / n) ** (alpha - 1) / (alpha - 1)   # every term ≤ 1/n
        for _ in range(iterations):
            mid = (lo + hi) / 2
            over = (torch.where(keep, _entmax_f(z - mid, alpha), 0.0).sum(-1, keepdim=True)
                    >= 1)
            lo, hi = torch.where(over, mid, lo), torch.where(over, hi, mid)
        tau = (lo + hi) / 2
        live = keep & keep.any(-1, keepdim=True)
        w = torch.where(live, _entmax_f(z - tau, alpha), 0.0)
        w = w / w.sum(-1, keepdim=True).clamp(min=torch.finfo(s.dtype).tiny)
        ctx.save_for_backward(torch.where(live, _entmax_f_prime(z - tau, alpha), 0.0))
        return w

    @staticmethod
    def backward(ctx, dw):
        (w_prime,) = ctx.saved_tensors
        total = w_prime.sum(-1, keepdim=True)
        shared = (w_prime * dw).sum(-1, keepdim=True) / total.clamp(min=torch.finfo(dw.dtype).tiny)
        return w_prime * (dw - shared), None, None, None


def entmax_bisect(s, keep, alpha, iterations=200):
    """α-entmax for any α > 1 by bisection on τ, implicit gradient."""
    if not alpha > 1:
        raise ValueError(f"entmax_bisect: alpha={alpha}; expected alpha > 1")
    return _EntmaxBisect.apply(s, keep.expand_as(s), float(alpha), iterations)
