"""attn kernels as Hugging Face transformers attention implementations (attn.hf,
issue 35): a small random-weight Llama (float64, grouped-query heads) with the softmax
kernel gives SDPA attention's logits (eager attention softmaxes in float32) and trains;
its cached decoding (transformers' own DynamicCache) gives every step's logits of the
uncached forward (1e-12), and generate() picks the tokens of an uncached greedy loop,
for softmax and TanhMax."""
import copy

import pytest
import torch

from conftest import REPO

transformers = pytest.importorskip("transformers")

PROMPT, TOKENS = 6, 12


def llama(attn_mod, implementation, seed=0):
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(copy.deepcopy(config)).to(torch.float64)
    model.set_attn_implementation(implementation)
    return model


@pytest.fixture(scope="module")
def registered(attn_mod):
    attn_mod.hf.register("attn_softmax", REPO / "examples" / "normalizers" / "softmax.mlir")
    attn_mod.hf.register("attn_tanhmax", REPO / "examples" / "normalizers" / "tanhmax.mlir")


def test_softmax_is_sdpa_attention_and_trains(attn_mod, registered):
    model, sdpa = llama(attn_mod, "attn_softmax"), llama(attn_mod, "sdpa")
    tokens = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    assert (model(tokens).logits - sdpa(tokens).logits).abs().max().item() <= 1e-12
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        loss = model(tokens, labels=tokens).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses


@pytest.mark.parametrize("implementation", ["attn_softmax", "attn_tanhmax"])
def test_cached_steps_are_the_uncached_forward(attn_mod, registered, implementation):
    model = llama(attn_mod, implementation, seed=2)
    prompt = torch.randint(0, 64, (1, PROMPT), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        cache = transformers.DynamicCache(config=model.config)
        logits = model(prompt, past_key_values=cache, use_cache=True).logits[:, -1]
        sequence = prompt
        for _ in range(TOKENS):
            whole = model(sequence, use_cache=False).logits[:, -1]
            assert (logits - whole).abs().max().item() <= 1e-12
            next_token = logits.argmax(-1, keepdim=True)
            sequence = torch.cat([sequence, next_token], dim=1)
            logits = model(next_token, past_key_values=cache, use_cache=True).logits[:, -1]
        generated = model.generate(prompt, max_new_tokens=TOKENS, min_new_tokens=TOKENS,
                                   do_sample=False)
    assert torch.equal(generated, sequence)
