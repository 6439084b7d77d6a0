"""examples/families/location_sensitive.py (Chorowski et al.'s location-sensitive
attention on the compiled additive kernel) against an eager float64 reference written
here from the paper's formula, e_ij = w·tanh(W s_{i-1} + V h_j + U f_ij + b),
f_i = F * α_{i-1}: a few decoder steps unrolled, the contexts, the alignments and the
gradient of every leaf (W, b, V, U, w, the convolution F, the encoder states h, the
initial decoder state s_0 and the test's recurrence), in float64 and float32, with and
without padded keys; and its copy-task demo learns to step along the keys."""
import importlib
import sys

import pytest
import torch
import torch.nn.functional as F

from conftest import REPO
from helpers import check_close, seed_of

FAMILIES = REPO / "examples" / "families"
sys.path.insert(0, str(FAMILIES))

DTYPES = {"f64": torch.float64, "f32": torch.float32}
BATCH, KEYS, STEPS = 3, 13, 4      # 13 keys: not a multiple of the 16-lane vectors
LOCATION_GAIN = 10.0
KEY_LENGTHS = {"none": None, "padded": torch.tensor([13, 7, 10])}


@pytest.fixture(scope="module")
def example(attn_mod):
    return importlib.import_module("location_sensitive")


@pytest.fixture(scope="module")
def kernel(example):
    return example.compile_example("location_sensitive")


def reference_step(s_prev, h, alpha_prev, weights, conv, key_lengths):
    """The paper's step, eagerly: (c_i [B, d], α_i [B, Nk])."""
    W, b, V, U, w = (weights[n] for n in ("W", "b", "V", "U", "w"))
    location = F.conv1d(alpha_prev.unsqueeze(1), conv, padding=conv.shape[-1] // 2)
    pre = (s_prev @ W.T + b).unsqueeze(1) + h @ V.T + location.transpose(1, 2) @ U.T
    energy = torch.tanh(pre) @ w                                             # e_i [B, Nk]
    if key_lengths is not None:
        padding = torch.arange(h.shape[1]) >= key_lengths[:, None]
        energy = energy.masked_fill(padding, float("-inf"))
    alpha = torch.softmax(energy, dim=-1)
    return (alpha.unsqueeze(-1) * h).sum(1), alpha


def unroll(step, s0, h, alpha0, recurrence, key_lengths):
    """STEPS decoder steps, s_i = tanh(A s_{i-1} + C c_i): the contexts and alignments, a
    list [c_1, α_1, c_2, α_2, ...]. α_i reaches the next step's convolution and c_i the
    next decoder state, so the gradients cross the steps both ways."""
    A, C = recurrence
    s, alpha, outputs = s0, alpha0, []
    for _ in range(STEPS):
        context, alpha = step(s, h, alpha, key_lengths)
        outputs += [context, alpha]
        s = torch.tanh(s @ A.T + context @ C.T)
    return outputs


def gradients(outputs, cotangents, leaves):
    """The outputs (stacked per kind) and d(Σ <output, cotangent>)/d leaf for every leaf."""
    grads = torch.autograd.grad(outputs, list(leaves.values()), grad_outputs=cotangents)
    result = {"contexts": torch.stack(outputs[0::2]).detach(),
              "alignments": torch.stack(outputs[1::2]).detach()}
    result.update({f"d{name}": g for name, g in zip(leaves, grads)})
    return result


def reference(values, inputs, cotangents, dtype):
    """The eager reference in `dtype` from copies of the module's values."""
    leaf = lambda t: t.detach().to(dtype).clone().requires_grad_()
    weights = {n: leaf(t) for n, t in values["weights"].items()}
    leaves = dict(weights, F=leaf(values["F"]), **{n: leaf(inputs[n]) for n in ("h", "s0", "A", "C")})
    outputs = unroll(lambda s, h, alpha, lengths: reference_step(s, h, alpha, weights, leaves["F"], lengths),
                     leaves["s0"], leaves["h"], inputs["alpha0"].to(dtype), (leaves["A"], leaves["C"]),
                     inputs["key_lengths"])
    return gradients(outputs, [c.to(dtype) for c in cotangents], leaves)


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("padding", list(KEY_LENGTHS))
def test_decoder_steps_match_reference(example, kernel, padding, dt):
    dtype = DTYPES[dt]
    torch.manual_seed(seed_of("location_sensitive", padding))
    attention = example.LocationSensitiveAttention(kernel).to(dtype)
    with torch.no_grad():
        # U f_ij of the size of V h_j (the default initialisation makes it ~15x smaller),
        # so that the location term weighs in every comparison
        attention.location.weight.mul_(LOCATION_GAIN)
    d = attention.width
    key_lengths = KEY_LENGTHS[padding]
    lengths = torch.full((BATCH,), KEYS) if key_lengths is None else key_lengths
    alpha0 = (torch.arange(KEYS) < lengths[:, None]).double() / lengths[:, None]
    inputs = {"h": torch.randn(BATCH, KEYS, d, dtype=torch.float64),
              "s0": torch.randn(BATCH, d, dtype=torch.float64),
              "A": torch.randn(d, d, dtype=torch.float64) / d ** 0.5,
              "C": torch.randn(d, d, dtype=torch.float64) / d ** 0.5,
              "alpha0": alpha0, "key_lengths": key_lengths}
    cotangents = [torch.randn(BATCH, n, dtype=torch.float64) for _ in range(STEPS) for n in (d, KEYS)]
    h, s0, A, C = (inputs[n].to(dtype).requires_grad_() for n in ("h", "s0", "A", "C"))
    assert torch.allclose(example.uniform_alignment(h, key_lengths), alpha0.to(dtype))

    outputs = unroll(attention, s0, h, alpha0.to(dtype), (A, C), key_lengths)
    got = gradients(outputs, [c.to(dtype) for c in cotangents],
                    {"params": attention.params, "F": attention.location.weight,
                     "h": h, "s0": s0, "A": A, "C": C})
    dparams = got.pop("dparams")
    got.update({f"d{n}": g for n, g in attention.score_weights(dparams).items()})
    # the blocks of W_q and W_k that multiply the zeros of q and k_j (see the example)
    split = kernel.split_params(dparams)
    assert (split["W_q"][:, d + 1:] == 0).all() and (split["W_k"][:, d] == 0).all()

    values = {"weights": attention.score_weights(), "F": attention.location.weight}
    want = reference(values, inputs, cotangents, torch.float64)
    eager = reference(values, inputs, cotangents, torch.float32) if dtype == torch.float32 else None
    check_close(got, want, dtype, eager=eager, names=list(want),
                context=f"location_sensitive {padding} {dt}", log_key=("location", dt))
    if key_lengths is not None:
        padded = torch.arange(KEYS) >= key_lengths[:, None]
        assert (got["alignments"][:, padded] == 0).all()


def test_copy_task_learns_to_step_along_the_keys(example, kernel):
    """The loss falls, and the alignments peak at key i on step i: the encoder gives no
    position, so that is the location feature's doing (with F fixed at 0 the alignment
    accuracy stays near chance, 1/8)."""
    model, losses, accuracy = example.train(steps=200, kernel=kernel, log=None)
    assert sum(losses[-10:]) / 10 < 0.5 * losses[0], losses
    assert accuracy > 0.5, accuracy
    assert model.attend.location.weight.grad.abs().max() > 0


