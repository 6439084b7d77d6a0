"""Exponentials in the forms papers write them (issue 33): exp2, 2.0 ** s, expm1,
sinh / cosh, log(1 + e^s), log1p(e^s) and Softpick's e^s - 1. attn-classify-normalizer
rewrites each to math.exp (online, stabilised) or to the bounded softplus, so every
kernel matches float64, forward and every gradient, f32 and f64, at ordinary scores and
at scores up to ±1e4, where the references are evaluated with a per-row shift m
(detached: the shift cancels exactly, so its gradients are the formula's) that keeps
float64 finite too. Before, exp2 and expm1 were classified plain and gave NaN rows in
f32 at |s| ~ 100.
"""
import math

import pytest
import torch

import general
from conftest import EXAMPLES, kernels_from
from helpers import check_close, seed_of

DTYPES = {"f64": torch.float64, "f32": torch.float32}
ARGS = "%s: f32, %b: index, %h: index, %i: index, %j: index"


def normalizer(name, numerator, denominator, epsilon=None):
    """IR of a kernel `name` with the given numerator and denominator bodies (MLIR ops
    over %s ending in `attn.yield`)."""
    eps = f"epsilon {epsilon} " if epsilon else ""
    return f"""
attn.normalizer @n {{
  numerator {{
  ^bb0({ARGS}):
{numerator}
  }}
  denominator {eps}{{
  ^bb0({ARGS}):
{denominator}
  }}
}}
attn.kernel @{name} normalizer(@n)
"""


EXP2 = "    %e = math.exp2 %s : f32\n    attn.yield %e : f32"
POW2 = "    %two = arith.constant 2.0 : f32\n    %e = math.powf %two, %s : f32\n    attn.yield %e : f32"
SINH = "    %g = math.sinh %s : f32\n    attn.yield %g : f32"
COSH = "    %g = math.cosh %s : f32\n    attn.yield %g : f32"
EXPM1_PLUS_ONE = ("    %one = arith.constant 1.0 : f32\n    %d = math.expm1 %s : f32\n"
                  "    %g = arith.addf %d, %one : f32\n    attn.yield %g : f32")
LOG1P_EXP = "    %e = math.exp %s : f32\n    %l = math.log1p %e : f32\n    attn.yield %l : f32"
LOG_ONE_PLUS_EXP = ("    %one = arith.constant 1.0 : f32\n    %e = math.exp %s : f32\n"
                    "    %p = arith.addf %one, %e : f32\n    %l = math.log %p : f32\n"
                    "    attn.yield %l : f32")

SOURCES = {
    "softpick": EXAMPLES / "softpick.mlir",
    "base2": normalizer("base2", EXP2, EXP2),
    "pow2": normalizer("pow2", POW2, POW2),
    "hyperbolic": normalizer("hyperbolic", SINH, COSH),
    # h = expm1(s) + 1 = e^s > 0, which the sign analysis (no cancellation) does not
    # see: ε is written, as for any sum it cannot prove positive.
    "expm1_plus_one": normalizer("expm1_plus_one", EXPM1_PLUS_ONE, EXPM1_PLUS_ONE,
                                 epsilon="1.0e-06"),
    "softplus_log1p": normalizer("softplus_log1p", LOG1P_EXP, LOG1P_EXP, epsilon="1.0e-06"),
    "softplus_log": normalizer("softplus_log", LOG_ONE_PLUS_EXP, LOG_ONE_PLUS_EXP, epsilon="1.0e-06"),
}

compiled = kernels_from(SOURCES.__getitem__)


# Each kernel's weights as (g·e^-m, h·e^-m, ε) in terms of (s, m), and its shift m(s)
# per row: the largest exponent (detached; softplus is bounded and needs none).
LN2 = math.log(2.0)
row_max = lambda x: x.amax(-1, keepdim=True).detach()
FORMS = {
    "softpick": (lambda s, m: torch.relu(torch.exp(s - m) - torch.exp(-m)),
                 lambda s, m: (torch.exp(s - m) - torch.exp(-m)).abs(), 1e-6,
                 lambda s: torch.clamp(row_max(s), min=0.0)),
    "base2": (lambda s, m: torch.exp(s * LN2 - m), lambda s, m: torch.exp(s * LN2 - m), 0.0,
              lambda s: row_max(s * LN2)),
    "hyperbolic": (lambda s, m: (torch.exp(s - m) - torch.exp(-s - m)) / 2,
                   lambda s, m: (torch.exp(s - m) + torch.exp(-s - m)) / 2, 0.0,
                   lambda s: row_max(s.abs())),
    "expm1_plus_one": (lambda s, m: torch.exp(s - m), lambda s, m: torch.exp(s - m), 1e-6,
                       lambda s: torch.clamp(row_max(s), min=0.0)),
    "softplus": (lambda s, m: torch.nn.functional.softplus(s),
                 lambda s, m: torch.nn.functional.softplus(s), 1e-6,
                 lambda s: torch.zeros_like(s[..., :1])),
}
FORM_OF = {"pow2": "base2", "softplus_log1p": "softplus", "softplus_log": "softplus"}


def reference(name):
    g, h, eps, shift = FORMS[FORM_OF.get(name, name)]

    def ref(q, k, v):
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        m = shift(s)
        C = h(s, m).sum(-1, keepdim=True) + eps * torch.exp(-m)
        return (g(s, m) @ v) / C
    return ref


def inputs(name, scale, dtype_seed):
    gen = torch.Generator().manual_seed(seed_of("stable", name, scale, dtype_seed))
    B, H, Nq, Nk, d = 1, 2, 5, 7, 8
    q = torch.randn(B, H, Nq, d, generator=gen, dtype=torch.float64)
    k = torch.randn(B, H, Nk, d, generator=gen, dtype=torch.float64)
    # Unit q rows and k rows of norm scale·sqrt(d): |s| up to about scale.
    q = q / q.norm(dim=-1, keepdim=True)
    k = scale * math.sqrt(d) * k / k.norm(dim=-1, keepdim=True)
    v = torch.randn(B, H, Nk, 6, generator=gen, dtype=torch.float64)
    dout = torch.randn(B, H, Nq, 6, generator=gen, dtype=torch.float64)
    return q, k, v, dout


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("scale", [2.0, 1e4])
@pytest.mark.parametrize("name", list(SOURCES))
def test_matches_float64(compiled, name, scale, dt):
    """O, dq, dk, dv against the shifted float64 reference; at scale 1e4 the scores reach
    ±1e4 (e^s overflows f32 at 89 and f64 at 710) and the outputs must stay finite."""
    kernel, dtype = compiled(name), DTYPES[dt]
    q, k, v, dout = inputs(name, scale, dt)
    leaves = [t.to(dtype).clone().requires_grad_() for t in (q, k, v)]
    O = kernel(*leaves, None)
    grads = torch.autograd.grad(O, leaves, grad_outputs=dout.to(dtype))
    got = {"O": O.detach(), "dq": grads[0], "dk": grads[1], "dv": grads[2]}
    assert all(torch.isfinite(t).all() for t in got.values()), f"{name}: non-finite at scale {scale}"
    want = general.attention_and_grads(reference(name), q, k, v, dout)
    # At ±1e4 the weights saturate and dq, dk shrink to ~1e-12 (e^-Δs): compare them at
    # the tolerance of O(1) terms (v and dout are O(1)), not relative to their own size.
    floor = 1.0 if scale > 100 else None
    check_close(got, want, dtype, floor=floor, context=f"{name} scale {scale} {dt}",
                names=list(got))


def test_explain_reports_the_rewrites(attn_mod, tmp_path):
    """--attn-explain says what the classifier rewrote (softplus, exp2, Softpick's 1)."""
    import subprocess
    from conftest import BUILD
    source = tmp_path / "k.mlir"
    source.write_text(SOURCES["softplus_log"])
    out = subprocess.run([str(BUILD / "bin" / "attn-opt"), str(source), "--attn-explain",
                          "-o", "/dev/null"], capture_output=True, text=True, check=True).stdout
    assert "rewritten" in out and "log(c + e^x) = softplus" in out
    softpick = subprocess.run([str(BUILD / "bin" / "attn-opt"), str(EXAMPLES / "softpick.mlir"),
                               "--attn-explain", "-o", "/dev/null"],
                              capture_output=True, text=True, check=True).stdout
    assert "online" in softpick and "expm1(x) = e^x - e^0" in softpick
    assert "c beside an exp factor" in softpick


def test_front_end_base2_softmax(attn_mod):
    """2.0 ** s and attn.exp2 from the Python front-end compile online and agree with the
    IR kernel's softmax of s·ln 2."""
    exp2_kernel = attn_mod.frontend.kernel(attn_mod.frontend.normalizer(
        numerator=lambda s: attn_mod.exp2(s), denominator="sum", name="base2"))
    pow_kernel = attn_mod.frontend.kernel(attn_mod.frontend.normalizer(
        numerator=lambda s: 2.0 ** s, denominator="sum", name="pow2"))
    q, k, v, _ = inputs("frontend", 1e3, "f32")
    q, k, v = (t.float() for t in (q, k, v))
    want = reference("base2")(q.double(), k.double(), v.double())
    for kernel in (exp2_kernel, pow_kernel):
        got = kernel.compile()(q, k, v, None)
        assert torch.isfinite(got).all()
        assert (got.double() - want).abs().max() <= 2e-4 * want.abs().max()


def test_zero_denominator_stops_with_the_fix(attn_mod, tmp_path):
    """s / Σ s compiles no more: the error names `epsilon` and the opt-out."""
    import subprocess
    from conftest import ATTN_COMPILE
    source = tmp_path / "ratio.mlir"
    source.write_text(normalizer("ratio", "    attn.yield %s : f32", "    attn.yield %s : f32"))
    r = subprocess.run([str(ATTN_COMPILE), str(source), "-o", str(tmp_path / "ratio.so")],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "which can be 0" in r.stderr and "epsilon 1.0e-6" in r.stderr
    assert "assume_nonzero_denominator" in r.stderr
    assert not (tmp_path / "ratio.so").exists()
