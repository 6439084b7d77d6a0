// RUN: attn-opt %s --attn-derive-backward --attn-lower-to-gpu="element-types=f16,f64" -verify-diagnostics

// expected-error @+1 {{unsupported GPU element type 'f64'; expected f32, f16 or bf16}}
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
  attn.kernel @k normalizer(@relu)
}
