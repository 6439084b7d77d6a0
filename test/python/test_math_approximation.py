"""Error of the f32 math the kernels evaluate: attn-approximate-math replaces exp,
tanh, log1p ... by upstream polynomial approximations, on 16-lane vectors in the tiled
kernels (head dims 32/64/128) and on scalars in the generic loops. A kernel whose
numerator is f(s) over a constant denominator 1 and a single key with v = 1 returns
O_i = f(s_i) exactly up to f's own error, so sweeping s_i over a range measures it."""
import subprocess
import sys

import pytest
import torch

from conftest import ATTN_COMPILE, REPO

sys.path.insert(0, str(REPO / "bench"))
from peers import host_has_avx512  # noqa: E402

PROBES = {
    # name: (region body computing %g from %s, torch function, s range)
    "exp": ("%g = math.exp %s : f32", torch.exp, (-87.0, 88.0)),
    "tanh": ("%g = math.tanh %s : f32", torch.tanh, (-12.0, 12.0)),
    "log1p": ("%g = math.log1p %s : f32", torch.log1p, (-0.99, 60.0)),
    "erf": ("%g = math.erf %s : f32", torch.erf, (0.05, 5.0)),
}
# e^s of any score over a constant denominator overflows, which attn-classify-normalizer
# refuses in a numerator; the exp probe computes f in the score mod instead (the same
# kernel math, evaluated as written) and yields the score: g = s.
IN_SCORE_MOD = {"exp"}


ARGS = "%s: f32, %b: index, %h: index, %i: index, %j: index"


def probe_source(name, body):
    """A kernel computing f (`body`, %g from %s) of the raw score q·k in its numerator
    over C = 1, or in its score mod with g = s (IN_SCORE_MOD)."""
    in_mod = name in IN_SCORE_MOD
    mod = f" mod {{\n^bb0({ARGS}):\n  {body}\n  attn.yield %g : f32\n}}" if in_mod else ""
    numerator = "attn.yield %s : f32" if in_mod else f"{body}\n    attn.yield %g : f32"
    return f"""
attn.score @dot contract dot{mod}
attn.normalizer @{name} {{
  numerator {{
  ^bb0({ARGS}):
    {numerator}
  }}
  denominator constant 1.0
}}
attn.kernel @{name}_probe normalizer(@{name}) score(@dot)
"""


@pytest.fixture(scope="module")
def probes(tmp_path_factory, attn_mod):
    out = {}
    for name, (body, _, _) in PROBES.items():
        src = tmp_path_factory.mktemp("probe") / f"{name}.mlir"
        src.write_text(probe_source(name, body))
        so = src.with_suffix(".so")
        r = subprocess.run([str(ATTN_COMPILE), str(src), "-o", str(so)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        out[name] = str(so)
    return out


def _probe(so, s, d):
    """f(s) for each s, one query row each, at the dtype of s."""
    q = torch.zeros(1, 1, s.numel(), d, dtype=s.dtype)
    q[0, 0, :, 0] = s
    k = torch.zeros(1, 1, 1, d, dtype=s.dtype)
    k[0, 0, 0, 0] = 1.0
    v = torch.ones(1, 1, 1, d, dtype=s.dtype)
    return torch.ops.attn.attention(so, q, k, v, torch.zeros(0, dtype=s.dtype), False,
                                    None)[0, 0, :, 0]


@pytest.mark.parametrize("d", [64, 3], ids=["vector-d64", "scalar-d3"])
@pytest.mark.parametrize("name", list(PROBES))
def test_f32_approximation_error(probes, name, d):
    _, exact, (lo, hi) = PROBES[name]
    s = torch.linspace(lo, hi, 4001, dtype=torch.float64).float()
    o = _probe(probes[name], s, d).double()
    want = exact(s.double())   # f at the f32 input actually used
    rel = ((o - want).abs() / want.abs().clamp_min(1e-30)).max().item()
    # A few ulps of f32 (2^-23 ≈ 1.2e-7): tight enough that a broken polynomial or a
    # lost range reduction fails, loose enough for the approximations' documented error.
    assert torch.isfinite(o).all(), f"{name}: non-finite values in range"
    assert rel < 4e-6, f"{name} (d={d}): max relative error {rel:.2e}"


@pytest.mark.parametrize("d", [64, 3], ids=["vector-d64", "scalar-d3"])
def test_f64_erf_calls_libm(probes, d):
    """f64 keeps libm, and erf has no LLVM intrinsic: the vectorised kernels call it once
    per lane (the host lowering used to stop at the vector.extract this unrolling left)."""
    s = torch.linspace(-5.0, 5.0, 4001, dtype=torch.float64)
    o = _probe(probes["erf"], s, d)
    assert torch.allclose(o, torch.erf(s), rtol=1e-15, atol=1e-16)


@pytest.mark.parametrize("d", [64, 3], ids=["vector-d64", "scalar-d3"])
def test_f32_exp_outside_the_normal_range(probes, d):
    """Where e^x leaves f32's normal range: 0 far below, +inf above, NaN and the
    infinities through. Below 2^-126 both forms return 0 (the 16-lane form on AVX-512,
    which scales by vscalefps, zeroes those lanes itself) or, upstream's scalar form
    near the edge, a denormal no larger than e^x: a denormal weight would make every
    multiply it enters take a microcode assist."""
    s = torch.tensor([float("-inf"), -1e4, -200.0, -104.5, 88.75, 89.0, 100.0, float("inf"),
                      float("nan")])
    o = _probe(probes["exp"], s, d)
    want = torch.exp(s)
    assert torch.equal(o.isnan(), want.isnan())
    assert torch.equal(o[~want.isnan()], want[~want.isnan()]), (o, want)
    below_normal = torch.tensor([-87.5, -90.0, -95.0, -100.0, -103.0])
    o = _probe(probes["exp"], below_normal, d)
    ulp = torch.finfo(torch.float32).smallest_normal * torch.finfo(torch.float32).eps  # 2^-149
    if d == 3 or not host_has_avx512():  # narrower vectors take the scalar form's ldexp lane by lane
        assert ((o >= 0) & (o <= torch.exp(below_normal) + ulp)).all(), o
    else:
        assert (o == 0).all(), o
