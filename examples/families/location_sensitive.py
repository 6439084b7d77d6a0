#!/usr/bin/env python3
"""Location-sensitive attention (Chorowski et al., "Attention-Based Models for Speech
Recognition", 2015) as one compiled kernel call per decoder step.

    e_ij = w·tanh(W s_{i-1} + V h_j + U f_ij + b),   f_i = F * α_{i-1},   α_i = softmax_j(e_ij)

F is a learnable 1-D convolution (k channels, odd width r) over the previous alignment
α_{i-1}; U projects its k features f_ij to the hidden width n. The kernel
(examples/families/location_sensitive.mlir) scores with the additive contraction
v·tanh(W_q q + W_k k_j), which has no bias and one query projection: the step feeds it
augmented rows of head dim d' = d + 1 + k whose products are exactly the terms above,

    q   = [s_{i-1}; 1; 0_k]    W_q = [W | b | 0]    W_q q   = W s_{i-1} + b
    k_j = [h_j;     0; f_ij]   W_k = [V | 0 | U]    W_k k_j = V h_j + U f_ij
    v   = w

(the 0 blocks multiply zeros: their gradient is 0 and they stay 0). The values are
[h_j; e_j], e_j the one-hot of position j (as in pointer_network.py), so the call returns
both the context c_i = Σ_j α_ij h_j and the alignment α_i, each differentiable; α_i feeds
the next step's convolution. α_0 is uniform over the (unpadded) keys: no position is
preferred before the first step.

Task: copy a sequence of random tokens, one per decoder step (teacher forcing). The
encoder embeds each token on its own, so h_j says nothing about j: to find position i
the attention has to step one key to the right of α_{i-1}, through F and U.

    .venv/bin/python examples/families/location_sensitive.py --steps 300
"""
import argparse

import torch
import torch.nn as nn

from hierarchical_attention import compile_example

WIDTH = 16       # d: encoder and decoder width; d + 1 + CHANNELS is the kernel's head dim
CHANNELS = 4     # k: location features per key
CONV_WIDTH = 5   # r: odd, so f_ij is centred on key j


def uniform_alignment(h, key_lengths=None):
    """α_0 [B, Nk]: 1/length on the keys below key_lengths[b] (all Nk keys without it), 0
    on the padding."""
    B, N, _ = h.shape
    if key_lengths is None:
        return h.new_full((B, N), 1.0 / N)
    valid = torch.arange(N, device=h.device) < key_lengths[:, None]
    return valid.to(h.dtype) / key_lengths[:, None].to(h.dtype)


class LocationSensitiveAttention(nn.Module):
    """One decoder step: (s_{i-1} [B, d], h [B, Nk, d], α_{i-1} [B, Nk]) ->
    (c_i [B, d], α_i [B, Nk]); key_lengths [B] (int64) masks padded keys."""

    def __init__(self, kernel, channels=CHANNELS, conv_width=CONV_WIDTH):
        super().__init__()
        self.kernel = kernel
        head_dim = kernel.param_shapes["W_q"][1]
        self.channels = channels
        self.width = head_dim - 1 - channels
        # W_q, W_k, v flattened as the kernel's params vector (score_weights: W, b, V, U, w)
        self.params = nn.Parameter(kernel.initial_params())
        # F: no bias of its own, U·bias would only add to b
        self.location = nn.Conv1d(1, channels, conv_width, padding=conv_width // 2, bias=False)
        self.reset_parameters()

    def score_weights(self, params=None):
        """W, b, V, U, w of e_ij as views of the kernel's params vector (self.params, or a
        tensor laid out like it, e.g. its gradient)."""
        split = self.kernel.split_params(self.params if params is None else params)
        d = self.width
        return {"W": split["W_q"][:, :d], "b": split["W_q"][:, d],
                "V": split["W_k"][:, :d], "U": split["W_k"][:, d + 1:], "w": split["v"]}

    def reset_parameters(self):
        """nn.Linear's uniform initialisation for W, V, U and w, b = 0, and the unused blocks
        of W_q and W_k 0 (the kernel's own initial values are identities, no location
        term)."""
        with torch.no_grad():
            self.params.zero_()
            for name, weight in self.score_weights().items():
                if name != "b":
                    bound = weight.shape[-1] ** -0.5
                    weight.uniform_(-bound, bound)

    def forward(self, s_prev, h, alpha_prev, key_lengths=None):
        B, N, d = h.shape
        location = self.location(alpha_prev.unsqueeze(1)).transpose(1, 2)        # f_i [B, N, k]
        query = torch.cat([s_prev, s_prev.new_ones(B, 1), s_prev.new_zeros(B, self.channels)], -1)
        keys = torch.cat([h, h.new_zeros(B, N, 1), location], -1)
        positions = torch.eye(N, dtype=h.dtype, device=h.device).expand(B, N, N)
        values = torch.cat([h, positions], -1)                                    # [h_j; e_j]
        out = self.kernel(query[:, None, None], keys[:, None], values[:, None], self.params,
                          key_lengths=key_lengths)[:, 0, 0]
        return out[:, :d], out[:, d:]


class Copier(nn.Module):
    """Chorowski et al.'s attention-based recurrent sequence generator on the copy task:
    α_i = Attend(s_{i-1}, α_{i-1}, h), y_i predicted from [s_{i-1}; c_i], then
    s_i = GRU([embed(y_i); c_i], s_{i-1}) with the true y_i (teacher forcing)."""

    def __init__(self, kernel, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, WIDTH)        # the encoder: h_j = embed(x_j)
        self.attend = LocationSensitiveAttention(kernel)
        self.decoder = nn.GRUCell(2 * WIDTH, WIDTH)
        self.start = nn.Parameter(torch.zeros(WIDTH))  # s_0
        self.readout = nn.Linear(2 * WIDTH, vocab)

    def forward(self, tokens):                         # tokens [B, N]
        B, N = tokens.shape
        h = self.embed(tokens)
        s = self.start.expand(B, WIDTH)
        alpha = uniform_alignment(h)
        logits, alignments = [], []
        for i in range(N):
            context, alpha = self.attend(s, h, alpha)
            logits.append(self.readout(torch.cat([s, context], -1)))
            alignments.append(alpha)
            s = self.decoder(torch.cat([self.embed(tokens[:, i]), context], -1), s)
        return torch.stack(logits, 1), torch.stack(alignments, 1)   # [B, N, vocab], [B, N, N]


def train(steps=300, n=8, vocab=10, batch=32, lr=0.02, seed=0, kernel=None, log=print):
    """Returns the model, the losses and the last batch's alignment accuracy (the share of
    steps i whose α_i peaks at key i)."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = Copier(kernel or compile_example("location_sensitive"), vocab)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses, accuracy = [], 0.0
    for step in range(steps):
        tokens = torch.randint(0, vocab, (batch, n), generator=gen)
        logits, alignments = model(tokens)
        loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), tokens.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        accuracy = (alignments.argmax(-1) == torch.arange(n)).float().mean().item()
        if log and (step % 50 == 0 or step == steps - 1):
            log(f"step {step:4d}  loss {loss.item():.4f}  alignment accuracy {accuracy:.3f}")
    return model, losses, accuracy


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300)
    a = p.parse_args()
    train(a.steps)
