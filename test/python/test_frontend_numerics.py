"""Traced functions mean what they mean in PyTorch. Score mods, masks, feature maps and
normalizers are written once, with torch functions and Python operators; the front-end
traces them into kernels, and PyTorch runs the very same functions eagerly on tensors as
the reference. Outputs and every gradient (q, k, v, params) agree in float64. Between
them the kernels use every function the front-end traces, reverse operators, Python
float and int constants, and position arithmetic with Python's semantics (// and %
floor, / gives a float, ~ & | ^ on integers)."""
import inspect
import math

import pytest
import torch

import attn


def call(fn, **available):
    """fn with the arguments it names (the front-end binds region arguments by name)."""
    return fn(**{name: available[name] for name in inspect.signature(fn).parameters})


def dispatch(functions):
    """A mod that applies functions[k] to the scores of key k (so that one kernel tests
    them all); keys past the list keep s."""
    def mod(s, i, j):
        out = s
        for k, f in enumerate(functions):
            out = torch.where(j == k, call(f, s=s, i=i, j=j), out)
        return out
    return mod


FLOAT_FUNCTIONS = [
    lambda s: torch.exp(s),
    lambda s: torch.expm1(s),
    lambda s: torch.log(s * s + 0.5),
    lambda s: torch.log1p(s * s),
    lambda s: torch.sqrt(s * s + 0.25),
    lambda s: torch.rsqrt(s * s + 0.25),
    lambda s: torch.tanh(s),
    lambda s: torch.sin(3 * s),
    lambda s: torch.cos(3 * s),
    lambda s: torch.atan(2 * s),
    lambda s: torch.floor(4 * s) + s,
    lambda s: torch.ceil(4 * s) - s,
    lambda s: torch.trunc(4 * s) * s,
    lambda s: torch.round(4 * s) * s,
    lambda s: torch.abs(s - 0.1),
    lambda s: abs(s + 0.1) * 2,
    lambda s: torch.sigmoid(2 * s),
    lambda s: torch.relu(s - 0.2),
    lambda s: torch.clamp(s, -0.5, 0.5),
    lambda s: torch.clamp(s, min=-0.3) + torch.clamp(s, max=0.4),
    lambda s: torch.maximum(s, 0.5 - s),
    lambda s: torch.minimum(s, s * s - 0.5),
    lambda s: torch.where(s > 0.2, s * s, -s),
    lambda s: torch.where((s < -0.5) | ~(s < 0.5), 1.0, s),
    lambda s: torch.where((s > 0) & (s != 0.25) ^ (s >= 1), s, 2),
    lambda s: torch.pow(s * s + 0.5, 1.5),
    lambda s: (s * s + 0.5) ** -0.5,
    lambda s: s ** 3 - (s + 3) ** -2 + s ** 0,
    lambda s: 2.0 ** s,
    lambda s: 1.5 - s,
    lambda s: 0.5 / (s * s + 1),
    lambda s: s % 0.3,
    lambda s: -s * 1.5 + 0.25,
    lambda s: torch.exp2(s),
    lambda s: torch.log2(0.5 + s * s),
]

POSITION_FUNCTIONS = [
    lambda s, i, j: s + (i - j) / 4,
    lambda s, i, j: s * abs(i - j),
    lambda s, i, j: s + (i - j) // 3,
    lambda s, i, j: s + (i - j) % 3,
    lambda s, i, j: s - (i - j) ** 2 / 8,
    lambda s, i, j: s * torch.clamp(j - i, -2, 2),
    lambda s, i, j: s + torch.maximum(i, j) - torch.minimum(i, 2 * j),
    lambda s, i, j: torch.where(i > j, s, -s),
    lambda s, i, j: torch.where((i & 3) == (j & 3), s, 0),
    lambda s, i, j: s + (~i) + (i | j) - (i ^ j),
    lambda s, i, j: torch.exp(-(i - j) ** 2 / 16.0) * s,
    lambda s, i, j: s + 7 // (j + 1) + 10 % (i + 3) - (5 - i),
    lambda s, i, j: torch.where(j <= i, 1.0, 0.5) * s + torch.sqrt(i + 1.0),
]


def keep_banded(i, j):
    return ((i - j) // 3 % 2 == 0) & (j <= i + 2) | (j == 0)


def elu_plus_one(x):
    return torch.where(x > 0, x + 1.0, torch.exp(x))


# name -> the normalizer's and score's arguments, the mask, sizes, the tolerance
KERNELS = {
    "float_functions": dict(
        numerator=lambda s: s, denominator=1.0, contract="dot", mod=dispatch(FLOAT_FUNCTIONS),
        keys=len(FLOAT_FUNCTIONS) + 2, q_scale=0.35),
    "position_functions": dict(
        numerator=lambda s: s, denominator=1.0, contract="dot",
        mod=dispatch(POSITION_FUNCTIONS), keys=len(POSITION_FUNCTIONS) + 2, q_scale=0.35),
    "softmax1_alibi_banded": dict(
        numerator=lambda s, tau: torch.exp(tau * s), denominator=lambda s, tau: torch.exp(tau * s),
        epsilon=1.0, norm_params={"tau": 0.8}, contract="scaled_dot",
        mod=lambda s, i, j, slope: s - slope * abs(i - j), score_params={"slope": 0.3},
        mask=keep_banded, keys=19, q_scale=1.0),
    "linear_count_causal": dict(
        numerator=lambda s: s, denominator="count", contract="dot", feature=elu_plus_one,
        mask=lambda i, j: j <= i, keys=17, q_scale=0.5),
}


def build(spec):
    norm = attn.normalizer(numerator=spec["numerator"], denominator=spec["denominator"],
                           epsilon=spec.get("epsilon"), params=spec.get("norm_params"))
    score = attn.score(spec["contract"], mod=spec.get("mod"), feature=spec.get("feature"),
                       params=spec.get("score_params"))
    mask = attn.mask(spec["mask"]) if "mask" in spec else None
    return attn.kernel(norm, score=score, mask=mask)


def eager(spec, q, k, v, params):
    """The same functions run by PyTorch on [B, H, Nq, Nk] tensors (positions are int64
    tensors; what they become as floats is float64, the default dtype in the test)."""
    named = dict(zip([*spec.get("norm_params", {}), *spec.get("score_params", {})], params))
    if "feature" in spec:
        q, k = call(spec["feature"], x=q), call(spec["feature"], x=k)
    s = q @ k.transpose(-1, -2)
    if spec["contract"] == "scaled_dot":
        s = s / math.sqrt(q.shape[-1])
    i = torch.arange(q.shape[-2])[:, None]
    j = torch.arange(k.shape[-2])[None, :]
    if "mod" in spec:
        s = call(spec["mod"], s=s, i=i, j=j, **named)
    keep = call(spec["mask"], i=i, j=j) if "mask" in spec else torch.ones_like(s, dtype=torch.bool)
    g = torch.where(keep, call(spec["numerator"], s=s, **named), 0.0)
    den = spec["denominator"]
    if callable(den):
        c = torch.where(keep, call(den, s=s, **named), 0.0).sum(-1, keepdim=True)
        c = c + spec.get("epsilon", 0.0)
    elif den == "count":
        c = keep.sum(-1, keepdim=True).to(s.dtype)
    else:
        c = den
    return (g @ v) / c


@pytest.fixture()
def float64_default():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


@pytest.mark.parametrize("name", list(KERNELS))
def test_compiled_kernel_matches_the_same_functions_run_by_torch(name, attn_mod, float64_default):
    spec = KERNELS[name]
    kernel = attn.compile(build(spec))
    g = torch.Generator().manual_seed(3)
    B, H, Nq, Nk, d = 2, 2, 24, spec["keys"], 16
    q = spec["q_scale"] * torch.randn(B, H, Nq, d, generator=g, dtype=torch.float64)
    k = spec["q_scale"] * torch.randn(B, H, Nk, d, generator=g, dtype=torch.float64)
    v = torch.randn(B, H, Nk, 8, generator=g, dtype=torch.float64)
    params = kernel.initial_params(torch.float64)
    assert params.tolist() == [*spec.get("norm_params", {}).values(),
                               *spec.get("score_params", {}).values()]
    dout = torch.randn(B, H, Nq, 8, generator=g, dtype=torch.float64)
    results = []
    for run in (lambda *a: kernel(*a[:3], a[3]), lambda *a: eager(spec, *a)):
        leaves = [t.clone().requires_grad_() for t in (q, k, v, params)]
        out = run(*leaves)
        grads = torch.autograd.grad(out, leaves, dout, allow_unused=True)
        results.append([out.detach()] + [torch.zeros_like(x) if gr is None else gr
                                         for x, gr in zip(leaves, grads)])
    for label, got, want in zip(["out", "dq", "dk", "dv", "dparams"], *results):
        if want.numel():   # (empty: dparams of a kernel without params)
            assert torch.isfinite(want).all(), label
            error = (got - want).abs().max().item()
            allowed = spec.get("tolerance", 1e-9) * max(1.0, want.abs().max().item())
            assert error <= allowed, f"{name} {label}: {error:.3e}"
