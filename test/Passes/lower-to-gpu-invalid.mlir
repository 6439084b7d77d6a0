// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-derive-backward --attn-select-gpu-schedule="head-dims=64" --attn-instantiate-functions --attn-lower-to-gpu -verify-diagnostics

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.score @cosine contract cosine scale 5.0
// expected-error @+1 {{'attn.kernel' op uses contract cosine (score @cosine), which the GPU lowering does not support yet; supported: dot, scaled_dot}}
attn.kernel @k normalizer(@relu) score(@cosine)

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
// expected-remark @+1 {{kernel @k keeps the quadratic form (not kernelised): the score has learnable weights; the linear form has no projection step yet}}
attn.score @nested contract dot weights(W: 32x16 = identity) feature {
^bb0(%x: f32):
  %t = math.tanh %x : f32
  attn.yield %t : f32
}
// expected-error @+1 {{'attn.kernel' op has a score with learnable weights (score @nested), which the GPU lowering does not support yet}}
attn.kernel @k normalizer(@relu) score(@nested)

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
attn.score @windowed contract dot row_inputs(p) mod {
^bb0(%s: f32, %i: index, %j: index, %p: f32):
  %r = arith.subf %s, %p : f32
  attn.yield %r : f32
}
// expected-error @+1 {{'attn.kernel' op has a score with row inputs (score @windowed), which the GPU lowering does not support yet}}
attn.kernel @k normalizer(@relu) score(@windowed)

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
