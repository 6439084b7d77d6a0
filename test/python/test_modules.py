"""attn.compile (IR string -> cached artifact) and attn.MultiheadAttention (a drop-in for
torch.nn.MultiheadAttention whose normalizer params are nn.Parameters)."""
import os

import pytest
import torch

from conftest import EXAMPLES

SOFTMAX_IR = (EXAMPLES / "softmax.mlir").read_text()
MULTIMAX_IR = (EXAMPLES / "multimax.mlir").read_text()


@pytest.fixture()
def cache(tmp_path, monkeypatch, attn_mod):
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_compile_caches_by_content(cache, attn_mod):
    first = attn_mod.compile(SOFTMAX_IR)
    stamp = os.stat(first.path).st_mtime_ns
    again = attn_mod.compile(SOFTMAX_IR)
    assert again.path == first.path and os.stat(again.path).st_mtime_ns == stamp, "recompiled"
    other = attn_mod.compile(SOFTMAX_IR.replace("@softmax_attention", "@renamed"))
    assert other.path != first.path and other.name == "renamed"
    from_file = attn_mod.compile(str(EXAMPLES / "softmax.mlir"))
    assert from_file.path == first.path
    assert len(list(cache.glob("*.so"))) == 2


def test_compile_reports_diagnostics(cache, attn_mod):
    bad = SOFTMAX_IR.replace("attn.yield %e : f32\n  }\n  denominator",
                             "%c = arith.constant 1 : i32\n    attn.yield %c : i32\n  }\n  denominator", 1)
    assert bad != SOFTMAX_IR
    with pytest.raises(RuntimeError, match="numerator region must yield 'f32', got 'i32'"):
        attn_mod.compile(bad)


def _reference_mha(ours, batch_first):
    ref = torch.nn.MultiheadAttention(ours.embed_dim, ours.num_heads, batch_first=batch_first,
                                      dtype=torch.float64)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ref


@pytest.mark.parametrize("batch_first", [True, False])
def test_softmax_module_matches_torch_mha(cache, attn_mod, batch_first):
    torch.manual_seed(0)
    ours = attn_mod.MultiheadAttention(24, 3, SOFTMAX_IR, batch_first=batch_first, dtype=torch.float64)
    ref = _reference_mha(ours, batch_first)
    B, L, S = 2, 7, 9
    shape = (lambda n: (B, n, 24)) if batch_first else (lambda n: (n, B, 24))
    x, mem = torch.randn(*shape(L), dtype=torch.float64), torch.randn(*shape(S), dtype=torch.float64)
    padding = torch.arange(S).unsqueeze(0) >= torch.tensor([[S], [5]])   # row 1: last 4 keys padded

    got, weights = ours(x, mem, mem, key_padding_mask=padding)
    want, want_weights = ref(x, mem, mem, key_padding_mask=padding)
    assert weights is None
    assert (got - want).abs().max().item() < 1e-12

    # need_weights gives torch's weights, averaged over heads or per head.
    _, weights = ours(x, mem, mem, key_padding_mask=padding, need_weights=True)
    assert weights.shape == want_weights.shape == (B, L, S)
    assert (weights - want_weights).abs().max().item() < 1e-12
    _, per_head = ours(x, mem, mem, key_padding_mask=padding, need_weights=True,
                       average_attn_weights=False)
    _, want_per_head = ref(x, mem, mem, key_padding_mask=padding, average_attn_weights=False)
    assert per_head.shape == (B, 3, L, S)
    assert (per_head - want_per_head).abs().max().item() < 1e-12

    causal_mask = torch.triu(torch.full((L, L), float("-inf"), dtype=torch.float64), diagonal=1)
    got, _ = ours(x, x, x, is_causal=True)
    want, _ = ref(x, x, x, attn_mask=causal_mask)
    assert (got - want).abs().max().item() < 1e-12

    # Gradients flow to the projections like in torch's module.
    got.sum().backward()
    want.sum().backward()
    assert (ours.q_proj.weight.grad - ref.in_proj_weight.grad[:24]).abs().max().item() < 1e-10


def test_normalizer_params_are_trained_parameters(cache, attn_mod):
    torch.manual_seed(1)
    mha = attn_mod.MultiheadAttention(16, 2, MULTIMAX_IR, batch_first=True)
    names = [f"normalizer.{n}" for n in ("tb1", "td1", "b1", "d1", "tb2", "td2", "b2", "d2")]
    assert all(n in mha.state_dict() for n in names)
    assert {id(p) for p in mha.normalizer.values()} <= {id(p) for p in mha.parameters()}
    before = {n: p.detach().clone() for n, p in mha.normalizer.items()}
    optimizer = torch.optim.SGD(mha.parameters(), lr=0.5)
    x = torch.randn(2, 12, 16) * 3
    mha(x, x, x)[0].pow(2).mean().backward()
    assert mha.normalizer["tb1"].grad is not None and mha.normalizer["tb1"].grad.abs() > 0
    optimizer.step()
    assert any(not torch.equal(before[n], p) for n, p in mha.normalizer.items())


def test_unsupported_masks_are_errors(cache, attn_mod):
    mha = attn_mod.MultiheadAttention(8, 2, SOFTMAX_IR, batch_first=True)
    x = torch.randn(2, 5, 8)
    holes = torch.tensor([[False, True, False, False, False], [False] * 5])
    with pytest.raises(RuntimeError, match="only trailing padding"):
        mha(x, x, x, key_padding_mask=holes)
    with pytest.raises(ValueError, match="attn_mask is not supported"):
        mha(x, x, x, attn_mask=torch.zeros(5, 5))
