"""attn kernels as Hugging Face transformers attention implementations
(attn.huggingface.register): models built from a config (random weights; no hub access)
run, train and generate with them.

- softmax through attn equals transformers' SDPA implementation (Llama with grouped-query
  attention and left padding; Mistral with a sliding window), forward and generate();
- a custom normalizer (TanhMax): generate() with transformers' own cache gives the tokens
  and every step's logits of greedy decoding by full forwards without a cache;
- kernels that read positions (ALiBi, SSMax's log n_i): decoding with DynamicCache token
  by token, left-padded prompts of different lengths batched, gives every step's logits
  of the full forward over the prefix, and a padded prompt those of the prompt alone;
  with a sliding window (Mistral's cache keeps the window) and chunked prefill too;
- a few training steps lower the loss; what the integration cannot run is an error."""
import copy

import pytest
import torch

from conftest import EXAMPLES

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM  # noqa: E402

VOCAB = 50
HEADS = 4


@pytest.fixture(scope="module")
def registered(attn_mod):
    import attn.huggingface

    for name, source in (("attn_softmax", "softmax.mlir"), ("attn_tanhmax", "tanhmax.mlir")):
        attn.huggingface.register(name, EXAMPLES / source, dtypes=("f64",))
    families = EXAMPLES.parent / "families"
    attn.huggingface.register("attn_alibi", families / "alibi_heads.mlir", dtypes=("f64",),
                              inputs={"slopes": attn_mod.alibi_slopes(HEADS)})
    attn.huggingface.register("attn_ssmax", families / "ssmax.mlir", dtypes=("f64",),
                              inputs={"scale": torch.tensor([0.3, 0.6, 0.9, 1.2])})
    return attn.huggingface


def llama_config(**overrides):
    return LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                       num_hidden_layers=2, num_attention_heads=HEADS, num_key_value_heads=2,
                       max_position_embeddings=128, **overrides)


def pair(model_class, config, implementation, seed=0):
    """The same random weights with SDPA and with `implementation`."""
    torch.manual_seed(seed)
    reference = model_class._from_config(copy.deepcopy(config), attn_implementation="sdpa",
                                         dtype=torch.float64)
    ours = model_class._from_config(copy.deepcopy(config), attn_implementation=implementation,
                                    dtype=torch.float64)
    ours.load_state_dict(reference.state_dict())
    return reference.eval(), ours.eval()


def prompts(batch=2, length=9, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.long)
    if batch > 1:
        mask[1, :3] = 0  # left padding, as generate() batches prompts
    return ids, mask


def calls_of(implementation, keys=False):
    """A list that grows with each call of the registered `implementation` (the query's
    shape, or with keys=True the query's and key's)."""
    from transformers import AttentionInterface

    calls, original = [], AttentionInterface._global_mapping[implementation]

    def counted(*args, **kwargs):
        calls.append((args[1].shape, args[2].shape) if keys else args[1].shape)
        return original(*args, **kwargs)

    AttentionInterface.register(implementation, counted)
    return calls, lambda: AttentionInterface.register(implementation, original)


def test_softmax_through_attn_equals_sdpa_with_gqa_padding_and_cache(registered):
    reference, ours = pair(LlamaForCausalLM, llama_config(), "attn_softmax")
    ids, mask = prompts()
    calls, restore = calls_of("attn_softmax")
    try:
        with torch.no_grad():
            want, got = reference(ids, attention_mask=mask).logits, ours(ids, attention_mask=mask).logits
            kept = mask.bool()
            torch.testing.assert_close(got[kept], want[kept], rtol=0, atol=1e-12)
            options = dict(attention_mask=mask, max_new_tokens=12, do_sample=False,
                           output_logits=True, return_dict_in_generate=True)
            a, b = reference.generate(ids, **options), ours.generate(ids, **options)
    finally:
        restore()
    assert torch.equal(a.sequences, b.sequences)
    for x, y in zip(a.logits, b.logits):
        torch.testing.assert_close(y, x, rtol=0, atol=1e-12)
    layers, forwards = 2, 1 + 1 + 11  # the forward above, generate's prefill, 11 steps
    assert len(calls) == layers * forwards and sum(s[2] == 1 for s in calls) == 2 * 11, \
        "every layer of the forward, the prefill and each decoding step ran attn"


def test_a_masked_token_between_unmasked_ones_runs_as_a_table(registered):
    reference, ours = pair(LlamaForCausalLM, llama_config(), "attn_softmax", seed=14)
    ids, mask = prompts(length=8, seed=15)
    mask[0, 4] = 0
    with torch.no_grad():
        torch.testing.assert_close(ours(ids, attention_mask=mask).logits,
                                   reference(ids, attention_mask=mask).logits, rtol=0, atol=1e-12)


def test_a_static_cache_is_an_error(registered):
    from transformers import StaticCache

    model = LlamaForCausalLM._from_config(llama_config(), attn_implementation="attn_alibi",
                                          dtype=torch.float64).eval()
    ids, mask = prompts(length=5)
    cache = StaticCache(config=model.config, max_cache_len=16)
    with torch.no_grad(), pytest.raises(NotImplementedError, match="static cache"):
        model(ids, attention_mask=mask, past_key_values=cache, use_cache=True)


def test_sliding_window_masks_come_from_transformers(registered):
    config = MistralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           sliding_window=4, max_position_embeddings=128)
    reference, ours = pair(MistralForCausalLM, config, "attn_softmax", seed=2)
    ids, _ = prompts(length=14, seed=3)
    with torch.no_grad():
        torch.testing.assert_close(ours(ids).logits, reference(ids).logits, rtol=0, atol=1e-12)
        full = MistralForCausalLM._from_config(copy.deepcopy(config).__class__(
            **{**config.to_dict(), "sliding_window": None}), attn_implementation="sdpa",
            dtype=torch.float64)
        full.load_state_dict(reference.state_dict())
        assert (full(ids).logits - reference(ids).logits).abs().max() > 1e-6, \
            "the window changes the logits, or this test would not see it ignored"


def test_tanhmax_generate_with_cache_equals_full_forwards(registered):
    """transformers' DynamicCache step by step (float64 logits, 1e-12) and generate()
    (which returns float32 logits) against full forwards over the prefix."""
    from transformers import DynamicCache

    torch.manual_seed(4)
    model = LlamaForCausalLM._from_config(llama_config(), attn_implementation="attn_tanhmax",
                                          dtype=torch.float64).eval()
    ids, _ = prompts(batch=1, length=7, seed=5)
    steps = 10
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=steps, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
        cache, sequence = DynamicCache(config=model.config), ids
        cached = model(ids, past_key_values=cache, use_cache=True).logits[:, -1]
        for step in range(steps):
            logits = model(sequence, use_cache=False).logits[:, -1]
            torch.testing.assert_close(cached, logits, rtol=0, atol=1e-12)
            torch.testing.assert_close(out.logits[step], logits.float(), rtol=1e-6, atol=1e-6)
            token = logits.argmax(-1, keepdim=True)
            sequence = torch.cat([sequence, token], dim=1)
            cached = model(token, past_key_values=cache, use_cache=True).logits[:, -1]
    assert torch.equal(out.sequences, sequence)


def generate_positions(mask):
    """generate()'s position_ids: counted from each prompt's first token (padding 0)."""
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)


def cached_greedy_steps(model, ids, mask, steps, chunks=(None,)):
    """Greedy decoding with transformers' DynamicCache: the prompt in `chunks` (lengths;
    None: the rest), then one token per step. Returns each step's last logits [B, V] and
    the sequence."""
    from transformers import DynamicCache

    cache, logits, begin = DynamicCache(config=model.config), [], 0
    positions = generate_positions(mask)
    for chunk in chunks:
        end = ids.shape[1] if chunk is None else begin + chunk
        out = model(ids[:, begin:end], attention_mask=mask[:, :end],
                    position_ids=positions[:, begin:end], past_key_values=cache, use_cache=True)
        begin = end
    sequence = ids
    for _ in range(steps):
        logits.append(out.logits[:, -1])
        token = logits[-1].argmax(-1, keepdim=True)
        sequence, mask = torch.cat([sequence, token], 1), torch.cat([mask, mask[:, -1:]], 1)
        out = model(token, attention_mask=mask, position_ids=positions[:, -1:] + 1,
                    past_key_values=cache, use_cache=True)
        positions = torch.cat([positions, positions[:, -1:] + 1], 1)
    return logits, sequence


def full_forward_logits(model, sequence, mask, prefix):
    """The last logits of the full forward (no cache) over sequence[:, :prefix]."""
    mask = torch.cat([mask, mask.new_ones(mask.shape[0], sequence.shape[1] - mask.shape[1])], 1)
    mask = mask[:, :prefix]
    return model(sequence[:, :prefix], attention_mask=mask,
                 position_ids=generate_positions(mask), use_cache=False).logits[:, -1]


@pytest.mark.parametrize("implementation", ["attn_alibi", "attn_ssmax"])
def test_position_reading_kernels_decode_with_the_cache_as_full_forwards(registered,
                                                                         implementation):
    torch.manual_seed(8)
    model = LlamaForCausalLM._from_config(llama_config(), attn_implementation=implementation,
                                          dtype=torch.float64).eval()
    ids, mask = prompts(batch=2, length=7, seed=9)  # the second prompt: 4 tokens, 3 padding
    steps = 8
    with torch.no_grad():
        logits, sequence = cached_greedy_steps(model, ids, mask, steps)
        alone, _ = cached_greedy_steps(model, ids[1:, 3:], mask[1:, 3:], steps)
        for step in range(steps):
            full = full_forward_logits(model, sequence, mask, ids.shape[1] + step)
            torch.testing.assert_close(logits[step], full, rtol=0, atol=1e-12)
            torch.testing.assert_close(logits[step][1:], alone[step], rtol=0, atol=1e-12)
        out = model.generate(ids, attention_mask=mask, max_new_tokens=steps, do_sample=False)
    assert torch.equal(out, sequence)


def test_positions_with_a_sliding_window_cache_and_chunked_prefill(registered):
    """Mistral's DynamicCache keeps only the window's keys (the keys start after 0) and
    its mask is not causal: it runs as a table indexed by position, also for a chunk of
    several queries after the first position."""
    config = MistralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=HEADS,
                           num_key_value_heads=2, sliding_window=4, max_position_embeddings=128)
    torch.manual_seed(10)
    model = MistralForCausalLM._from_config(config, attn_implementation="attn_alibi",
                                            dtype=torch.float64).eval()
    ids, mask = prompts(batch=2, length=11, seed=11)
    steps = 6
    calls, restore = calls_of("attn_alibi", keys=True)
    try:
        with torch.no_grad():
            logits, sequence = cached_greedy_steps(model, ids, mask, steps, chunks=(6, None))
            for step in range(steps):
                full = full_forward_logits(model, sequence, mask, ids.shape[1] + step)
                torch.testing.assert_close(logits[step], full, rtol=0, atol=1e-12)
    finally:
        restore()
    assert min(k[2] for q, k in calls if q[2] == 1) < ids.shape[1], \
        "the cache kept only the window's keys (positions starting after 0)"


def test_packed_sequences_are_an_error(registered):
    model = LlamaForCausalLM._from_config(llama_config(), attn_implementation="attn_alibi",
                                          dtype=torch.float64).eval()
    ids, _ = prompts(batch=1, length=6)
    with pytest.raises(NotImplementedError, match="not consecutive"):
        model(ids, position_ids=torch.tensor([[0, 1, 2, 0, 1, 2]]))


def test_a_few_training_steps_lower_the_loss(registered):
    torch.manual_seed(6)
    model = LlamaForCausalLM._from_config(llama_config(), attn_implementation="attn_tanhmax",
                                          dtype=torch.float64).train()
    ids, mask = prompts(batch=4, length=12, seed=7)
    labels = ids.masked_fill(mask == 0, -100)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        loss = model(ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.1, losses


def test_gradients_with_left_padding_equal_sdpa(registered):
    """generate()'s positions with left padding: one kernel call per padding length, whose
    outputs are put together again; the gradients of every weight equal SDPA's."""
    reference, ours = pair(LlamaForCausalLM, llama_config(), "attn_softmax", seed=12)
    ids, mask = prompts(batch=4, length=8, seed=13)
    mask[3, :5] = 0  # calls: entries 0 and 2, entry 1 (3 padding tokens), entry 3 (5)
    labels = ids.masked_fill(mask == 0, -100)
    for model in (reference.train(), ours.train()):
        model(ids, attention_mask=mask, position_ids=generate_positions(mask),
              labels=labels).loss.backward()
    for (name, want), got in zip(reference.named_parameters(), ours.parameters()):
        torch.testing.assert_close(got.grad, want.grad, rtol=0, atol=1e-12, msg=name)


def test_attention_dropout_in_training_is_an_error(registered):
    model = LlamaForCausalLM._from_config(llama_config(attention_dropout=0.1),
                                          attn_implementation="attn_softmax",
                                          dtype=torch.float64).train()
    ids, _ = prompts()
    with pytest.raises(NotImplementedError, match="attention dropout 0.1"):
        model(ids)


def test_a_keep_table_is_laid_out_at_the_call_positions(registered):
    """The mask input is read at (b, h, i, j) in positions: a decoding row's table has one
    row (reads clamp to it) and key_start masked columns before the call's keys; several
    rows sit at query_start."""
    keep = torch.tensor([[[[True, False, True]]]])
    table = registered._position_table(keep, torch.tensor([7]), 5)
    assert table.dtype == torch.int8 and table.shape == (1, 1, 1, 8)
    assert table[0, 0, 0].tolist() == [0, 0, 0, 0, 0, 1, 0, 1]
    rows = torch.tensor([[[[True, False], [True, True]]], [[[False, True], [True, False]]]])
    table = registered._position_table(rows, torch.tensor([1, 3]), 2)
    assert table.shape == (2, 1, 5, 4)
    assert torch.equal(table[0, 0, 1:3, 2:].bool(), rows[0, 0])
    assert torch.equal(table[1, 0, 3:5, 2:].bool(), rows[1, 0])
    assert table.sum() == rows.sum(), "nothing else is kept"
