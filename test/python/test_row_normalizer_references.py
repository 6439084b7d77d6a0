"""The float64 references of the normalizers outside the Σg/Σh form
(test/reference/row_normalizers.py) agree with their definitions: stick-breaking's
log-space scan with the paper's products, the exact sparsemax / 1.5-entmax thresholds
with bisection, and bisection's implicit gradient with autograd through the exact forms.
These references are what the compiled scan and implicit normalizers (issue 37) will be
tested against."""
import sys

import pytest
import torch

from conftest import REPO

sys.path.insert(0, str(REPO / "test" / "reference"))
import row_normalizers as rn  # noqa: E402

F64 = torch.float64


def scores(*shape, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(*shape, generator=g, dtype=F64)).requires_grad_()


def causal(nq, nk):
    return torch.arange(nk).view(1, nk) <= torch.arange(nq).view(nq, 1)


@pytest.mark.parametrize("keep", [torch.ones(5, 7, dtype=torch.bool), causal(5, 7),
                                  torch.rand(5, 7, generator=torch.Generator().manual_seed(1)) > 0.4])
def test_stick_breaking_scan_equals_the_products(keep):
    s = scores(2, 5, 7, scale=3.0)
    w, left_over = rn.stick_breaking(s, keep)
    torch.testing.assert_close(w, rn.stick_breaking_by_products(s, keep), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(w.sum(-1, keepdim=True) + left_over,
                               torch.ones_like(left_over), rtol=1e-12, atol=1e-12)
    assert (w[..., ~keep] == 0).all()


def test_stick_breaking_nearest_key_takes_its_share_first():
    s = torch.tensor([[0.0, 0.0, 10.0]], dtype=F64)
    w, _ = rn.stick_breaking(s, torch.ones(1, 3, dtype=torch.bool))
    assert w[0, 2] > 0.9999 and w[0, :2].sum() < 1e-4


ALL = torch.ones(4, 9, dtype=torch.bool)
SPARSE_KEEP = torch.rand(4, 9, generator=torch.Generator().manual_seed(2)) > 0.3


@pytest.mark.parametrize("exact, alpha", [(rn.sparsemax, 2.0), (rn.entmax15, 1.5)])
@pytest.mark.parametrize("keep", [ALL, SPARSE_KEEP, causal(4, 9)])
@pytest.mark.parametrize("scale", [0.3, 3.0, 1e3])
def test_exact_thresholds_equal_bisection_and_sum_to_one(exact, alpha, keep, scale):
    s = scores(3, 4, 9, scale=scale, seed=3)
    w = exact(s, keep)
    torch.testing.assert_close(w, rn.entmax_bisect(s, keep, alpha), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, dtype=F64), rtol=1e-12, atol=1e-12)
    assert (w[..., ~keep.expand_as(w)] == 0).all() and (w >= 0).all()


@pytest.mark.parametrize("exact, alpha", [(rn.sparsemax, 2.0), (rn.entmax15, 1.5)])
def test_implicit_gradient_equals_autograd_of_the_exact_form(exact, alpha):
    s = scores(2, 4, 9, scale=0.5, seed=4)
    dw = torch.randn(2, 4, 9, generator=torch.Generator().manual_seed(5), dtype=F64)
    (want,) = torch.autograd.grad((exact(s, SPARSE_KEEP) * dw).sum(), s)
    (got,) = torch.autograd.grad((rn.entmax_bisect(s, SPARSE_KEEP, alpha) * dw).sum(), s)
    assert (want != 0).sum() > 20, "supports of several keys, or the check says nothing"
    torch.testing.assert_close(got, want, rtol=1e-8, atol=1e-10)


def test_sparse_rows_and_rows_without_keys():
    s = torch.tensor([[5.0, 0.0, -1.0], [1.0, 1.0, 1.0], [2.0, 3.0, 4.0]], dtype=F64)
    keep = torch.tensor([[True, True, True], [True, True, True], [False, False, False]])
    for w in (rn.sparsemax(s, keep), rn.entmax15(s, keep), rn.entmax_bisect(s, keep, 1.25)):
        assert torch.equal(w[0], torch.tensor([1.0, 0.0, 0.0], dtype=F64)), "one key takes everything"
        torch.testing.assert_close(w[1], torch.full((3,), 1 / 3, dtype=F64))
        assert torch.equal(w[2], torch.zeros(3, dtype=F64)), "a row without a kept key"


def test_entmax_approaches_softmax_as_alpha_approaches_one():
    s = scores(4, 6, seed=6).detach()
    w = rn.entmax_bisect(s, torch.ones(4, 6, dtype=torch.bool), 1.001)
    torch.testing.assert_close(w, torch.softmax(s, -1), rtol=5e-3, atol=5e-3)


def test_bisection_refuses_alpha_at_most_one():
    with pytest.raises(ValueError, match="alpha > 1"):
        rn.entmax_bisect(torch.zeros(1, 2, dtype=F64), torch.ones(1, 2, dtype=torch.bool), 1.0)
