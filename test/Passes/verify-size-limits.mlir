// RUN: attn-opt %s --split-input-file --attn-verify="max-region-ops=3 max-function-ops=50" -verify-diagnostics
// RUN: attn-opt %s --split-input-file --attn-derive-backward="max-region-ops=3 max-function-ops=50" -verify-diagnostics

// Size limits are checked before any analysis reads a kernel (docs/architecture.md, Compile time):
// attn-verify and, for a pipeline without it, attn-derive-backward before it makes
// a function. A region of more than max-region-ops ops is refused, naming its owner
// and the region.
// expected-error @+1 {{'attn.score' op has 4 ops in its mod region, over the limit of 3 per region (docs/architecture.md, Compile time); shorten the region or share subexpressions}}
attn.score @deep contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %a0 = math.tanh %s : f32
  %a1 = math.tanh %a0 : f32
  %a2 = math.tanh %a1 : f32
  %a3 = math.tanh %a2 : f32
  attn.yield %a3 : f32
}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @k normalizer(@softmax) score(@deep)

// -----

// Every param adds a derivative of the numerator and of the denominator, each a copy
// of the region: 3 ops × (function, d/ds, 10 d/dθ) × 2 = 72 ops at least, refused
// before classification.
attn.normalizer @many params(t0 = 0.0, t1 = 0.0, t2 = 0.0, t3 = 0.0, t4 = 0.0, t5 = 0.0, t6 = 0.0, t7 = 0.0, t8 = 0.0, t9 = 0.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t0: f32, %t1: f32, %t2: f32, %t3: f32, %t4: f32, %t5: f32, %t6: f32, %t7: f32, %t8: f32, %t9: f32):
    %x = arith.addf %s, %t0 : f32
    %y = arith.mulf %x, %t9 : f32
    %e = math.exp %y : f32
    attn.yield %e : f32
  }
  denominator sum
}
// expected-error @+1 {{'attn.kernel' op needs at least 72 ops in its scalar functions and their derivatives, over the limit of 50 (docs/architecture.md, Compile time); shorten the regions, share subexpressions between them, or declare fewer params}}
attn.kernel @k normalizer(@many)

// -----

// A shared region counts in both regions it is inlined into, and each read of a
// learnable input adds a derivative: numerator and denominator of 2 + 2 ops, each
// × (function, d/ds, d/dw.0) = 24 ops, under the limit; the offset region of 4 ops is
// over the per-region limit.
attn.input @w learnable : tensor<?xf32>
// expected-error @+1 {{'attn.normalizer' op has 4 ops in its offset region, over the limit of 3 per region}}
attn.normalizer @offsets {
  shared {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %x = attn.read @w[%h] : f32
    %y = arith.addf %s, %x : f32
    attn.yield %y : f32
  }
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %v0: f32):
    %e = math.exp %v0 : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %v0: f32):
    %e = math.exp %v0 : f32
    attn.yield %e : f32
  }
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %x = attn.read @w[%h] : f32
    %y = arith.addf %x, %x : f32
    %z = arith.addf %y, %x : f32
    %e = math.exp %z : f32
    attn.yield %e : f32
  }
}
attn.kernel @k normalizer(@offsets)
