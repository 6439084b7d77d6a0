"""Generation with attn.KVCache (issue 35, docs/decoding.md; examples/generate.py): a tiny
causal LM trained a few steps with each position-dependent family generates 64 tokens
greedily with the cache, and every step's logits equal those of the whole causal forward
over the prefix (float64, 1e-12). Also: chunked prefill against the whole forward with
prompts of different lengths in one batch, attn.attention with the cache, the cache's
errors, and docs/decoding.md's code, run as written."""
import re
import sys

import pytest
import torch

from conftest import REPO

sys.path.insert(0, str(REPO / "examples"))
import generate  # noqa: E402

PROMPT, TOKENS = 8, 64


@pytest.fixture(scope="module")
def kernels(attn_mod):
    cache = {}

    def get(family):
        if family not in cache:
            cache[family] = attn_mod.compile(generate.FAMILIES[family][0])
        return cache[family]
    return get


def model_of(kernels, family, seed):
    torch.manual_seed(seed)
    return generate.TinyLM(kernels(family), generate.FAMILIES[family][1])


@pytest.mark.parametrize("family", list(generate.FAMILIES))
def test_every_cached_step_is_the_whole_forward(kernels, family):
    gen = torch.Generator().manual_seed(1)
    model = model_of(kernels, family, seed=2)
    batch = generate.pattern_batch(gen, 4, 33)
    losses = generate.train(model, family, steps=6, gen=gen, batch=4, length=32, tokens=batch)
    assert losses[-1] < losses[0], losses
    prompt = generate.pattern_batch(gen, 1, PROMPT)
    sequence, chosen = generate.generate(model, family, prompt, TOKENS)
    assert sequence.shape == (1, PROMPT + TOKENS)
    inputs = generate.family_inputs(family, model.heads, PROMPT + TOKENS)
    with torch.no_grad():
        for step, logits in enumerate(chosen):
            whole = model(sequence[:, :PROMPT + step], inputs)[:, -1]
            error = (logits - whole).abs().max().item()
            assert error <= 1e-12, f"{family}: step {step} differs from the whole forward by {error}"


def test_chunked_prefill_with_prompts_of_different_lengths(kernels, attn_mod):
    """Two prompts (11 and 7 tokens) right-padded into one chunked prefill (chunks of 4,
    `counts` saying which rows are real), then steps: each entry's last logits equal its
    own whole forward, so entries at different positions share the batch."""
    family = "ssmax"
    model = model_of(kernels, family, seed=3)
    gen = torch.Generator().manual_seed(4)
    lengths = [11, 7]
    prompts = generate.pattern_batch(gen, 2, 12)
    cache = model.new_cache(2, 16)
    with torch.no_grad():
        last = [None, None]
        for begin in range(0, 12, 4):
            chunk = prompts[:, begin:begin + 4]
            counts = torch.tensor([max(0, min(4, n - begin)) for n in lengths])
            x = model.embed(chunk)
            for layer, (mha, mlp) in enumerate(zip(model.attention, model.mlps)):
                h = model.norms[2 * layer](x)
                q, k, v = (heads(proj(h), model) for proj in (mha.q_proj, mha.k_proj, mha.v_proj))
                keys, values, query_start, key_lengths = cache.append(layer, k, v, counts)
                o = mha.kernel(q, keys, values, mha.normalizer_params(), False, key_lengths,
                               dict(mha.inputs), query_start=query_start)
                x = x + mha.out_proj(o.transpose(1, 2).reshape(x.shape))
                x = x + mlp(model.norms[2 * layer + 1](x))
            cache.advance()
            logits = model.head(x)
            for b, n in enumerate(lengths):
                if begin < n <= begin + 4:
                    last[b] = logits[b, n - begin - 1]
        assert cache.lengths.tolist() == lengths
        for b, n in enumerate(lengths):
            whole = model(prompts[b:b + 1, :n])[0, -1]
            assert (last[b] - whole).abs().max().item() <= 1e-12


def heads(x, model):
    B, L, _ = x.shape
    return x.view(B, L, model.heads, model.head_dim).transpose(1, 2)


def test_cache_errors(attn_mod):
    cache = attn_mod.KVCache(layers=1, batch=2, heads=2, head_dim=4, capacity=3)
    k = torch.zeros(2, 2, 2, 4)
    with pytest.raises(RuntimeError, match=r"expected k \[2, 2, n, 4\]"):
        cache.append(0, k[:1], k[:1])
    with pytest.raises(IndexError, match="layer 1 out of range"):
        cache.append(1, k, k)
    with pytest.raises(RuntimeError, match=r"counts must be \[2\] values in \[0, 2\]"):
        cache.append(0, k, k, counts=[3, 1])
    cache.append(0, k, k)
    cache.advance()
    with pytest.raises(RuntimeError, match="exceed the capacity 3"):
        cache.append(0, k, k)
    with pytest.raises(RuntimeError, match="nothing was appended"):
        cache.advance()
    with pytest.raises(ValueError, match="capacity must be an int >= 1"):
        attn_mod.KVCache(1, 1, 1, 4, capacity=0)


def test_decoding_doc_runs_as_written(attn_mod, monkeypatch):
    monkeypatch.chdir(REPO)
    text = (REPO / "docs" / "decoding.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/decoding.md", "exec"), {})


def test_functional_attention_with_the_cache(kernels, attn_mod):
    """attn.attention(..., kv_cache=, layer=): a chunked prefill and single steps of ALiBi
    over [*batch, H, L, E] tensors (two batch dims) equal the whole call's rows."""
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 1, 4, 10, 8, generator=gen, dtype=torch.float64)
               for _ in range(3))
    inputs = {"slopes": attn_mod.alibi_slopes(4, torch.float64)}
    kernel = kernels("alibi")
    whole = attn_mod.attention(q, k, v, kernel, inputs=inputs)
    cache = attn_mod.KVCache(layers=1, batch=2, heads=4, head_dim=8, capacity=10,
                             dtype=torch.float64)
    rows = []
    for begin, end in ((0, 6), (6, 7), (7, 8), (8, 10)):
        rows.append(attn_mod.attention(q[..., begin:end, :], k[..., begin:end, :],
                                       v[..., begin:end, :], kernel, inputs=inputs,
                                       kv_cache=cache, layer=0))
        cache.advance()
    assert (torch.cat(rows, dim=-2) - whole).abs().max().item() <= 1e-12
