// RUN: attn-opt %s --split-input-file --verify-diagnostics
// The short forms of attn.normalizer: a shared region's values and `denominator sum`.

// The numerator takes the shared values after the params, named in the header to write.
// expected-error @+1 {{'attn.normalizer' op numerator region must take 7 arguments (the score, the batch index, the head index, the query index, the key index, shared value #0, shared value #1), got 5; write ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %v0: f32, %v1: f32)}}
attn.normalizer @numerator_without_shared_values {
  shared {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e, %e : f32, f32
  }
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator sum
}

// -----

// expected-error @+1 {{'attn.normalizer' op denominator region argument #6 (shared value #1) must be 'i1', got 'f32'}}
attn.normalizer @denominator_shared_value_type {
  shared {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    %zero = arith.constant 0.0 : f32
    %positive = arith.cmpf ogt, %s, %zero : f32
    attn.yield %e, %positive : f32, i1
  }
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %e: f32, %positive: i1):
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %e: f32, %positive: f32):
    attn.yield %e : f32
  }
}

// -----

// The shared region takes the numerator's own arguments.
// expected-error @+1 {{'attn.normalizer' op shared region must take 6 arguments (the score, the batch index, the head index, the query index, the key index, param 't'), got 5; write ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32)}}
attn.normalizer @shared_without_params params(t = 1.0) {
  shared {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32, %v: f32):
    attn.yield %v : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op shared region computes in 'f64' but the numerator region in 'f32'}}
attn.normalizer @shared_type {
  shared {
  ^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f64
  }
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %v: f64):
    attn.yield %s : f32
  }
  denominator sum
}

// -----

attn.normalizer @shared_control_flow {
  shared {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'func.call' op has side effects, which are not allowed in the shared region}}
    %e = func.call @f(%s) : (f32) -> f32
    attn.yield %e : f32
  }
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %e: f32):
    attn.yield %e : f32
  }
  denominator sum
}
func.func private @f(f32) -> f32

// -----

attn.normalizer @misspelt_sum {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  // expected-error @+1 {{expected a denominator region, or `sum` to sum the numerator}}
  denominator epsilon 1.0 total
}
