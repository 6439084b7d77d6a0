// RUN: attn-opt %s --split-input-file --attn-expand-shared-regions --attn-classify-normalizer -verify-diagnostics
// A summed denominator that can be 0 for some input stops compilation, naming the fix.

// s / Σ s: s takes both signs, so the sum can cancel.
attn.normalizer @ratio {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-note @+1 {{h takes both signs, so even ε + Σ_j h can cancel to 0: make h >= 0 (s·s, |s|, max(s, 0), e^s) and add `epsilon 1.0e-6`; if your inputs guarantee C_i != 0, declare the normalizer with `attributes {assume_nonzero_denominator}`}}
    attn.yield %s : f32
  }
  denominator sum
}
// expected-error @+1 {{'attn.kernel' op divides by C_i = Σ_j h of @ratio, which can be 0: h is of any sign where s is of any sign, and nothing keeps the sum from 0 (a zero row gives NaN outputs)}}
attn.kernel @k normalizer(@ratio)

// -----

// tanh(s) / Σ |tanh(s)|: h >= 0 but 0 where every s is.
attn.normalizer @tanh_abs {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %t = math.tanh %s : f32
    attn.yield %t : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %t = math.tanh %s : f32
    %a = math.absf %t : f32
    // expected-note @+1 {{add `epsilon 1.0e-6` to the denominator (C_i = ε + Σ_j h), or an offset region that is > 0}}
    attn.yield %a : f32
  }
}
// expected-error @+1 {{'attn.kernel' op divides by C_i = Σ_j h of @tanh_abs, which can be 0: h is >= 0 where s is of any sign}}
attn.kernel @k normalizer(@tanh_abs)

// -----

// Softpick without ε: |e^s - 1| is 0 where s is.
attn.normalizer @softpick_no_epsilon {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %d = math.expm1 %s : f32
    %r = arith.maximumf %d, %zero : f32
    attn.yield %r : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %d = math.expm1 %s : f32
    %a = math.absf %d : f32
    // expected-note @+1 {{add `epsilon 1.0e-6`}}
    attn.yield %a : f32
  }
}
// expected-error @+1 {{'attn.kernel' op divides by C_i = Σ_j h of @softpick_no_epsilon, which can be 0: h is >= 0}}
attn.kernel @k normalizer(@softpick_no_epsilon)

// -----

// ReLU over its own sum, with a score that is a square: still 0 where q·k is.
attn.score @squared contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %sq = arith.mulf %s, %s : f32
  attn.yield %sq : f32
}
attn.normalizer @expressive_no_epsilon {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-note @+1 {{add `epsilon 1.0e-6`}}
    attn.yield %s : f32
  }
  denominator sum
}
// expected-error @+1 {{h is >= 0 where s is >= 0}}
attn.kernel @k normalizer(@expressive_no_epsilon) score(@squared)
