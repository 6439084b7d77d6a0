"""torch.compile and torch.export of models built from attn.MultiheadAttention.

- A 2-layer transformer (MultiMax layer with 8 learnable normalizer params, softmax layer)
  compiles with fullgraph=True (no graph break), and trains for several SGD steps to the
  losses and parameters of eager mode; AOTAutograd's forward graph calls
  attn.attention_forward and its backward graph attn.attention_backward.
- Sequence lengths 16, 24, 40, 56 recompile at most once (dynamic=None: the second length
  makes the length dynamic) and never with mark_dynamic.
- The artifact path is a constant of the graph, guarded: a module whose kernel changes
  recompiles instead of calling the old kernel.
- torch.export of an inference model, with a dynamic sequence dim, equals eager.
"""
import copy

import pytest
import torch
from torch import nn
from torch._dynamo.testing import AotEagerAndRecordGraphs, CompileCounterWithBackend

from conftest import EXAMPLES

# torch's recording backend returns unboxed functions; harmless here.
pytestmark = pytest.mark.filterwarnings("ignore:Your compiler for AOTAutograd")

SOFTMAX = EXAMPLES / "softmax.mlir"
MULTIMAX = EXAMPLES / "multimax.mlir"


class Block(nn.Module):
    def __init__(self, attn_mod, dim, heads, normalizer, dtype):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim, dtype=dtype), nn.LayerNorm(dim, dtype=dtype)
        self.attn = attn_mod.MultiheadAttention(dim, heads, batch_first=True, dtype=dtype,
                                                normalizer=normalizer)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim, dtype=dtype), nn.GELU(),
                                nn.Linear(2 * dim, dim, dtype=dtype))

    def forward(self, x, key_padding_mask):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, key_padding_mask=key_padding_mask, need_weights=False,
                          is_causal=True)[0]
        return x + self.ff(self.norm2(x))


class Transformer(nn.Module):
    def __init__(self, attn_mod, vocab=13, dim=32, heads=4, dtype=torch.float64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, dtype=dtype)
        self.blocks = nn.ModuleList([Block(attn_mod, dim, heads, MULTIMAX, dtype),
                                     Block(attn_mod, dim, heads, SOFTMAX, dtype)])
        self.head = nn.Linear(dim, vocab, dtype=dtype)

    def forward(self, tokens, key_padding_mask=None):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, key_padding_mask)
        return self.head(x)


def _batch(length, seed, vocab=13, batch=3):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(vocab, (batch, length), generator=g)
    targets = torch.randint(vocab, (batch, length), generator=g)
    padding = torch.arange(length) >= torch.tensor([[length], [length - 3], [length // 2]])
    return tokens, targets, padding


def _train(model, step_fn, steps, length=12):
    # SGD, not Adam: softmax's k bias gets a gradient that is rounding noise (~1e-17), which
    # Adam would normalise into full-size steps of either sign.
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(steps):
        tokens, targets, padding = _batch(length, step)
        optimizer.zero_grad()
        loss = step_fn(tokens, targets, padding)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _loss_fn(model):
    def step(tokens, targets, padding):
        logits = model(tokens, padding)
        return nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
    return step


@pytest.fixture()
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)],
                         ids=["f64", "f32"])
def test_compiled_training_matches_eager(attn_mod, fresh_dynamo, dtype, tol):
    torch.manual_seed(0)
    eager = Transformer(attn_mod, dtype=dtype)
    with torch.no_grad():  # non-default normalizer params: every multimax branch in play
        for name, value in eager.blocks[0].attn.normalizer.items():
            value.add_(0.05 * (len(name) % 3))
    compiled_model = copy.deepcopy(eager)
    tokens, _, padding = _batch(12, 0)
    explanation = torch._dynamo.explain(compiled_model)(tokens, padding)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    torch._dynamo.reset()

    compiled = torch.compile(compiled_model, fullgraph=True)
    want = _train(eager, _loss_fn(eager), steps=4)
    got = _train(compiled_model, _loss_fn(compiled), steps=4)
    assert got == pytest.approx(want, rel=tol, abs=tol)
    for (name, p), q in zip(eager.named_parameters(), compiled_model.parameters()):
        assert torch.allclose(p, q, rtol=tol, atol=tol), name
    assert eager.blocks[0].attn.normalizer["tb1"].grad.abs() > 0


def test_aot_graphs_call_the_forward_and_backward_ops(attn_mod, fresh_dynamo):
    torch.manual_seed(1)
    model = Transformer(attn_mod)
    backend = AotEagerAndRecordGraphs()
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    tokens, targets, padding = _batch(10, 3)
    _loss_fn(compiled)(tokens, targets, padding).backward()
    forward = "\n".join(g.code for g in backend.fw_graphs)
    backward = "\n".join(g.code for g in backend.bw_graphs)
    assert forward.count("attn.attention_forward") == 2, forward
    assert backward.count("attn.attention_backward") == 2, backward
    assert "attn.key_lengths_from_padding" in forward
    assert model.blocks[0].attn.normalizer["b1"].grad is not None


def _frames_for_lengths(model, lengths, mark_dynamic, backend_name):
    backend = CompileCounterWithBackend(backend_name)
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    for length in lengths:
        tokens, targets, padding = _batch(length, length)
        if mark_dynamic:
            torch._dynamo.mark_dynamic(tokens, 1)
            torch._dynamo.mark_dynamic(padding, 1)
        logits = compiled(tokens, padding)
        want = model(tokens, padding)
        assert torch.allclose(logits, want, rtol=1e-12, atol=1e-12), length
        logits.sum().backward()
    return backend.frame_count


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("mark_dynamic", [False, True], ids=["dynamic=None", "mark_dynamic"])
def test_dynamic_lengths_recompile_at_most_once(attn_mod, fresh_dynamo, mark_dynamic, backend):
    torch.manual_seed(2)
    model = Transformer(attn_mod)
    frames = _frames_for_lengths(model, [16, 24, 40, 56], mark_dynamic, backend)
    assert frames == (1 if mark_dynamic else 2), frames


def test_artifact_path_is_guarded(attn_mod, fresh_dynamo):
    """Swapping the kernel of a module (another artifact path, same params) recompiles."""
    torch.manual_seed(3)
    mha = attn_mod.MultiheadAttention(16, 2, batch_first=True, dtype=torch.float64,
                                      normalizer=SOFTMAX)
    backend = AotEagerAndRecordGraphs()
    compiled = torch.compile(mha, backend=backend, fullgraph=True)
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    assert torch.equal(compiled(x, x, x)[0], mha(x, x, x)[0])
    mha.kernel = attn_mod.compile(EXAMPLES / "tanhmax.mlir")
    want = mha(x, x, x)[0]
    assert torch.equal(compiled(x, x, x)[0], want)
    assert len(backend.graphs) == 2


class Classifier(nn.Module):
    def __init__(self, attn_mod, dim=24, heads=3):
        super().__init__()
        self.attn = attn_mod.MultiheadAttention(dim, heads, batch_first=True,
                                                dtype=torch.float64, normalizer=MULTIMAX)
        self.head = nn.Linear(dim, 5, dtype=torch.float64)

    def forward(self, x, key_padding_mask):
        out, weights = self.attn(x, x, x, key_padding_mask=key_padding_mask)
        return self.head(out).mean(1), weights


def test_export_inference_model_with_dynamic_length(attn_mod, tmp_path):
    torch.manual_seed(4)
    model = Classifier(attn_mod).eval()
    x = torch.randn(2, 9, 24, dtype=torch.float64)
    padding = torch.arange(9) >= torch.tensor([[9], [6]])
    seq = torch.export.Dim("seq", min=2, max=256)
    program = torch.export.export(model, (x, padding),
                                  dynamic_shapes={"x": {1: seq}, "key_padding_mask": {1: seq}})
    assert "attn.attention" in str(program.graph)
    path = tmp_path / "classifier.pt2"
    torch.export.save(program, path)
    loaded = torch.export.load(path).module()
    for length in (9, 17, 33):
        x = torch.randn(2, length, 24, dtype=torch.float64)
        padding = torch.arange(length) >= torch.tensor([[length], [length - 4]])
        want = model(x, padding)
        for got in (program.module()(x, padding), loaded(x, padding)):
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_compiled_functional_attention(attn_mod, fresh_dynamo):
    """attn.attention (SDPA's arguments, a 5-D input, scale=, key_lengths, learnable params)
    under torch.compile(fullgraph=True), forward and backward, equals eager."""
    kernel = attn_mod.compile(MULTIMAX)
    g = torch.Generator().manual_seed(5)
    leaf = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).requires_grad_()
    q, k, v = leaf(2, 2, 3, 7, 8), leaf(2, 2, 3, 9, 8), leaf(2, 2, 3, 9, 8)
    params = kernel.initial_params(torch.float64).requires_grad_()
    lengths = torch.tensor([[9, 4], [1, 7]])

    def f(q, k, v, params):
        return attn_mod.attention(q, k, v, kernel, is_causal=True, scale=0.2, params=params,
                                  key_lengths=lengths)

    compiled = torch.compile(f, fullgraph=True)
    got, want = compiled(q, k, v, params), f(q, k, v, params)
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    for a, b in zip(torch.autograd.grad(got.sum(), (q, k, v, params)),
                    torch.autograd.grad(want.sum(), (q, k, v, params))):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)


def test_compiled_float_masks_for_a_keep_table(attn_mod, fresh_dynamo):
    """A float attn_mask and key_padding_mask of 0 / -inf given to a kernel whose mask input
    is a keep table (attn_mask="bool") compile with no graph break: the values are checked
    inside the op attn::keep_from_bias. Forward and backward equal eager; a mask with other
    values still raises, naming the additive kind."""
    kernel = attn_mod.compile(SOFTMAX, attn_mask="bool")
    g = torch.Generator().manual_seed(6)
    leaf = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).requires_grad_()
    q, k, v = leaf(2, 2, 6, 8), leaf(2, 2, 9, 8), leaf(2, 2, 9, 8)
    keep = torch.rand(6, 9, generator=g) > 0.3
    keep[:, 0] = True
    attn_mask = torch.zeros(6, 9, dtype=torch.float64).masked_fill(~keep, float("-inf"))

    def f(q, k, v, attn_mask):
        return attn_mod.attention(q, k, v, kernel, attn_mask=attn_mask)

    compiled = torch.compile(f, fullgraph=True)
    got, want = compiled(q, k, v, attn_mask), f(q, k, v, attn_mask)
    assert torch.equal(got, want)
    for a, b in zip(torch.autograd.grad(got.sum(), (q, k, v)),
                    torch.autograd.grad(want.sum(), (q, k, v))):
        assert torch.equal(a, b)
    with pytest.raises(NotImplementedError, match=r"a float attn_mask with values other than 0 "
                                                  r"and -inf needs an additive mask input"):
        compiled(q, k, v, attn_mask.masked_fill(keep, 0.5))

    mha = attn_mod.MultiheadAttention(16, 2, batch_first=True, dtype=torch.float64,
                                      normalizer=kernel)
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    padding = torch.zeros(2, 9, dtype=torch.float64)
    padding[0, 3] = padding[1, 0] = float("-inf")  # not trailing: the keep table takes it
    compiled_mha = torch.compile(mha, fullgraph=True)
    got, want = compiled_mha(x, x, x, key_padding_mask=padding), mha(x, x, x,
                                                                      key_padding_mask=padding)
    assert torch.equal(got[0], want[0])
