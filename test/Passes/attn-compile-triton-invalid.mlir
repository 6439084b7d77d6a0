// attn-compile --cuda-targets refuses what it cannot do, naming what it expected: the
// removed options of the hand-built backend, a Python that cannot run attn.triton_aot,
// a scan normalizer (the C++ runtime does not launch its Triton backward), an implicit
// one (nor its kernels, attn_fwd alone forward and r_i found by attn_bwd_dq).
// RUN: not attn-compile %s -o %t.ptx --emit=ptx --cuda-targets=sm_90 2>&1 | FileCheck %s --check-prefix=PTX
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90 --gpu-backend=mlir 2>&1 | FileCheck %s --check-prefix=BACKEND
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90 --triton-python=%t.missing-python 2>&1 | FileCheck %s --check-prefix=PYTHON
// RUN: not attn-compile %examples/normalizers/stick_breaking.mlir -o %t.scan.so --cuda-targets=sm_90 2>&1 | FileCheck %s --check-prefix=SCAN
// RUN: not attn-compile %examples/normalizers/sparsemax.mlir -o %t.implicit.so --cuda-targets=sm_90 2>&1 | FileCheck %s --check-prefix=IMPLICIT
// RUN: not ls %t.so
// RUN: not ls %t.implicit.so
// RUN: not ls %t.scan.so

// PTX: attn-compile: for the --emit option: Cannot find option named 'ptx'!
// BACKEND: attn-compile: Unknown command line argument '--gpu-backend=mlir'
// PYTHON: attn-compile: {{.*}}missing-python -m attn.triton_aot failed: {{.*}} (exit status -1)
// SCAN: error: 'attn.kernel' op uses a scan normalizer (@stick_breaking, log_survival), whose Triton backward the C++ runtime does not launch yet (its per-tile row states, attn_bwd_dq before attn_bwd_dkdv); attn.triton_backend launches the module of --emit=triton
// IMPLICIT: error: 'attn.kernel' op uses an implicit normalizer (@sparsemax, a threshold τ_i solved per row), whose Triton kernels the C++ runtime does not launch yet (attn_fwd only forward, attn_bwd_dq finding r_i before attn_bwd_dkdv); attn.triton_backend launches the module of --emit=triton

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @softmax_attention normalizer(@softmax)
