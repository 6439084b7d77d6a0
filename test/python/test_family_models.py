"""The Python usage examples of examples/families/ train: hierarchical attention with a
learned context vector (Luong dot kernel) and a pointer network (Bahdanau kernel, output
= attention over the input positions); attn.MultiheadAttention with a bilinear score
registers its weight W as a Parameter of its shape and trains it."""
import importlib.util
import sys

import torch

from conftest import REPO

FAMILIES = REPO / "examples" / "families"
sys.path.insert(0, str(FAMILIES))


def _load(name):
    spec = importlib.util.spec_from_file_location(name, FAMILIES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hierarchical_attention_trains(attn_mod):
    model, losses = _load("hierarchical_attention").train(steps=60, log=None)
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:5]) / 5, losses
    assert model.words.context.grad is not None and model.words.context.grad.abs().sum() > 0


def test_pointer_network_trains(attn_mod):
    pointer = _load("pointer_network")
    model, losses, accuracy = pointer.train(steps=80, log=None)
    assert sum(losses[-10:]) / 10 < 0.6 * losses[0], losses
    assert accuracy > 0.5, accuracy
    # the pointer's W_q, W_k, v moved away from their identity / fill initial values
    initial = model.kernel.initial_params()
    for name, value in model.kernel.split_params(model.pointer.detach() - initial).items():
        assert value.abs().max() > 0, name


def test_multihead_attention_registers_weights_with_shapes(attn_mod):
    torch.manual_seed(0)
    mha = attn_mod.MultiheadAttention(64, 2, batch_first=True,
                                      normalizer=str(FAMILIES / "luong_general.mlir"))
    assert mha.normalizer["W"].shape == (32, 32)
    assert torch.equal(mha.normalizer["W"].detach(), torch.eye(32))
    x = torch.randn(3, 7, 64)
    out, _ = mha(x, x, x)
    out.square().mean().backward()
    grad = mha.normalizer["W"].grad
    assert grad is not None and grad.shape == (32, 32) and grad.abs().max() > 0
    assert "normalizer.W" in mha.state_dict()
