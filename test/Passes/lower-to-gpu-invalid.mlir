// RUN: attn-opt %s --split-input-file --attn-derive-backward --attn-lower-to-gpu -verify-diagnostics

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.score @additive contract additive hidden 16
// expected-error @+1 {{'attn.kernel' op uses contract additive (score @additive), which the GPU lowering does not support yet; supported: dot, scaled_dot}}
attn.kernel @k normalizer(@relu) score(@additive)

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op the module already holds gpu.module @attn_cuda; an artifact holds the CUDA kernels of one kernel}}
attn.kernel @k normalizer(@relu)
gpu.module @attn_cuda {
}

// -----

// expected-error @+1 {{an artifact holds one kernel; this module has 2: choose one with kernel=<name>}}
module {
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
  // expected-note @+1 {{candidate @a}}
  attn.kernel @a normalizer(@relu)
  // expected-note @+1 {{candidate @b}}
  attn.kernel @b normalizer(@relu)
}
