// RUN: attn-opt %s --split-input-file --verify-diagnostics

// A mask yields i1, never a float weight.
attn.mask @float_mask {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %c = arith.constant 1.0 : f32
  // expected-error @+1 {{'attn.yield' op in the mask region must yield 'i1', got 'f32'}}
  attn.yield %c : f32
}

// -----

attn.mask @index_mask {
^bb0(%b: index, %h: index, %i: index, %j: index):
  // expected-error @+1 {{'attn.yield' op in the mask region must yield 'i1', got 'index'}}
  attn.yield %j : index
}

// -----

// expected-error @+1 {{'attn.mask' op mask region must take 4 arguments (the batch index, the head index, the query index, the key index), got 1; write ^bb0(%b: index, %h: index, %i: index, %j: index)}}
attn.mask @one_arg {
^bb0(%i: index):
  %t = arith.constant true
  attn.yield %t : i1
}

// -----

// expected-error @+1 {{'attn.mask' op mask region must take 4 arguments (the batch index, the head index, the query index, the key index), got 5}}
attn.mask @five_args {
^bb0(%b: index, %h: index, %i: index, %j: index, %s: f32):
  %t = arith.constant true
  attn.yield %t : i1
}

// -----

// expected-error @+1 {{'attn.mask' op mask region argument #2 (the query index) must be 'index', got 'i64'}}
attn.mask @i64_query {
^bb0(%b: index, %h: index, %i: i64, %j: index):
  %t = arith.constant true
  attn.yield %t : i1
}

// -----

// expected-error @+1 {{'attn.mask' op mask region argument #3 (the key index) must be 'index', got 'f32'}}
attn.mask @float_key {
^bb0(%b: index, %h: index, %i: index, %j: f32):
  %t = arith.constant true
  attn.yield %t : i1
}

// -----

// A mask of an older attn, which saw (i, j) only: the error shows the new header.
// expected-error @+1 {{'attn.mask' op mask region must take 4 arguments (the batch index, the head index, the query index, the key index), got 2; write ^bb0(%b: index, %h: index, %i: index, %j: index)}}
attn.mask @old_form {
^bb0(%i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}

// -----

// expected-error @+1 {{'attn.mask' op mask region argument #0 (the batch index) must be 'index', got 'i32'}}
attn.mask @i32_batch {
^bb0(%b: i32, %h: index, %i: index, %j: index):
  %t = arith.constant true
  attn.yield %t : i1
}

// -----

// expected-error @+1 {{'attn.mask' op region #0 ('body') failed to verify constraint: region with 1 blocks}}
attn.mask @two_blocks {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %t = arith.constant true
  attn.yield %t : i1
^bb1:
  %f = arith.constant false
  attn.yield %f : i1
}

// -----

// A mask has no params.
// expected-error @+1 {{expected '{' to begin a region}}
attn.mask @with_params params(a = 1.0) {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %t = arith.constant true
  attn.yield %t : i1
}
