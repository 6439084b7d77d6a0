// RUN: attn-opt %s --attn-lower-to-gpu -verify-diagnostics

// The scalar functions come from attn-derive-backward, which has not run.
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no outlined functions; run attn-derive-backward first}}
attn.kernel @k normalizer(@relu)
