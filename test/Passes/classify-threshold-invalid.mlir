// RUN: attn-opt %s --split-input-file --attn-classify-normalizer -verify-diagnostics
// An implicit normalizer's g must be 0 for x <= 0, non-decreasing and reach c
// (lib/Analysis/ThresholdAnalysis.h), where the numerator folds at sample points.

// e^x is never 0: every key would get weight, and τ_i has no bracket.
attn.normalizer @exp_threshold {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %g = math.exp %x : f32
    // expected-error @+1 {{'attn.yield' op yields g(0) = 1 in the numerator of @exp_threshold, an implicit normalizer: g must be 0 for x <= 0 (w_ij = g(s_ij - τ_i) gives the keys below the threshold no weight)}}
    attn.yield %g : f32
  }
  denominator threshold 1.0
}

// -----

// |x| is 0 at 0 only.
attn.normalizer @abs_threshold {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %g = math.absf %x : f32
    // expected-error @+1 {{'attn.yield' op yields g(-1e-06) = 1e-06 in the numerator of @abs_threshold}}
    attn.yield %g : f32
  }
  denominator threshold 1.0
}

// -----

// A bump: rises to 1 at x = 1, then falls: Σ_j g(s_ij - τ) can have several roots.
attn.normalizer @bump_threshold {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %two = arith.constant 2.0 : f32
    %above = arith.maximumf %x, %zero : f32
    %rest = arith.subf %two, %above : f32
    %tent = arith.mulf %above, %rest : f32
    %g = arith.maximumf %tent, %zero : f32
    // expected-error @+1 {{'attn.yield' op yields g(2) = 0 < g(1) = 1 in the numerator of @bump_threshold, an implicit normalizer: g must be non-decreasing, so that Σ_j g(s_ij - τ) has one root τ}}
    attn.yield %g : f32
  }
  denominator threshold 1.0
}

// -----

// Saturates at 0.5 below c = 1: no threshold makes a row sum to 1 with one key.
attn.normalizer @saturating_threshold {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %half = arith.constant 0.5 : f32
    %above = arith.maximumf %x, %zero : f32
    %g = arith.minimumf %above, %half : f32
    // expected-error @+1 {{'attn.yield' op yields at most 0.5 for x up to 2^60 in the numerator of @saturating_threshold, an implicit normalizer whose weights sum to c = 1: g must reach c, else Σ_j g(s_ij - τ_i) = c has no root}}
    attn.yield %g : f32
  }
  denominator threshold 1.0
}
