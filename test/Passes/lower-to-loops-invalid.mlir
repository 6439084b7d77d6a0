// RUN: attn-opt %s --split-input-file --attn-derive-backward --attn-lower-to-loops -verify-diagnostics

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
