// A region block with no ops has no attn.yield: a diagnostic, not a crash.
// RUN: attn-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{'attn.normalizer' op numerator region must end in attn.yield}}
attn.normalizer @empty_numerator {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  }
  denominator count
}

// -----

attn.normalizer @yield_not_last {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'attn.yield' op must be the last op of the numerator region}}
    attn.yield %s : f32
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}
