// RUN: attn-opt %s --split-input-file --verify-diagnostics
// The verifier's checks of `denominator threshold c` (implicit normalizers).

// expected-error @+1 {{'attn.normalizer' op a threshold denominator's c must be > 0 (Σ_j g(s_ij - τ_i) = c with g >= 0), got 0}}
attn.normalizer @zero_sum {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %x, %zero : f32
    attn.yield %g : f32
  }
  denominator threshold 0.0
}

// -----

// expected-error @+1 {{'attn.normalizer' op a threshold denominator's c must be > 0 (Σ_j g(s_ij - τ_i) = c with g >= 0), got -1}}
attn.normalizer @negative_sum {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %x, %zero : f32
    attn.yield %g : f32
  }
  denominator threshold -1.0
}

// -----

// expected-error @+1 {{'attn.normalizer' op an offset applies to a summed denominator (C_i = β + Σ_j h), not to a threshold denominator}}
attn.normalizer @threshold_with_offset {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %x, %zero : f32
    attn.yield %g : f32
  }
  denominator threshold 1.0
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  }
}

// -----

attn.normalizer @threshold_without_value {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %x : f32
  }
  // expected-error @+2 {{expected floating point literal}}
  denominator threshold
}
