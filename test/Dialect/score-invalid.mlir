// RUN: attn-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{unknown contract 'softmax'; expected dot, scaled_dot, bilinear, additive or cosine}}
attn.score @unknown contract softmax

// -----

// expected-error @+1 {{unknown contract 'Dot'; expected dot, scaled_dot, bilinear, additive or cosine}}
attn.score @case_matters contract "Dot"

// -----

// expected-error @+1 {{expected 'contract'}}
attn.score @no_contract scale 0.5

// -----

// expected-error @+1 {{'attn.score' op 'scale' applies to contracts scaled_dot, cosine and bilinear only, not dot}}
attn.score @scaled_plain_dot contract dot scale 0.5

// -----

// expected-error @+1 {{'attn.score' op 'scale' applies to contracts scaled_dot, cosine and bilinear only, not additive}}
attn.score @scaled_additive contract additive scale 0.5 hidden 2 weights(a: 2x2 = 0.0, b: 2x2 = 0.0, v: 2 = 1.0)

// -----

// expected-error @+1 {{'attn.score' op contract additive needs 'hidden <n>', the width of v·tanh(W_q q + W_k k)}}
attn.score @additive_without_hidden contract additive

// -----

// expected-error @+1 {{'attn.score' op 'hidden' must be positive, got 0}}
attn.score @additive_zero_hidden contract additive hidden 0

// -----

// expected-error @+1 {{'attn.score' op 'hidden' applies to contract additive only, not bilinear}}
attn.score @bilinear_hidden contract bilinear hidden 16

// -----

// expected-error @+1 {{expected integer value}}
attn.score @hidden_float contract additive hidden 1.5

// -----

// expected-error @+1 {{'attn.score' op a feature map applies to dot and scaled_dot contracts only, not cosine}}
attn.score @cosine_feature contract cosine feature {
^bb0(%x: f32):
  attn.yield %x : f32
}

// -----

// expected-error @+1 {{'attn.score' op a feature map applies to dot and scaled_dot contracts only, not additive}}
attn.score @additive_feature contract additive hidden 8 feature {
^bb0(%x: f32):
  attn.yield %x : f32
}

// -----

// expected-error @+1 {{'attn.score' op declares params but has no mod region to use them}}
attn.score @unused_params contract dot params(a = 1.0)

// -----

// Params are used by the mod region only, not by the feature region.
// expected-error @+1 {{'attn.score' op declares params but has no mod region to use them}}
attn.score @feature_params contract dot params(a = 1.0) feature {
^bb0(%x: f32):
  attn.yield %x : f32
}

// -----

// expected-error @+1 {{'attn.score' op declares param 'slope' twice}}
attn.score @duplicate_params contract dot params(slope = 1.0, slope = 2.0) mod {
^bb0(%s: f32, %bx: index, %h: index, %i: index, %j: index, %a: f32, %b: f32):
  attn.yield %s : f32
}

// -----

// expected-error @+1 {{'attn.score' op feature region computes in 'f64' but the mod region in 'f32'}}
attn.score @mixed_types contract dot feature {
^bb0(%x: f64):
  attn.yield %x : f64
} mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  attn.yield %s : f32
}

// -----

// expected-error @+1 {{'attn.score' op mod region must take 5 arguments (the score, the batch index, the head index, the query index, the key index), got 1; write ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index)}}
attn.score @mod_score_only contract dot mod {
^bb0(%s: f32):
  attn.yield %s : f32
}

// -----

// expected-error @+1 {{'attn.score' op mod region must take 6 arguments (the score, the batch index, the head index, the query index, the key index, param 'w'), got 5; write ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %w: f32)}}
attn.score @mod_missing_param contract dot params(w = 1.0) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  attn.yield %s : f32
}

// -----

// expected-error @+1 {{'attn.score' op mod region argument #3 (the query index) must be 'index', got 'f32'}}
attn.score @mod_float_index contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: f32, %j: index):
  attn.yield %s : f32
}

// -----

// expected-error @+1 {{'attn.score' op mod region argument #4 (the key index) must be 'index', got 'i64'}}
attn.score @mod_i64_index contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: i64):
  attn.yield %s : f32
}

// -----

// expected-error @+1 {{'attn.score' op mod region argument #0 (the score) must be a float type, got 'index'}}
attn.score @mod_index_score contract dot mod {
^bb0(%s: index, %b: index, %h: index, %i: index, %j: index):
  attn.yield %s : index
}

// -----

// expected-error @+1 {{'attn.score' op mod region argument #5 (param 'slope') must have the score type 'f32', got 'f64'}}
attn.score @mod_param_f64 contract dot params(slope = 1.0) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %slope: f64):
  attn.yield %s : f32
}

// -----

// expected-error @+1 {{'attn.score' op feature region must take 1 arguments (a q or k entry), got 2}}
attn.score @feature_two_args contract dot feature {
^bb0(%x: f32, %y: f32):
  attn.yield %x : f32
}

// -----

// expected-error @+1 {{'attn.score' op feature region argument #0 (a q or k entry) must be a float type, got 'i32'}}
attn.score @feature_integer contract dot feature {
^bb0(%x: i32):
  attn.yield %x : i32
}

// -----

attn.score @feature_yields_i1 contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %pos = arith.cmpf ogt, %x, %zero : f32
  // expected-error @+1 {{'attn.yield' op in the feature region must yield 'f32', got 'i1'}}
  attn.yield %pos : i1
}

// -----

attn.score @mod_yields_index contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  // expected-error @+1 {{'attn.yield' op in the mod region must yield 'f32', got 'index'}}
  attn.yield %i : index
}

// -----

// `feature` comes before `mod`; after the mod region the op has ended.
attn.score @mod_then_feature contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  attn.yield %s : f32
// expected-error @+1 {{custom op 'feature' is unknown}}
} feature {
^bb0(%x: f32):
  attn.yield %x : f32
}

// -----

// expected-error @+1 {{'attn.score' op contract bilinear needs one weight W of shape dxd (s = q·W·k), got 0 weights}}
attn.score @bilinear_without_weight contract bilinear

// -----

// expected-error @+1 {{'attn.score' op contract bilinear needs a square weight W of shape dxd, got 4x8}}
attn.score @bilinear_rectangular contract bilinear weights(W: 4x8 = identity)

// -----

// expected-error @+1 {{'attn.score' op contract additive needs three weights W_q [8xd], W_k [8xd] and v [8] (s = v·tanh(W_q q + W_k k)), got 1 weights}}
attn.score @additive_one_weight contract additive hidden 8 weights(W: 8x16 = identity)

// -----

// expected-error @+1 {{'attn.score' op weight W_q of contract additive must have shape 8xd (hidden x head dim), got 4x16}}
attn.score @additive_wrong_hidden contract additive hidden 8 weights(Wq: 4x16 = identity, Wk: 8x16 = identity, v: 8 = 1.0)

// -----

// expected-error @+1 {{'attn.score' op weight W_k of contract additive must have shape 8x16 (the shape of W_q), got 8x32}}
attn.score @additive_mismatched contract additive hidden 8 weights(Wq: 8x16 = identity, Wk: 8x32 = identity, v: 8 = 1.0)

// -----

// expected-error @+1 {{'attn.score' op weight v of contract additive must have shape 8, got 8x1}}
attn.score @additive_v_matrix contract additive hidden 8 weights(Wq: 8x16 = identity, Wk: 8x16 = identity, v: 8x1 = 1.0)

// -----

// expected-error @+1 {{'attn.score' op a weight on contract scaled_dot projects q and k before a feature map, but there is no feature region}}
attn.score @dot_weights contract scaled_dot weights(W: 4x4 = identity)

// -----

// expected-error @+1 {{'attn.score' op a projection before the feature map takes one weight W of shape mxd (s = φ(W q)·φ(W k)), got 1 weights, the first of shape 4}}
attn.score @feature_vector_weight contract dot weights(W: 4 = 1.0) feature {
^bb0(%x: f32):
  attn.yield %x : f32
}

// -----

// expected-error @+1 {{'attn.score' op weights apply to contracts bilinear, additive, and dot or scaled_dot with a feature map, not cosine}}
attn.score @cosine_weights contract cosine weights(W: 4x4 = identity)

// -----

// expected-error @+1 {{'attn.score' op weight 'v': 'identity' needs a 2-D weight, got 1-D}}
attn.score @identity_vector contract additive hidden 2 weights(a: 2x2 = 0.0, b: 2x2 = 0.0, v: 2 = identity)

// -----

// expected-error @+1 {{'attn.score' op declares 'W' twice (params and weights share one namespace)}}
attn.score @clash contract bilinear params(W = 1.0) weights(W: 2x2 = identity) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %W: f32):
  attn.yield %s : f32
}

// -----

// expected-error @+1 {{'attn.score' op weight 'W' must have a non-empty shape of positive extents}}
attn.score @zero_extent contract bilinear weights(W: 0x0 = identity)

// -----

// expected-error @+1 {{expected '='}}
attn.score @no_init contract bilinear weights(W: 4x4)

// -----

// expected-error @+1 {{expected floating point literal}}
attn.score @bad_init contract bilinear weights(W: 4x4 = random)

// -----

// row_inputs(...) of an older attn: tensor inputs replace them.
// expected-error @+1 {{row_inputs(...) is retired: declare the input as a tensor, e.g. `attn.input @p : tensor<?x?x?xf32>` (learnable: `attn.input @p learnable : ...`), and read it in the mod region with `attn.read @p[%b, %h, %i] : f32`}}
attn.score @rows contract dot row_inputs(p) params(sigma = 1.0) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %p: f32, %sigma: f32):
  attn.yield %s : f32
}

// -----

// A mod of an older attn, which saw (s, i, j, params): the error shows the new header.
// expected-error @+1 {{'attn.score' op mod region must take 6 arguments (the score, the batch index, the head index, the query index, the key index, param 'slope'), got 4; write ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %slope: f32)}}
attn.score @old_form contract scaled_dot params(slope = 0.5) mod {
^bb0(%s: f32, %i: index, %j: index, %slope: f32):
  attn.yield %s : f32
}

// -----

// expected-error @+1 {{'attn.score' op mod region argument #2 (the head index) must be 'index', got 'f32'}}
attn.score @float_head contract dot mod {
^bb0(%s: f32, %b: index, %h: f32, %i: index, %j: index):
  attn.yield %s : f32
}
