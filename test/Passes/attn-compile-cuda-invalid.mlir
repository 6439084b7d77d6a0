// Driver errors around CUDA that need no toolkit.
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90 --cuda-toolkit=%t.no-toolkit 2>&1 | FileCheck %s --check-prefix=TOOLKIT
// RUN: not attn-compile %s -o %t.ptx --emit=ptx 2>&1 | FileCheck %s --check-prefix=PTX

// TOOLKIT: attn-compile: error: --cuda-targets needs the CUDA toolkit (ptxas, libdevice), but {{.*}}no-toolkit/bin/ptxas does not exist; install the toolkit or point --cuda-toolkit (or CUDA_HOME) at it
// PTX: attn-compile: error: --emit=ptx needs --cuda-targets

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @relu_attention normalizer(@relu)
