"""Eager float64 PyTorch reference for the attention formula of DESIGN.md section 2.

Per batch b and head h, queries q_i (i < Nq), keys k_j, values v_j (j < Nk):

    s_ij   = score(q_i, k_j)                       (scaled dot, squared dot, or φ(q)·φ(k))
    keep_ij = mask(i, j)                            causal: j <= i; padding: j < key_lengths[b]
    O_i    = Σ_j keep_ij g(s_ij; θ) v_j / C_i
    C_i    = ε + Σ_j keep_ij h(s_ij; θ)             (sum denominator, ε = 0 unless the IR says)
           | constant                               (e.g. sigmoid attention: 1)
           | Σ_j keep_ij                            (count of unmasked keys)

and a row with no unmasked key gives O_i = 0 (and so zero gradients).

Everything is computed eagerly on the full [B, H, Nq, Nk] score tensor, in whatever dtype
the inputs have (use float64), and the gradients (dq, dk, dv, dθ) come from
torch.autograd -- nothing here is hand-derived, so the reference checks the compiler's
symbolic differentiation independently.

Stabilisation. For the normalizers whose g and h carry one exp factor (softmax, TanhMax,
MultiMax, sigsoftmax) every function g/h below takes a shift ``m`` and returns
g(s)·e^(-m) (resp. h(s)·e^(-m)). ``m_i`` is the row maximum, over unmasked keys, of the
argument of that exp (s, |s| or σ(s)); the factor e^(-m_i) cancels in g/C exactly, so the
result is the same function, but |s| ~ 1e4 no longer overflows. ``m`` is detached: O does
not depend on it. Non-exponential normalizers ignore m (it is 0 for them).

Usage:
    from reference import NORMALIZERS, attention
    O = attention("tanhmax", q, k, v, params, is_causal=True, key_lengths=lens)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Union

import torch

Tensor = torch.Tensor


# ----------------------------------------------------------------------------- scores
def scaled_dot(q: Tensor, k: Tensor) -> Tensor:
    """s_ij = q_i·k_j / sqrt(d), d = head dim of q (the default attn.score)."""
    d = q.shape[-1]
    return torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)


def squared_dot(q: Tensor, k: Tensor) -> Tensor:
    """Expressive attention: s_ij = (q_i·k_j)^2 (contract dot, no scale, then squared)."""
    dot = torch.matmul(q, k.transpose(-1, -2))
    return dot * dot


def elu_plus_one(x: Tensor) -> Tensor:
    """φ(x) = x + 1 for x >= 0, e^x for x < 0 (elementwise feature map)."""
    return torch.where(x < 0, torch.exp(torch.clamp(x, max=0.0)), x + 1.0)


def elu_feature_dot(q: Tensor, k: Tensor) -> Tensor:
    """Linear attention: s_ij = Σ_c φ(q_ic) φ(k_jc) (no scale)."""
    return torch.matmul(elu_plus_one(q), elu_plus_one(k).transpose(-1, -2))


def relu_feature_dot(q: Tensor, k: Tensor) -> Tensor:
    """Linear attention with φ = relu (subgradient 0 at 0): s_ij = relu(q_i)·relu(k_j)."""
    return torch.matmul(pos(q), pos(k).transpose(-1, -2))


# π/(2M) for M = 1024, the literal of examples/families/cosformer.mlir
COSFORMER_HALF_PI_OVER_M = 1.5339808e-03


def _positions(q: Tensor, k: Tensor):
    """(i - j) as a [Nq, Nk] tensor of q's dtype."""
    i = torch.arange(q.shape[-2], dtype=q.dtype).view(-1, 1)
    j = torch.arange(k.shape[-2], dtype=q.dtype).view(1, -1)
    return i - j


def cosformer_score(q: Tensor, k: Tensor) -> Tensor:
    """cosFormer: s_ij = relu(q_i)·relu(k_j) · cos(π/2 · (i - j) / M)."""
    return relu_feature_dot(q, k) * torch.cos(COSFORMER_HALF_PI_OVER_M * _positions(q, k))


def diffusion_score(q: Tensor, k: Tensor, p: Tensor) -> Tensor:
    """LDN: s_ij = -(i - j)² / (2σ²), position only (params: dt, sigma)."""
    sigma = p[1]
    d = _positions(q, k)
    s = -(d * d) / (2 * sigma * sigma)
    return s.expand(*q.shape[:-2], q.shape[-2], k.shape[-2])


# ------------------------------------------------------------------------ normalizers
@dataclass
class Normalizer:
    name: str
    score: Callable[[Tensor, Tensor], Tensor]
    # g(s, params, m) -> g(s; θ)·e^(-m)
    g: Callable[[Tensor, Tensor, Tensor], Tensor]
    # "sum": C = eps + Σ h(s, params, m); "constant": C = constant; "count": C = #keys
    denominator: str
    h: Optional[Callable[[Tensor, Tensor, Tensor], Tensor]] = None
    eps: float = 0.0
    constant: float = 1.0
    # exponent argument a(s) for the stabiliser m_i = max_j a(s_ij); None: not stabilised
    exp_arg: Optional[Callable[[Tensor, Tensor], Tensor]] = None
    param_names: List[str] = field(default_factory=list)
    param_defaults: List[float] = field(default_factory=list)
    kernel: str = ""
    # the kernel's IR holds a causal attn.mask (in addition to is_causal)
    causal: bool = False
    # score(q, k, params) instead of score(q, k)
    score_params: bool = False

    def initial_params(self, dtype=torch.float64) -> Tensor:
        return torch.tensor(self.param_defaults, dtype=dtype)


# softmax: g = h = e^s
def _softmax_g(s, p, m):
    return torch.exp(s - m)


# TanhMax: g = e^s - e^-s, h = e^s + e^-s, stabilised with m = max|s|
def _tanhmax_g(s, p, m):
    return torch.exp(s - m) - torch.exp(-s - m)


def _tanhmax_h(s, p, m):
    return torch.exp(s - m) + torch.exp(-s - m)


# sigsoftmax: g = h = e^s·sigmoid(s). The sigmoid is not bounded away from 0: for
# s -> -inf, g ~ e^(2s), so a shift by max s alone underflows a row whose scores are all
# very negative. The exponent used for the shift is the exact log g = s + log sigmoid(s).
def _sigsoftmax_g(s, p, m):
    return torch.exp(s + torch.nn.functional.logsigmoid(s) - m)


def _sigsoftmax_log_g(s, p):
    return s + torch.nn.functional.logsigmoid(s)


# MultiMax, second order:
#   σ(s) = s + Σ_{n=1,2} (1 - tb_n)·max(b_n - s, 0)^n + (td_n - 1)·max(s - d_n, 0)^n
#   g = h = e^σ(s)
MULTIMAX_PARAMS = ["tb1", "td1", "b1", "d1", "tb2", "td2", "b2", "d2"]


def pos(x: Tensor) -> Tensor:
    """max(x, 0) with derivative 0 at the kink x = 0 (DESIGN.md: subgradient 0 at kinks;
    torch.maximum would split the gradient 1/2 : 1/2 there and torch.clamp would give 1)."""
    return torch.where(x > 0, x, torch.zeros((), dtype=x.dtype))


def multimax_sigma(s: Tensor, p: Tensor) -> Tensor:
    tb1, td1, b1, d1, tb2, td2, b2, d2 = p.unbind(0)
    below1 = pos(b1 - s)
    above1 = pos(s - d1)
    below2 = pos(b2 - s)
    above2 = pos(s - d2)
    return (s
            + (1 - tb1) * below1 + (td1 - 1) * above1
            + (1 - tb2) * below2 ** 2 + (td2 - 1) * above2 ** 2)


def _multimax_g(s, p, m):
    return torch.exp(multimax_sigma(s, p) - m)


# sigmoid attention: g = sigmoid(s + bias), C = 1
def _sigmoid_g(s, p, m):
    bias = p[0]
    return torch.sigmoid(s + bias)


# ReLU attention: g = max(s, 0), C = number of unmasked keys
def _relu_g(s, p, m):
    return pos(s)


# softplus-normalised attention: g = h = softplus(s), summed, not stabilised
def _softplus_g(s, p, m):
    return torch.nn.functional.softplus(s)


# expressive / linear: g = h = s
def _identity_g(s, p, m):
    return s


# LDN diffusion: g = Δt·e^s (s <= 0), C = 1
def _diffusion_g(s, p, m):
    return p[0] * torch.exp(s)


NORMALIZERS: Dict[str, Normalizer] = {
    "softmax": Normalizer(
        "softmax", scaled_dot, _softmax_g, "sum", h=_softmax_g,
        exp_arg=lambda s, p: s, kernel="softmax_attention"),
    "tanhmax": Normalizer(
        "tanhmax", scaled_dot, _tanhmax_g, "sum", h=_tanhmax_h,
        exp_arg=lambda s, p: s.abs(), kernel="tanhmax_attention"),
    "multimax": Normalizer(
        "multimax", scaled_dot, _multimax_g, "sum", h=_multimax_g,
        exp_arg=multimax_sigma, param_names=list(MULTIMAX_PARAMS),
        param_defaults=[1.0, 1.0, -1.0, 1.0, 1.0, 1.0, -2.0, 2.0],
        kernel="multimax_attention"),
    "sigsoftmax": Normalizer(
        "sigsoftmax", scaled_dot, _sigsoftmax_g, "sum", h=_sigsoftmax_g,
        exp_arg=_sigsoftmax_log_g, kernel="sigsoftmax_attention"),
    "sigmoid": Normalizer(
        "sigmoid", scaled_dot, _sigmoid_g, "constant", constant=1.0,
        param_names=["bias"], param_defaults=[-4.0], kernel="sigmoid_attention"),
    "relu": Normalizer(
        "relu", scaled_dot, _relu_g, "count", kernel="relu_attention"),
    "softplus": Normalizer(
        "softplus", scaled_dot, _softplus_g, "sum", h=_softplus_g,
        kernel="softplus_attention"),
    "expressive": Normalizer(
        "expressive", squared_dot, _identity_g, "sum", h=_identity_g, eps=1e-6,
        kernel="expressive_attention"),
    "linear": Normalizer(
        "linear", elu_feature_dot, _identity_g, "sum", h=_identity_g, eps=1e-6,
        kernel="linear_attention"),
    # examples/families/
    "linear_causal": Normalizer(
        "linear_causal", elu_feature_dot, _identity_g, "sum", h=_identity_g, eps=1e-6,
        kernel="linear_causal", causal=True),
    "relu_kernel": Normalizer(
        "relu_kernel", relu_feature_dot, _identity_g, "sum", h=_identity_g, eps=1e-6,
        kernel="relu_kernel_attention"),
    "cosformer": Normalizer(
        "cosformer", cosformer_score, _identity_g, "sum", h=_identity_g, eps=1e-6,
        kernel="cosformer_attention"),
    # kernelised test kernels (IR in test/python/test_linear_families.py): learnable
    # g = α·s, h = β·s; and the non-local dot product g = s over the key count
    "linear_params": Normalizer(
        "linear_params", elu_feature_dot, lambda s, p, m: p[0] * s, "sum",
        h=lambda s, p, m: p[1] * s, eps=1e-6, param_names=["alpha", "beta"],
        param_defaults=[1.5, 0.8], kernel="linear_params"),
    "nonlocal": Normalizer(
        "nonlocal", scaled_dot, _identity_g, "count", kernel="nonlocal"),
    "ldn": Normalizer(
        "ldn", diffusion_score, _diffusion_g, "constant", constant=1.0,
        param_names=["dt", "sigma"], param_defaults=[0.1, 2.0], kernel="ldn",
        causal=True, score_params=True),
}


# ------------------------------------------------------------------------------ masks
def keep_mask(B: int, Nq: int, Nk: int, is_causal: bool = False,
              key_lengths: Optional[Tensor] = None) -> Tensor:
    """Boolean [B, 1, Nq, Nk]: True where key j is visible to query i."""
    i = torch.arange(Nq).view(1, 1, Nq, 1)
    j = torch.arange(Nk).view(1, 1, 1, Nk)
    keep = torch.ones(B, 1, Nq, Nk, dtype=torch.bool)
    if is_causal:
        keep = keep & (j <= i)
    if key_lengths is not None:
        keep = keep & (j < key_lengths.view(B, 1, 1, 1).to(torch.int64))
    return keep


# -------------------------------------------------------------------------- attention
def _shift(nz, s, params, keep):
    """(m [B,H,Nq], per-pair shift [B,H,Nq,Nk]) for the stabilised normalizers."""
    B, H, Nq, Nk = s.shape
    zero = torch.zeros((), dtype=s.dtype)
    if nz.exp_arg is None:
        m = torch.zeros(B, H, Nq, dtype=s.dtype)
        return m, m.unsqueeze(-1)
    a = nz.exp_arg(s, params).detach()
    m = a.masked_fill(~keep, -math.inf).max(dim=-1).values
    m = torch.where(keep.any(-1), m, zero)
    # shift per pair: m_i where kept; a masked pair (discarded anyway) is shifted by its
    # own exponent so that no inf is ever formed, not even in its gradient
    return m, torch.where(keep, m.unsqueeze(-1), a)


def attention_with_stats(normalizer: Union[str, Normalizer], q: Tensor, k: Tensor,
                         v: Tensor, params: Optional[Tensor] = None,
                         is_causal: bool = False,
                         key_lengths: Optional[Tensor] = None):
    """Returns (O, m, C·e^-m, C) with O [B,H,Nq,dv], the others [B,H,Nq].

    m is the stabiliser (0 for non-exponential normalizers)."""
    nz = NORMALIZERS[normalizer] if isinstance(normalizer, str) else normalizer
    if params is None:
        params = nz.initial_params(q.dtype)
    B, H, Nq, _ = q.shape
    Nk = k.shape[2]
    keep = keep_mask(B, Nq, Nk, is_causal or nz.causal, key_lengths).expand(B, H, Nq, Nk)
    zero = torch.zeros((), dtype=q.dtype)

    s = nz.score(q, k, params) if nz.score_params else nz.score(q, k)
    # masked pairs contribute nothing; replace their score by 0 before g/h so that no
    # inf/NaN can appear in them (and in their gradients) at all.
    s = torch.where(keep, s, zero)
    row_has_key = keep.any(dim=-1)                                  # [B,H,Nq]

    m, m_ = _shift(nz, s, params, keep)

    g = torch.where(keep, nz.g(s, params, m_), zero)                # g·e^-m
    if nz.denominator == "sum":
        h = torch.where(keep, nz.h(s, params, m_), zero)
        C_scaled = h.sum(dim=-1)                                     # C·e^-m
        if nz.eps:
            C_scaled = C_scaled + nz.eps * torch.exp(-m)
    elif nz.denominator == "constant":
        C_scaled = torch.full((B, H, Nq), nz.constant, dtype=q.dtype)
    elif nz.denominator == "count":
        C_scaled = keep.sum(dim=-1).to(q.dtype)
    else:
        raise ValueError(nz.denominator)

    num = torch.matmul(g, v)                                        # Σ_j g v_j ·e^-m
    safe_C = torch.where(row_has_key, C_scaled, torch.ones((), dtype=q.dtype))
    O = num / safe_C.unsqueeze(-1)
    O = torch.where(row_has_key.unsqueeze(-1), O, zero)
    C = C_scaled * torch.exp(m) if nz.exp_arg is not None else C_scaled
    return O, m, C_scaled, C


def attention(normalizer, q, k, v, params=None, is_causal=False, key_lengths=None):
    return attention_with_stats(normalizer, q, k, v, params, is_causal, key_lengths)[0]


def attention_and_grads(normalizer, q, k, v, params, dout, is_causal=False,
                        key_lengths=None):
    """Forward and autograd backward in the dtype of the inputs (use float64).

    Returns dict with O, dq, dk, dv, dparams (all detached)."""
    q = q.detach().clone().requires_grad_(True)
    k = k.detach().clone().requires_grad_(True)
    v = v.detach().clone().requires_grad_(True)
    p = params.detach().clone().requires_grad_(True)
    O = attention(normalizer, q, k, v, p, is_causal, key_lengths)
    inputs = [q, k, v, p]
    grads = torch.autograd.grad(O, inputs, grad_outputs=dout, allow_unused=True)
    grads = [torch.zeros_like(x) if gr is None else gr for x, gr in zip(inputs, grads)]
    return {"O": O.detach(), "dq": grads[0], "dk": grads[1], "dv": grads[2],
            "dparams": grads[3]}


# ------------------------------------------------- DESIGN.md's backward, by formula
def design_backward(normalizer, q, k, v, params, dout, is_causal=False, key_lengths=None,
                    absolute=False):
    """The binding backward formulas of DESIGN.md section 2, written out literally:

        w_ij = g_ij / C_i,   D_i = dO_i · O_i
        dV_j  = Σ_i w_ij dO_i
        ds_ij = [ g'(s_ij) (dO_i·v_j) − h'(s_ij) D_i ] / C_i        (h' = 0 for constant C)
        dθ    = Σ_ij [ ∂g/∂θ (dO_i·v_j) − ∂h/∂θ D_i ] / C_i        (no θ in the scores here)
        then through the score: dot → dQ = dS·K·scale, dK = dSᵀ·Q·scale; squared dot
        through t²; feature map through φ.

    Scalar derivatives g', h', ∂g/∂θ, ∂h/∂θ are taken elementwise with autograd. g, h,
    C and their derivatives all carry the same factor e^(-m_i) (the stabiliser, held
    constant), which cancels. Used to cross-check the autograd reference.

    absolute=True gives the *term scale* instead: every factor replaced by its absolute
    value and every difference by a sum (|g'|·|dO|·|v| + |h'|·|D|, ...). Rounding errors
    of any evaluation order are bounded by (a small multiple of) the unit roundoff times
    this scale, so it is the yardstick for float32 errors of quantities that cancel to
    ~0 (a single visible key gives w = 1 and ds = 0 exactly).
    """
    nz = NORMALIZERS[normalizer] if isinstance(normalizer, str) else normalizer
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    keep = keep_mask(B, Nq, Nk, is_causal, key_lengths).expand(B, H, Nq, Nk)
    zero = torch.zeros((), dtype=q.dtype)
    row_has_key = keep.any(-1)

    # score and its local derivative(s)
    if nz.score is scaled_dot:
        t = torch.matmul(q, k.transpose(-1, -2))
        s = t / math.sqrt(d)
    elif nz.score is squared_dot:
        t = torch.matmul(q, k.transpose(-1, -2))
        s = t * t
    else:
        fq, fk = elu_plus_one(q), elu_plus_one(k)
        s = torch.matmul(fq, fk.transpose(-1, -2))
    s = torch.where(keep, s, zero)
    m, m_ = _shift(nz, s, params, keep)

    def elementwise(fn):
        """val_ij = fn(s_ij; θ), its derivative in s_ij, and ∂val_ij/∂θ_r for each r."""
        s_ = s.detach().clone().requires_grad_(True)
        val = fn(s_, params.detach(), m_)
        gs = torch.autograd.grad(val.sum(), s_)[0]       # val_ij depends on s_ij only
        dps = []
        for r in range(params.numel()):
            e_r = torch.zeros_like(params)
            e_r[r] = 1.0
            _, jv = torch.autograd.functional.jvp(
                lambda e: fn(s.detach(), params.detach() + e * e_r, m_),
                (torch.zeros((), dtype=q.dtype),), (torch.ones((), dtype=q.dtype),))
            dps.append(jv)
        return val.detach(), gs, dps

    g, gprime, dg_dp = elementwise(nz.g)
    g = torch.where(keep, g, zero)
    gprime = torch.where(keep, gprime, zero)
    dg_dp = [torch.where(keep, x, zero) for x in dg_dp]
    if nz.denominator == "sum":
        hval, hprime, dh_dp = elementwise(nz.h)
        hval = torch.where(keep, hval, zero)
        hprime = torch.where(keep, hprime, zero)
        dh_dp = [torch.where(keep, x, zero) for x in dh_dp]
        C = hval.sum(-1) + (nz.eps * torch.exp(-m) if nz.eps else 0.0)
    else:
        hprime = torch.zeros_like(s)
        dh_dp = [torch.zeros_like(s) for _ in range(params.numel())]
        C = (torch.full((B, H, Nq), nz.constant, dtype=q.dtype)
             if nz.denominator == "constant" else keep.sum(-1).to(q.dtype))
    C = torch.where(row_has_key, C, torch.ones((), dtype=q.dtype))
    if absolute:
        A = torch.abs
        minus = lambda a, b: a + b
        q, k, v, dout, t = A(q), A(k), A(v), A(dout), (A(t) if nz.score is not elu_feature_dot else None)
        g, gprime, hprime, C = A(g), A(gprime), A(hprime), A(C)
        dg_dp, dh_dp = [A(x) for x in dg_dp], [A(x) for x in dh_dp]
    else:
        minus = lambda a, b: a - b
    Cc = C.unsqueeze(-1)
    w = g / Cc
    O = torch.matmul(w, v)
    O = torch.where(row_has_key.unsqueeze(-1), O, zero)
    D = (dout * O).sum(-1, keepdim=True)                     # [B,H,Nq,1]
    dOv = torch.matmul(dout, v.transpose(-1, -2))            # dO_i·v_j
    dV = torch.matmul(w.transpose(-1, -2), dout)
    ds = minus(gprime * dOv, hprime * D) / Cc
    ds = torch.where(keep, ds, zero)
    dparams = torch.stack([(minus(dg_dp[r] * dOv, dh_dp[r] * D) / Cc).sum()
                           for r in range(params.numel())]) \
        if params.numel() else torch.zeros(0, dtype=q.dtype)

    if nz.score is scaled_dot:
        sc = 1.0 / math.sqrt(d)
        dQ = torch.matmul(ds, k) * sc
        dK = torch.matmul(ds.transpose(-1, -2), q) * sc
    elif nz.score is squared_dot:
        dt = ds * 2 * t
        dQ = torch.matmul(dt, k)
        dK = torch.matmul(dt.transpose(-1, -2), q)
    else:
        dphi = lambda x: torch.where(x < 0, torch.exp(torch.clamp(x, max=0.0)),
                                     torch.ones_like(x))
        dQ = torch.matmul(ds, fk) * dphi(q)
        dK = torch.matmul(ds.transpose(-1, -2), fq) * dphi(k)
    return {"O": O, "dq": dQ, "dk": dK, "dv": dV, "dparams": dparams}
