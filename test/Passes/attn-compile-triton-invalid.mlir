// attn-compile --cuda-targets refuses what it cannot do, naming what it expected: the
// removed options of the hand-built backend, a Python that cannot run attn.triton_aot.
// (Scan and implicit normalizers compile and launch: test_triton_aot.py, cuda_launch_test.)
// RUN: not attn-compile %s -o %t.ptx --emit=ptx --cuda-targets=sm_90 2>&1 | FileCheck %s --check-prefix=PTX
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90 --gpu-backend=mlir 2>&1 | FileCheck %s --check-prefix=BACKEND
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90 --triton-python=%t.missing-python 2>&1 | FileCheck %s --check-prefix=PYTHON
// RUN: not ls %t.so

// PTX: attn-compile: for the --emit option: Cannot find option named 'ptx'!
// BACKEND: attn-compile: Unknown command line argument '--gpu-backend=mlir'
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
