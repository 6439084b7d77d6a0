// RUN: attn-opt %s --attn-derive-backward --attn-lower-to-gpu="head-dims=64,48" -verify-diagnostics

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op head dim 48 is not supported on GPU; supported: 32, 64, 128}}
attn.kernel @k normalizer(@relu)
