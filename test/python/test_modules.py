"""attn.compile (IR string -> cached artifact) and attn.MultiheadAttention (a drop-in for
torch.nn.MultiheadAttention whose normalizer params are nn.Parameters)."""
import copy
import os

import pytest
import torch

from conftest import EXAMPLES

SOFTMAX_IR = (EXAMPLES / "softmax.mlir").read_text()
MULTIMAX_IR = (EXAMPLES / "multimax.mlir").read_text()


@pytest.fixture()
def cache(tmp_path, monkeypatch, attn_mod):
    """A cache of this test's own (the other tests share the session's)."""
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


@pytest.mark.parametrize("dtypes", [(), [], ""])
def test_compile_refuses_empty_dtypes(attn_mod, dtypes):
    with pytest.raises(ValueError, match="dtypes is empty; expected some of 'f32', 'f64'"):
        attn_mod.compile(SOFTMAX_IR, dtypes=dtypes)


def test_compile_takes_dtypes_as_a_string(attn_mod):
    kernel = attn_mod.compile(SOFTMAX_IR, dtypes="f64")
    assert kernel.manifest["dtypes"] == ["f64"]


def test_compile_reports_diagnostics(attn_mod):
    bad = SOFTMAX_IR.replace("attn.yield %e : f32\n  }\n  denominator",
                             "%c = arith.constant 1 : i32\n    attn.yield %c : i32\n  }\n  denominator", 1)
    assert bad != SOFTMAX_IR
    with pytest.raises(RuntimeError, match="numerator region must yield 'f32', got 'i32'"):
        attn_mod.compile(bad)


def test_opt_prints_ir_and_reports_diagnostics(attn_mod):
    classified = attn_mod.opt(str(EXAMPLES / "softmax.mlir"), "--attn-expand-shared-regions",
                              "--attn-classify-normalizer")
    assert "attn.normalizer @softmax attributes {algorithm = #attn<algorithm online>}" in classified
    assert attn_mod.opt(classified, "--attn-classify-normalizer") == classified
    with pytest.raises(RuntimeError, match="attn-opt failed:\n.*error: 'attn.yield' op in the "
                                           "numerator region must yield 'f32', got 'i32'"):
        attn_mod.opt(SOFTMAX_IR.replace("attn.yield %e : f32\n  }\n  denominator",
                                        "%c = arith.constant 1 : i32\n    attn.yield %c : i32\n"
                                        "  }\n  denominator", 1))


def _reference_mha(ours, batch_first, dtype=torch.float64):
    ref = torch.nn.MultiheadAttention(ours.embed_dim, ours.num_heads, batch_first=batch_first,
                                      dtype=dtype)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        ref.in_proj_bias.copy_(ours.in_proj_bias)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ref


def _close(a, b, dtype):
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    return a.shape == b.shape and (a - b).abs().max().item() < tol


def test_signature_matches_torch():
    """Constructor and forward take torch's parameters, in torch's order, with its defaults;
    the constructor adds the keywords normalizer, cuda_targets, input_inits and
    context_parallel."""
    import inspect

    import attn

    def params(fn):
        return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()
                if p.kind is not p.KEYWORD_ONLY]

    assert params(attn.MultiheadAttention.__init__) == params(torch.nn.MultiheadAttention.__init__)
    assert params(attn.MultiheadAttention.forward) == params(torch.nn.MultiheadAttention.forward)
    extra = [p for p in inspect.signature(attn.MultiheadAttention.__init__).parameters.values()
             if p.kind is p.KEYWORD_ONLY]
    assert [p.name for p in extra] == ["normalizer", "cuda_targets", "input_inits",
                                       "context_parallel"]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("batch_first", [True, False])
def test_softmax_module_matches_torch_mha(attn_mod, batch_first, dtype):
    torch.manual_seed(0)
    ours = attn_mod.MultiheadAttention(24, 3, batch_first=batch_first, dtype=dtype,
                                       device="cpu", normalizer=SOFTMAX_IR)
    assert all(p.dtype == dtype and p.device.type == "cpu" for p in ours.parameters())
    ref = _reference_mha(ours, batch_first, dtype)
    B, L, S = 2, 7, 9
    shape = (lambda n: (B, n, 24)) if batch_first else (lambda n: (n, B, 24))
    x, mem = torch.randn(*shape(L), dtype=dtype), torch.randn(*shape(S), dtype=dtype)
    padding = torch.arange(S).unsqueeze(0) >= torch.tensor([[S], [5]])   # row 1: last 4 keys padded

    # torch's default need_weights=True: the weights averaged over heads.
    got, weights = ours(x, mem, mem, key_padding_mask=padding)
    want, want_weights = ref(x, mem, mem, key_padding_mask=padding)
    assert _close(got, want, dtype) and _close(weights, want_weights, dtype)
    assert weights.shape == (B, L, S)
    # The additive float form of the same padding (torch's canonical mask).
    additive = torch.zeros(B, S, dtype=dtype).masked_fill(padding, float("-inf"))
    got, _ = ours(x, mem, mem, key_padding_mask=additive, need_weights=False)
    assert _close(got, ref(x, mem, mem, key_padding_mask=additive, need_weights=False)[0], dtype)
    _, per_head = ours(x, mem, mem, key_padding_mask=padding, average_attn_weights=False)
    _, want_per_head = ref(x, mem, mem, key_padding_mask=padding, average_attn_weights=False)
    assert per_head.shape == (B, 3, L, S) and _close(per_head, want_per_head, dtype)
    got, none = ours(x, mem, mem, need_weights=False)
    assert none is None and _close(got, ref(x, mem, mem, need_weights=False)[0], dtype)

    causal_mask = torch.nn.Transformer.generate_square_subsequent_mask(L, dtype=dtype)
    want, want_weights = ref(x, x, x, attn_mask=causal_mask, is_causal=True)
    for kwargs in ({"is_causal": True}, {"is_causal": True, "attn_mask": causal_mask},
                   {"is_causal": True, "attn_mask": causal_mask.isinf()}):
        got, weights = ours(x, x, x, **kwargs)
        assert _close(got, want, dtype) and _close(weights, want_weights, dtype), kwargs

    # Gradients flow to the projections like in torch's module.
    got.sum().backward()
    want.sum().backward()
    assert _close(ours.q_proj.weight.grad, ref.in_proj_weight.grad[:24], dtype)
    assert _close(ours.out_proj.bias.grad, ref.out_proj.bias.grad, dtype)


@pytest.mark.parametrize("batch_first", [True, False])
def test_unbatched_inputs_match_torch(attn_mod, batch_first):
    torch.manual_seed(5)
    ours = attn_mod.MultiheadAttention(16, 2, batch_first=batch_first, kdim=12, vdim=10,
                                       dtype=torch.float64, normalizer=SOFTMAX_IR)
    ref = torch.nn.MultiheadAttention(16, 2, batch_first=batch_first, kdim=12, vdim=10,
                                      dtype=torch.float64)
    with torch.no_grad():
        for name in ("q", "k", "v"):
            getattr(ref, f"{name}_proj_weight").copy_(getattr(ours, f"{name}_proj").weight)
        ref.in_proj_bias.copy_(ours.in_proj_bias)
        ref.out_proj.load_state_dict(ours.out_proj.state_dict())
    x = torch.randn(6, 16, dtype=torch.float64)
    key, value = torch.randn(8, 12, dtype=torch.float64), torch.randn(8, 10, dtype=torch.float64)
    padding = torch.arange(8) >= 5
    got, weights = ours(x, key, value, key_padding_mask=padding)
    want, want_weights = ref(x, key, value, key_padding_mask=padding)
    assert got.shape == (6, 16) and weights.shape == (6, 8)
    assert _close(got, want, torch.float64) and _close(weights, want_weights, torch.float64)
    _, per_head = ours(x, key, value, average_attn_weights=False)
    assert per_head.shape == (2, 6, 8)


@pytest.mark.parametrize("training", [True, False])
def test_self_attn_of_transformer_encoder_layer(attn_mod, training):
    """attn.MultiheadAttention as nn.TransformerEncoderLayer's self_attn: with softmax and
    dropout 0 the layer computes what torch's own does, in training and in eval (where
    torch's fast path, which would bypass the module, stays off)."""
    torch.manual_seed(6)
    ref = torch.nn.TransformerEncoderLayer(24, 4, dim_feedforward=32, dropout=0.0,
                                           batch_first=True, dtype=torch.float64)
    ours = copy.deepcopy(ref)
    ours.self_attn = attn_mod.MultiheadAttention(24, 4, batch_first=True, dtype=torch.float64,
                                                 normalizer=SOFTMAX_IR)
    with torch.no_grad():
        w = ours.self_attn
        ref.self_attn.in_proj_weight.copy_(torch.cat([w.q_proj.weight, w.k_proj.weight, w.v_proj.weight]))
        ref.self_attn.in_proj_bias.copy_(w.in_proj_bias)
        ref.self_attn.out_proj.load_state_dict(w.out_proj.state_dict())
    ref.train(training), ours.train(training)
    x = torch.randn(3, 7, 24, dtype=torch.float64)
    padding = torch.arange(7) >= torch.tensor([[7], [5], [2]])
    causal = torch.nn.Transformer.generate_square_subsequent_mask(7, dtype=torch.float64)
    with torch.set_grad_enabled(training):
        for kwargs in ({}, {"src_key_padding_mask": padding},
                       {"src_mask": causal, "is_causal": True}):
            got, want = ours(x, **kwargs), ref(x, **kwargs)
            assert _close(got, want, torch.float64), kwargs
    encoder = torch.nn.TransformerEncoder(ours, num_layers=2, enable_nested_tensor=False)
    encoder.train(training)
    assert encoder(x, mask=causal, is_causal=True).shape == x.shape


def test_normalizer_params_are_trained_parameters(attn_mod):
    torch.manual_seed(1)
    mha = attn_mod.MultiheadAttention(16, 2, batch_first=True, normalizer=MULTIMAX_IR)
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


TABLES_IR = """
attn.input @w learnable : tensor<2xf32>
attn.input @doc : tensor<?x?xi64>
attn.mask @same_doc {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %di = attn.read @doc[%b, %i] : i64
  %dj = attn.read @doc[%b, %j] : i64
  %keep = arith.cmpi eq, %di, %dj : i64
  attn.yield %keep : i1
}
attn.normalizer @headed {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %w = attn.read @w[%h] : f32
    %x = arith.addf %s, %w : f32
    %e = math.exp %x : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
attn.kernel @headed_attention normalizer(@headed) mask(@same_doc)
"""


def test_tensor_inputs_of_the_module(attn_mod):
    """A learnable input whose extents the IR fixes is a parameter inputs.<name> (zeros,
    trained with the others); the others come as forward's inputs=."""
    torch.manual_seed(2)
    mha = attn_mod.MultiheadAttention(16, 2, batch_first=True, normalizer=TABLES_IR)
    assert list(mha.inputs) == ["w"] and "inputs.w" in mha.state_dict()
    assert torch.equal(mha.inputs["w"].detach(), torch.zeros(2))
    x = torch.randn(2, 10, 16)
    doc = torch.tensor([[0] * 4 + [1] * 6, [0] * 10])
    out, _ = mha(x, x, x, need_weights=False, inputs={"doc": doc})
    out.pow(2).mean().backward()
    assert mha.inputs["w"].grad is not None and mha.inputs["w"].grad.abs().sum() > 0
    # documents are separate: the first 4 positions of batch 0 see only each other
    y = x.clone()
    y[0, 4:] += 1.0
    again, _ = mha(y, y, y, need_weights=False, inputs={"doc": doc})
    assert torch.allclose(again[0, :4], out[0, :4].detach(), atol=1e-6)
    with pytest.raises(RuntimeError, match=r"missing: \['doc'\]"):
        mha(x, x, x, need_weights=False)


def test_initial_values_of_learnable_inputs(attn_mod):
    """The module creates a learnable input whose extents are numbers, H or Hkv at the IR's
    initial value, or at input_inits' number or tensor; others are the caller's."""
    ir = TABLES_IR.replace("attn.input @w learnable : tensor<2xf32>",
                           "attn.input @w learnable = 0.25 : tensor<?xf32> dims(H)")
    assert torch.equal(attn_mod.MultiheadAttention(16, 2, normalizer=ir).inputs["w"].detach(),
                       torch.full((2,), 0.25))
    mha = attn_mod.MultiheadAttention(16, 2, normalizer=ir, input_inits={"w": -1.5},
                                      dtype=torch.float64)
    assert torch.equal(mha.inputs["w"].detach(), torch.full((2,), -1.5, dtype=torch.float64))
    given = torch.tensor([0.5, 2.0])
    mha = attn_mod.MultiheadAttention(16, 2, normalizer=ir, input_inits={"w": given})
    assert torch.equal(mha.inputs["w"].detach(), given)
    mha.inputs["w"].data.add_(1.0)
    assert torch.equal(given, torch.tensor([0.5, 2.0])), "the parameter must not alias init"
    with pytest.raises(ValueError, match=r"input_inits\['w'\] has shape \[3\], expected \[2\] "
                       r"\(declared \[H\], num_heads = 2\)"):
        attn_mod.MultiheadAttention(16, 2, normalizer=ir, input_inits={"w": torch.zeros(3)})
    with pytest.raises(ValueError, match=r"input_inits names \['doc'\], but the module creates "
                       r"parameters only for .* \['w'\]"):
        attn_mod.MultiheadAttention(16, 2, normalizer=ir, input_inits={"doc": 0.0})


def test_what_kernels_cannot_take_are_errors(attn_mod):
    mha = attn_mod.MultiheadAttention(8, 2, batch_first=True, normalizer=SOFTMAX_IR)
    x = torch.randn(2, 5, 8)
    holes = torch.tensor([[False, True, False, False, False], [False] * 5])
    # Kernels with the attn_mask input run these (test_masks.py).
    with pytest.raises(NotImplementedError, match=r"key_padding_mask: padding that is not "
                       r"trailing .* needs the kernel's attn_mask input"):
        mha(x, x, x, key_padding_mask=holes)
    soft = torch.zeros(2, 5).index_fill(1, torch.tensor([4]), -1e9)
    with pytest.raises(NotImplementedError, match=r"float mask with values other than 0 and "
                       r"-inf needs the kernel's attn_mask input"):
        mha(x, x, x, key_padding_mask=soft)
    for mask in (torch.zeros(5, 5), torch.zeros(5, 5, dtype=torch.bool), torch.zeros(4, 5, 5)):
        with pytest.raises(NotImplementedError, match=r"attn_mask \(a mask of shape .* needs the "
                           r"kernel's attn_mask input"):
            mha(x, x, x, attn_mask=mask)
    with pytest.raises(AssertionError, match="only bool and floating types of attn_mask"):
        mha(x, x, x, attn_mask=torch.zeros(5, 5, dtype=torch.int64))
    with pytest.raises(AssertionError, match="expected `key` and `value` to be 3-D"):
        mha(x, x[0], x)
    with pytest.raises(NotImplementedError, match=r"dropout=0.1 needs kernel support"):
        attn_mod.MultiheadAttention(8, 2, 0.1, normalizer=SOFTMAX_IR)
    for flag in ("add_bias_kv", "add_zero_attn"):
        with pytest.raises(NotImplementedError, match=f"{flag}=True is not supported"):
            attn_mod.MultiheadAttention(8, 2, normalizer=SOFTMAX_IR, **{flag: True})
    with pytest.raises(TypeError, match="normalizer"):
        attn_mod.MultiheadAttention(8, 2)
