"""One forward and one backward of every GPU kernel kind, for compute-sanitizer.

    compute-sanitizer --tool memcheck python3 test/cuda/sanitize_kernels.py ARTIFACT_DIR
    compute-sanitizer --tool racecheck python3 test/cuda/sanitize_kernels.py ARTIFACT_DIR

The kinds (lib/LowerToGPU: one kernel set per storage type and head dim): tensor-core
kernels (bf16 and f16 with an online normalizer: softmax), SIMT kernels (f32 softmax;
f16 with a plain normalizer: sigmoid), and the plain bf16 tensor-core path (sigmoid),
each at a shape whose N is not a multiple of the tile and with a fully masked row (a
key length of 0), causal. ARTIFACT_DIR holds <name>.so from scripts/gpu-artifacts.sh.
Exits non-zero if a result is not finite; the sanitizer reports memory errors and races.
"""
import os
import sys

import torch

import attn

CASES = [("softmax", torch.bfloat16), ("softmax", torch.float16), ("softmax", torch.float32),
         ("sigmoid", torch.float16), ("sigmoid", torch.bfloat16)]


def main(artifact_dir):
    torch.manual_seed(0)
    for name, dtype in CASES:
        kernel = attn.load(os.path.join(artifact_dir, f"{name}.so"))
        for d in kernel.cuda_head_dims(dtype):
            q, k, v = (torch.randn(2, 2, 77, d, device="cuda", dtype=dtype, requires_grad=True)
                       for _ in range(3))
            params = kernel.initial_params(torch.float32, "cuda").requires_grad_()
            lengths = torch.tensor([77, 0], device="cuda")
            out = kernel(q, k, v, params, is_causal=True, key_lengths=lengths)
            out.backward(torch.randn_like(out))
            torch.cuda.synchronize()
            finite = all(torch.isfinite(t).all() for t in (out, q.grad, k.grad, v.grad, params.grad))
            print(f"{name} {dtype} d={d}: fwd+bwd {'finite' if finite else 'NOT FINITE'}", flush=True)
            if not finite:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
