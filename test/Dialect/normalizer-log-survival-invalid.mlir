// RUN: attn-opt %s --split-input-file --verify-diagnostics
//
// The checks of a scan normalizer's `denominator log_survival` (stick-breaking).

attn.normalizer @unknown_left_over {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator log_survival {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  // expected-error @+1 {{expected 'current': the left-over weight goes to the value at the query's position (`left_over current`)}}
  } left_over first
}

// -----

// expected-error @+1 {{'attn.normalizer' op log_survival region computes in 'f64' but the numerator region in 'f32'}}
attn.normalizer @mixed_types {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator log_survival {
  ^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f64
  }
}

// -----

// expected-error @+1 {{'attn.normalizer' op an offset applies to a summed denominator (C_i = β + Σ_j h), not to a log_survival denominator}}
attn.normalizer @with_offset {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator log_survival {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %c = arith.constant 1.0 : f32
    attn.yield %c : f32
  }
}

// -----

// Generic forms the custom syntax cannot write.

// expected-error @+1 {{'attn.normalizer' op a log_survival denominator takes a region only (no constant, epsilon or `sum`)}}
"attn.normalizer"() <{denominator_kind = #attn<denominator log_survival>, epsilon = 1.0 : f64, param_inits = array<f64>, param_names = [], sym_name = "with_epsilon"}> ({
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}) : () -> ()

// -----

// expected-error @+1 {{'attn.normalizer' op a log_survival denominator needs a region yielding the pair's log-survival d(s) <= 0}}
"attn.normalizer"() <{denominator_kind = #attn<denominator log_survival>, param_inits = array<f64>, param_names = [], sym_name = "without_region"}> ({
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}, {
}) : () -> ()

// -----

// expected-error @+1 {{'attn.normalizer' op left_over_to_current applies to a log_survival denominator (the weight a scan leaves), not to a constant denominator}}
"attn.normalizer"() <{denominator_kind = #attn<denominator constant>, denominator_constant = 1.0 : f64, left_over_to_current, param_inits = array<f64>, param_names = [], sym_name = "constant_left_over"}> ({
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}, {
}) : () -> ()
