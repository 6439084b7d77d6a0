// RUN: attn-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{'attn.normalizer' op numerator region must take 5 arguments (the score, the batch index, the head index, the query index, the key index), got 0; write ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index)}}
attn.normalizer @no_score {
  numerator {
  ^bb0:
    %c = arith.constant 1.0 : f32
    attn.yield %c : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op numerator region must take 6 arguments (the score, the batch index, the head index, the query index, the key index, param 'bias'), got 5; write ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f32)}}
attn.normalizer @missing_param_arg params(bias = 0.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator constant 1.0
}

// -----

// expected-error @+1 {{'attn.normalizer' op denominator region must take 6 arguments (the score, the batch index, the head index, the query index, the key index, param 't'), got 7; write ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32)}}
attn.normalizer @extra_denominator_arg params(t = 1.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    attn.yield %s : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32, %u: f32):
    attn.yield %s : f32
  }
}

// -----

// expected-error @+1 {{numerator region argument #0 (the score) must be a float type, got 'i32'}}
attn.normalizer @integer_score {
  numerator {
  ^bb0(%s: i32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : i32
  }
  denominator count
}

// -----

// expected-error @+1 {{numerator region argument #0 (the score) must be a float type, got 'index'}}
attn.normalizer @index_score {
  numerator {
  ^bb0(%s: index, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : index
  }
  denominator count
}

// -----

// A param block argument must have the score's float type.
// expected-error @+1 {{'attn.normalizer' op numerator region argument #5 (param 'bias') must have the score type 'f32', got 'f64'}}
attn.normalizer @param_f64 params(bias = 0.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f64):
    attn.yield %s : f32
  }
  denominator constant 1.0
}

// -----

// expected-error @+1 {{'attn.normalizer' op denominator region argument #6 (param 'b') must have the score type 'f32', got 'i1'}}
attn.normalizer @param_i1 params(a = 0.0, b = 1.0) {
  numerator {
  ^bb0(%s: f32, %bx: index, %h: index, %i: index, %j: index, %a: f32, %b: f32):
    attn.yield %s : f32
  }
  denominator {
  ^bb0(%s: f32, %bx: index, %h: index, %i: index, %j: index, %a: f32, %b: i1):
    attn.yield %s : f32
  }
}

// -----

// The numerator must yield its score type.
attn.normalizer @yields_i32 {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.constant 1 : i32
    // expected-error @+1 {{'attn.yield' op in the numerator region must yield 'f32', got 'i32'}}
    attn.yield %c : i32
  }
  denominator count
}

// -----

attn.normalizer @denominator_yields_f64 {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %w = arith.extf %s : f32 to f64
    // expected-error @+1 {{'attn.yield' op in the denominator region must yield 'f32', got 'f64'}}
    attn.yield %w : f64
  }
}

// -----

// Numerator and denominator compute in the same float type.
// expected-error @+1 {{'attn.normalizer' op denominator region computes in 'f64' but the numerator region in 'f32'}}
attn.normalizer @mixed_types {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator {
  ^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f64
  }
}

// -----

// expected-error @+1 {{'attn.normalizer' op a constant denominator must not be 0}}
attn.normalizer @divide_by_zero {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator constant 0.0
}

// -----

// expected-error @+1 {{'attn.normalizer' op a constant denominator must not be 0}}
attn.normalizer @divide_by_negative_zero {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator constant -0.0
}

// -----

// expected-error @+1 {{'attn.normalizer' op declares param 'a' twice}}
attn.normalizer @duplicate_params params(a = 1.0, b = 2.0, a = 3.0) {
  numerator {
  ^bb0(%s: f32, %bx: index, %h: index, %i: index, %j: index, %a: f32, %b: f32, %a2: f32):
    attn.yield %s : f32
  }
  denominator constant 1.0
}

// -----

// The numerator is a single block.
// expected-error @+1 {{'attn.normalizer' op region #0 ('numerator') failed to verify constraint: region with 1 blocks}}
attn.normalizer @two_blocks {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  ^bb1(%t: f32):
    attn.yield %t : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op algorithm kernelised belongs to an attn.kernel}}
attn.normalizer @linear_on_normalizer attributes {algorithm = #attn<algorithm kernelised>} {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// A normalizer of an older attn, whose regions saw (s, params) only: the error shows
// the header to write, in the region's own float type.
// expected-error @+1 {{'attn.normalizer' op numerator region must take 6 arguments (the score, the batch index, the head index, the query index, the key index, param 'bias'), got 2; write ^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index, %bias: f64)}}
attn.normalizer @old_form params(bias = 0.0) {
  numerator {
  ^bb0(%s: f64, %bias: f64):
    %e = math.exp %s : f64
    attn.yield %e : f64
  }
  denominator constant 1.0
}

// -----

// expected-error @+1 {{'attn.normalizer' op numerator region argument #3 (the query index) must be 'index', got 'i64'}}
attn.normalizer @i64_query {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: i64, %j: index):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op an offset applies to a summed denominator (C_i = β + Σ_j h), not to a count denominator}}
attn.normalizer @count_offset {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  }
}

// -----

// expected-error @+1 {{'attn.normalizer' op epsilon is a constant row offset; write either epsilon or an offset region, not both}}
attn.normalizer @both {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator epsilon 1.0e-06 {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  }
}

// -----

// expected-error @+1 {{'attn.normalizer' op offset region must take 3 arguments (the batch index, the head index, the query index), got 4; write ^bb0(%b: index, %h: index, %i: index)}}
attn.normalizer @with_key {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  offset {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  }
}

// -----

attn.normalizer @offset_type {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %one = arith.constant 1.0 : f64
    // expected-error @+1 {{'attn.yield' op in the offset region must yield 'f32', got 'f64'}}
    attn.yield %one : f64
  }
}

// -----

// expected-error @+1 {{'attn.normalizer' op offset region argument #3 (a param) must have the score type 'f32', got 'f64'}}
attn.normalizer @param_type params(t = 1.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    attn.yield %s : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    attn.yield %s : f32
  }
  offset {
  ^bb0(%b: index, %h: index, %i: index, %t: f64):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  }
}
