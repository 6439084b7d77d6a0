"""One forward and one backward of the GPU (Triton) kernels, for compute-sanitizer.

    compute-sanitizer --tool memcheck python3 test/cuda/sanitize_kernels.py ARTIFACT_DIR
    compute-sanitizer --tool memcheck python3 test/cuda/sanitize_kernels.py --python

ARTIFACT_DIR: the cubins of <name>.so from scripts/gpu-artifacts.sh, launched by the C++
runtime ($ATTN_RUNTIME_LIB); --python: the emitted modules as bench/gpu_bench.py runs them
(attn.triton_backend, from $ATTN_CACHE_DIR where attn-compile is absent: gpu_bench.py
--prepare fills it), compiled by this machine's Triton. Cases: an
online normalizer (softmax) in bf16 and f16 and a plain one (sigmoid) in bf16, at a shape
whose N is not a multiple of any tile, causal, with a fully masked batch entry (key length
0). Each case then runs again with the key lengths on the CPU under torch's sync debug
mode, which raises if the call waits for the GPU on the host (a copy from pageable memory
does: it drains the stream). Exits non-zero if a result is not finite; the sanitizer
reports memory errors.
"""
import os
import sys

import torch

CASES = [("softmax", torch.bfloat16), ("softmax", torch.float16), ("sigmoid", torch.bfloat16)]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def kernel_of(name, artifact_dir):
    if artifact_dir is None:
        sys.path.insert(0, os.path.join(REPO, "bench"))
        import gpu_bench
        return gpu_bench.ours(name)
    import attn
    return attn.load(os.path.join(artifact_dir, f"{name}.so"))


def main(argv):
    artifact_dir = None if argv[1:] == ["--python"] else argv[1]
    torch.manual_seed(0)
    for name, dtype in CASES:
        kernel = kernel_of(name, artifact_dir)
        q, k, v = (torch.randn(2, 2, 77, 64, device="cuda", dtype=dtype, requires_grad=True)
                   for _ in range(3))
        params = kernel.initial_params(torch.float32, "cuda").requires_grad_()
        lengths = torch.tensor([77, 0], device="cuda")
        out = kernel(q, k, v, params, is_causal=True, key_lengths=lengths)
        out.backward(torch.randn_like(out))
        torch.cuda.synchronize()
        grads = [q.grad, k.grad, v.grad] + ([params.grad] if params.numel() else [])
        finite = all(torch.isfinite(t).all() for t in [out, *grads])
        print(f"{name} {dtype}: fwd+bwd {'finite' if finite else 'NOT FINITE'}", flush=True)
        if not finite:
            return 1
        host_lengths = lengths.cpu()
        torch.cuda.set_sync_debug_mode("error")
        try:
            kernel(q, k, v, params, is_causal=True,
                   key_lengths=host_lengths).backward(torch.ones_like(out))
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
        print(f"{name} {dtype}: a second fwd+bwd left the stream running", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
