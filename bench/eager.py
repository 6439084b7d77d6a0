"""Eager LibTorch compositions of the benchmarked normalizers (the baseline).

Written the way a careful PyTorch user would: full N x N score matrix, one kernel
per elementwise op, stabilised with a row max where the normalizer has exponentials,
causal masking with masked_fill. Autograd provides the backward. These mirror
examples/normalizers/*.mlir exactly (same score, same params, same epsilon).

Every function takes q [B,H,N,d], k [B,H,N,d], v [B,H,N,dv], params [P] (may be
empty) and is_causal, and returns O [B,H,N,dv].
"""

import math

import torch


def _causal_mask(n_q, n_k, device):
    """True where the pair (i, j) is masked (j > i), like the runtime's is_causal."""
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).triu(1)


def _scaled_scores(q, k):
    # default attn score: s = q.k / sqrt(d)
    return (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))


def softmax(q, k, v, params, is_causal=False):
    s = _scaled_scores(q, k)
    if is_causal:
        s = s.masked_fill(_causal_mask(s.shape[-2], s.shape[-1], s.device), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def tanhmax(q, k, v, params, is_causal=False):
    # g = e^s - e^-s, C = sum_j (e^s + e^-s); shift both exponentials by m = max_j |s|.
    s = _scaled_scores(q, k)
    mask = _causal_mask(s.shape[-2], s.shape[-1], s.device) if is_causal else None
    if mask is not None:
        s = s.masked_fill(mask, 0.0)  # masked scores must neither set the shift nor overflow
    m = s.abs().amax(dim=-1, keepdim=True).detach()
    ep = torch.exp(s - m)
    en = torch.exp(-s - m)
    g = ep - en
    h = ep + en
    if mask is not None:
        g = g.masked_fill(mask, 0.0)
        h = h.masked_fill(mask, 0.0)
    return (g / h.sum(dim=-1, keepdim=True)) @ v


MULTIMAX_PARAM_NAMES = ["tb1", "td1", "b1", "d1", "tb2", "td2", "b2", "d2"]


def multimax(q, k, v, params, is_causal=False):
    # sigma(s) = s + sum_{n=1,2} (1 - tb_n) max(b_n - s, 0)^n + (td_n - 1) max(s - d_n, 0)^n,
    # then softmax of sigma.
    tb1, td1, b1, d1, tb2, td2, b2, d2 = params.unbind(0)
    s = _scaled_scores(q, k)
    sig = (s
           + (1 - tb1) * torch.relu(b1 - s)
           + (td1 - 1) * torch.relu(s - d1)
           + (1 - tb2) * torch.relu(b2 - s).square()
           + (td2 - 1) * torch.relu(s - d2).square())
    if is_causal:
        sig = sig.masked_fill(_causal_mask(s.shape[-2], s.shape[-1], s.device), float("-inf"))
    return torch.softmax(sig, dim=-1) @ v


EXPRESSIVE_EPS = 1.0e-6


def expressive(q, k, v, params, is_causal=False):
    # EA (Gros): s = (q.k)^2 (no scale), w = s / (eps + sum_j s)
    s = (q @ k.transpose(-2, -1)).square()
    if is_causal:
        s = s.masked_fill(_causal_mask(s.shape[-2], s.shape[-1], s.device), 0.0)
    return (s / (EXPRESSIVE_EPS + s.sum(dim=-1, keepdim=True))) @ v


def sigmoid(q, k, v, params, is_causal=False):
    # w = sigmoid(s + bias), C = 1
    s = _scaled_scores(q, k) + params[0]
    if is_causal:
        s = s.masked_fill(_causal_mask(s.shape[-2], s.shape[-1], s.device), float("-inf"))
    return torch.sigmoid(s) @ v


def sigsoftmax(q, k, v, params, is_causal=False):
    # g = h = e^s * sigmoid(s), shifted by the row max of log g = s + log sigmoid(s)
    s = _scaled_scores(q, k)
    log_g = s + torch.nn.functional.logsigmoid(s)
    if is_causal:
        log_g = log_g.masked_fill(_causal_mask(s.shape[-2], s.shape[-1], s.device), float("-inf"))
    return torch.softmax(log_g, dim=-1) @ v


def relu(q, k, v, params, is_causal=False):
    # g = relu(s), C = number of unmasked keys
    s = torch.relu(_scaled_scores(q, k))
    n_q, n_k = s.shape[-2], s.shape[-1]
    if is_causal:
        s = s.masked_fill(_causal_mask(n_q, n_k, s.device), 0.0)
        count = torch.arange(1, n_q + 1, device=s.device, dtype=s.dtype).clamp(max=n_k)
        return (s @ v) / count.view(-1, 1)
    return (s @ v) / n_k


LINEAR_EPS = 1.0e-6


def linear(q, k, v, params, is_causal=False):
    # phi = elu + 1 on q and k, s = phi(q).phi(k) (no scale), w = s / (eps + sum_j s)
    s = (torch.nn.functional.elu(q) + 1) @ (torch.nn.functional.elu(k) + 1).transpose(-2, -1)
    if is_causal:
        s = s.masked_fill(_causal_mask(s.shape[-2], s.shape[-1], s.device), 0.0)
    return (s / (LINEAR_EPS + s.sum(dim=-1, keepdim=True))) @ v


EAGER = {
    "softmax": softmax,
    "tanhmax": tanhmax,
    "multimax": multimax,
    "expressive": expressive,
    "sigmoid": sigmoid,
    "sigsoftmax": sigsoftmax,
    "relu": relu,
    "linear": linear,
}
