// attn-compile --gpu-backend=triton refuses what it cannot do, naming what it expected.
// RUN: not attn-compile %s -o %t.ptx --emit=ptx --cuda-targets=sm_90 --gpu-backend=triton 2>&1 | FileCheck %s --check-prefix=PTX
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90 --gpu-backend=triton --triton-python=%t.missing-python 2>&1 | FileCheck %s --check-prefix=PYTHON
// RUN: not ls %t.so

// PTX: attn-compile: error: --emit=ptx needs --cuda-targets with --gpu-backend=mlir (the Triton backend's kernels: --emit=triton)
// PYTHON: attn-compile: {{.*}}missing-python -m attn.triton_aot failed: {{.*}} (exit status -1)

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @softmax_attention normalizer(@softmax)
