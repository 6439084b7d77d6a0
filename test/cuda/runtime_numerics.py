"""A scan's and an implicit normalizer's Triton cubins launched by the C++ runtime on a
GPU, against the float64 reference: O and every gradient.

    python3 test/cuda/runtime_numerics.py ARTIFACT_DIR

ARTIFACT_DIR: stick_breaking.so (a scan: attn_bwd_dq before attn_bwd_dkdv with its tile
states, and the decode forward) and sparsemax.so (implicit: attn_fwd alone forward, r_i in
attn_bwd_dq) from scripts/gpu-artifacts.sh, bf16 d = 64 cubins, run through the C++ runtime
($ATTN_RUNTIME_LIB) since they are for this GPU. References: test/reference/
row_normalizers.py's stick_breaking and sparsemax on the bf16-rounded inputs in float64
(scores q·kᵀ/√d; stick_breaking.mlir's mask j < i). Cases: B = 2, H = 4 over H_KV = 2, Nq =
Nk = 77 (no multiple of a tile), causal, one batch entry padded to 50 keys; and a decoder
step, one query over 300 keys at query start 300 (the scan's decode forward splits its
keys). Exits non-zero where an error exceeds its tolerance (relative to the reference's
largest magnitude: bf16 storage and dots).
"""
import math
import os
import sys

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "test", "reference"))

import row_normalizers  # noqa: E402

TOLERANCE = 4 * 2 ** -8  # four of bf16's eps of the largest magnitude
DEVICE, DTYPE = "cuda", torch.bfloat16  # the artifacts' cubins


def reference(name, q, k, v, dout, key_lengths, query_start):
    """O, dq, dk, dv in float64 (k, v repeated over the GQA group)."""
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    group = q.shape[1] // k.shape[1]
    kk, vv = (t.repeat_interleave(group, dim=1) for t in leaves[1:])
    Nq, Nk = q.shape[2], k.shape[2]
    i = query_start + torch.arange(Nq, device=q.device)[:, None]
    j = torch.arange(Nk, device=q.device)[None, :]
    keep = (j <= i) & (j < key_lengths.view(-1, 1, 1, 1))  # causal, padding
    s = leaves[0] @ kk.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if name == "stick_breaking":
        w, _ = row_normalizers.stick_breaking(s, keep & (j < i))
    else:
        w = row_normalizers.sparsemax(s, keep.expand_as(s))
    out = w @ vv
    grads = torch.autograd.grad(out, leaves, dout.double())
    return [out.detach(), *grads]


def check(kernel, name, B, H, H_KV, Nq, Nk, lengths, query_start):
    generator = torch.Generator(device=DEVICE).manual_seed(Nq * 1000 + Nk)
    q = torch.randn(B, H, Nq, 64, device=DEVICE, generator=generator).to(DTYPE)
    k, v = (torch.randn(B, H_KV, Nk, 64, device=DEVICE, generator=generator).to(DTYPE)
            for _ in range(2))
    dout = torch.randn(B, H, Nq, 64, device=DEVICE, generator=generator).to(DTYPE)
    key_lengths = torch.tensor(lengths, device=DEVICE)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = kernel(*leaves, is_causal=True, key_lengths=key_lengths, query_start=query_start)
    got = [out.detach(), *torch.autograd.grad(out, leaves, dout)]
    want = reference(name, q, k, v, dout, key_lengths, query_start)
    failed = False
    for label, g, w in zip(("O", "dq", "dk", "dv"), got, want):
        scale = max(w.abs().max().item(), 1e-6)
        error = (g.double() - w).abs().max().item() / scale
        ok = math.isfinite(error) and error <= TOLERANCE
        failed |= not ok
        print(f"{name} {Nq}x{Nk} (query start {query_start}): {label} max error "
              f"{error:.2e} of its largest {scale:.2e} {'ok' if ok else 'FAILED'}", flush=True)
    return failed


def main(argv):
    import attn
    from attn.triton_backend import choose_cuda_target

    failed = False
    for name in ("stick_breaking", "sparsemax"):
        kernel = attn.load(os.path.join(argv[1], f"{name}.so"))
        if choose_cuda_target(kernel.cuda_targets, *torch.cuda.get_device_capability()) is None:
            print(f"{name}.so has no cubin for this GPU (targets {kernel.cuda_targets}): the "
                  "C++ runtime would not launch it; run scripts/gpu-artifacts.sh for its chip")
            return 2
        failed |= check(kernel, name, 2, 4, 2, 77, 77, [77, 50], 0)
        failed |= check(kernel, name, 1, 4, 2, 1, 300, [300], 300)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
