// RUN: attn-opt %s --split-input-file --attn-expand-shared-regions --attn-classify-normalizer | FileCheck %s
// Summed denominators that cannot be 0 compile: h > 0 everywhere, or h >= 0 with
// ε or an offset > 0, or the user's `assume_nonzero_denominator`.

// CHECK-LABEL: attn.kernel @softmax_kernel
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @softmax_kernel normalizer(@softmax)

// -----

// CHECK-LABEL: attn.kernel @expressive_kernel
attn.score @squared contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %sq = arith.mulf %s, %s : f32
  attn.yield %sq : f32
}
attn.normalizer @expressive {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator epsilon 1.0e-06 sum
}
attn.kernel @expressive_kernel normalizer(@expressive) score(@squared)

// -----

// A feature map > 0 makes s = φ(q)·φ(k) > 0: no ε needed.
// CHECK-LABEL: attn.kernel @positive_features
attn.score @exp_feature contract dot feature {
^bb0(%x: f32):
  %e = math.exp %x : f32
  attn.yield %e : f32
}
attn.normalizer @linear {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator sum
}
attn.kernel @positive_features normalizer(@linear) score(@exp_feature)

// -----

// The user's guarantee.
// CHECK-LABEL: attn.normalizer @ratio
// CHECK-SAME: assume_nonzero_denominator
// CHECK-LABEL: attn.kernel @assumed
attn.normalizer @ratio attributes {assume_nonzero_denominator} {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator sum
}
attn.kernel @assumed normalizer(@ratio)
