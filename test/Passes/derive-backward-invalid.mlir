// RUN: attn-opt %s --split-input-file --attn-derive-backward -verify-diagnostics

// math.cbrt is a valid region op but has no derivative rule yet.
attn.normalizer @cube_root {
  numerator {
  ^bb0(%s: f32):
    // expected-error @+1 {{'math.cbrt' op has no derivative rule}}
    %g = math.cbrt %s : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @k normalizer(@cube_root)

// -----

attn.normalizer @mixed {
  numerator {
  ^bb0(%s: f32):
    %one = arith.constant 1.0 : f32
    %e = math.exp %s : f32
    // expected-error @+1 {{mixes exp-factor degrees}}
    %g = arith.addf %e, %one : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @k normalizer(@mixed)
