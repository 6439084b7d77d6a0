"""The LDN diffusion layer (Linear Diffusion Networks, the seed in DESIGN.md's table)
on a compiled attn kernel, as a torch.nn.Module, plus a tiny sequence model and a
few training steps.

    h_i <- h_i + Σ_{j<=i} w_ij (h_j − h_i) = h_i + Σ_j w_ij h_j − (Σ_j w_ij) h_i,
    w_ij = Δt · exp(−(i − j)² / (2σ²))        (examples/families/ldn.mlir)

with σ and Δt learnable. Σ_j w_ij h_j and Σ_j w_ij come from one call of the
compiled kernel, with a column of ones appended to V. The kernel's score is
position-only, so q and k are placeholders of width 1 (they get zero gradients).

Run from the repository root after scripts/setup.sh:

    .venv/bin/python examples/models/ldn.py
"""
import os

import torch

import attn

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LDN_IR = os.path.join(REPO, "examples", "families", "ldn.mlir")


class DiffusionLayer(torch.nn.Module):
    """One diffusion step over the sequence dimension of x [B, N, D] (causal)."""

    def __init__(self, kernel=None, dt=None, sigma=None):
        super().__init__()
        self.kernel = kernel if kernel is not None else attn.compile(LDN_IR)
        init = self.kernel.initial_params(torch.float64)    # (dt, sigma)
        self.dt = torch.nn.Parameter(torch.tensor(float(init[0] if dt is None else dt)))
        self.sigma = torch.nn.Parameter(torch.tensor(float(init[1] if sigma is None else sigma)))

    def forward(self, x, key_lengths=None):
        B, N, D = x.shape
        ones = torch.ones(B, N, 1, dtype=x.dtype)
        v = torch.cat([x, ones], dim=-1).unsqueeze(1)         # [B, 1, N, D + 1]
        placeholder = torch.zeros(B, 1, N, 1, dtype=x.dtype)  # the score ignores q·k
        params = torch.stack([self.dt, self.sigma]).to(x.dtype)
        out = self.kernel(placeholder, placeholder, v, params=params,
                          key_lengths=key_lengths).squeeze(1)
        mixed, weight_sum = out[..., :D], out[..., D:]
        return x + mixed - weight_sum * x


class TinyLDN(torch.nn.Module):
    """Embedding -> (diffusion + local MLP update) x layers -> readout."""

    def __init__(self, d_in, d_model, d_out, layers=2, kernel=None):
        super().__init__()
        kernel = kernel if kernel is not None else attn.compile(LDN_IR)
        self.embed = torch.nn.Linear(d_in, d_model)
        self.diffusion = torch.nn.ModuleList(DiffusionLayer(kernel) for _ in range(layers))
        self.local = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.LayerNorm(d_model), torch.nn.Linear(d_model, d_model),
                                torch.nn.GELU())
            for _ in range(layers))
        self.readout = torch.nn.Linear(d_model, d_out)

    def forward(self, x):
        h = self.embed(x)
        for diffuse, local in zip(self.diffusion, self.local):
            h = diffuse(h)
            h = h + local(h)
        return self.readout(h)


def smoothing_task(batch, n, generator):
    """Inputs: noise; target: a causal exponential moving average of the inputs, which
    a diffusion over past positions can express."""
    x = torch.randn(batch, n, 1, generator=generator)
    y = torch.zeros_like(x)
    acc = torch.zeros(batch, 1)
    for i in range(n):
        acc = 0.8 * acc + 0.2 * x[:, i]
        y[:, i] = acc
    return x, y


def train(steps=30, n=32, seed=0, log=print):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = TinyLDN(1, 16, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for step in range(steps):
        x, y = smoothing_task(16, n, gen)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if log and (step % 10 == 0 or step == steps - 1):
            d0 = model.diffusion[0]
            log(f"step {step:3d}  loss {loss.item():.4f}  dt {d0.dt.item():.3f}  "
                f"sigma {d0.sigma.item():.3f}")
    return model, losses


if __name__ == "__main__":
    train()
