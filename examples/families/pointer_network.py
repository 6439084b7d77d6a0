#!/usr/bin/env python3
"""A pointer network (Vinyals et al.) whose pointer is a compiled attention kernel.

The output at decoder step i is a distribution over the INPUT POSITIONS: the additive
(Bahdanau) attention weights a_ij = softmax_j(v·tanh(W_q d_i + W_k e_j)). attn kernels
return O_i = Σ_j a_ij v_j, so the values are the one-hot positions v_j = e_j (an
identity [N, N] value matrix): then O_i = a_i, the pointer distribution itself, with
the gradients of W_q, W_k, v (the kernel's weights) and of the encoder/decoder states
coming back through the kernel. Kernel: examples/families/bahdanau.mlir (d = 32).

Task: sort N numbers (teacher forcing). Encoder: linear embedding + bidirectional GRU;
decoder: GRU over the previously pointed input; loss: −log a_i[target_i].

    .venv/bin/python examples/families/pointer_network.py --steps 300
"""
import argparse

import torch
import torch.nn as nn

from hierarchical_attention import compile_example

HIDDEN = 32   # the head dim bahdanau.mlir's weights fix


class PointerNetwork(nn.Module):
    def __init__(self, kernel):
        super().__init__()
        self.kernel = kernel
        # the pointer's W_q, W_k, v, flattened as the kernel's params vector
        self.pointer = nn.Parameter(kernel.initial_params())
        self.embed = nn.Linear(1, HIDDEN)
        self.encoder = nn.GRU(HIDDEN, HIDDEN // 2, batch_first=True, bidirectional=True)
        self.decoder = nn.GRU(HIDDEN, HIDDEN, batch_first=True)
        self.start = nn.Parameter(torch.zeros(HIDDEN))

    def forward(self, x, targets):                       # x [B, N], targets [B, N]
        B, N = x.shape
        enc, _ = self.encoder(self.embed(x.unsqueeze(-1)))                    # [B, N, H]
        pointed = torch.gather(enc, 1, targets[:, :-1, None].expand(B, N - 1, HIDDEN))
        dec_in = torch.cat([self.start.expand(B, 1, HIDDEN), pointed], dim=1)   # teacher forcing
        dec, _ = self.decoder(dec_in)                                            # [B, N, H]
        positions = torch.eye(N).expand(B, 1, N, N)                              # v_j = e_j
        return self.kernel(dec.unsqueeze(1), enc.unsqueeze(1), positions, self.pointer)[:, 0]


def train(steps=300, n=6, batch=64, lr=0.01, seed=0, kernel=None, log=print):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = PointerNetwork(kernel or compile_example("bahdanau"))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses, accuracy = [], 0.0
    for step in range(steps):
        x = torch.rand(batch, n, generator=gen)
        targets = torch.argsort(x, dim=1)
        pointer = model(x, targets)                                      # [B, N, N]
        loss = -torch.log(torch.gather(pointer, 2, targets.unsqueeze(-1)) + 1e-9).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        accuracy = (pointer.argmax(-1) == targets).float().mean().item()
        if log and (step % 50 == 0 or step == steps - 1):
            log(f"step {step:4d}  loss {loss.item():.4f}  pointer accuracy {accuracy:.3f}")
    return model, losses, accuracy


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300)
    a = p.parse_args()
    train(a.steps)
