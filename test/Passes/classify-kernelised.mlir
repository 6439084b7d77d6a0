// RUN: attn-opt %s --split-input-file --attn-classify-normalizer | FileCheck %s

// Linear attention: φ(q)·φ(k), g = s, C = ε + Σ s.
// CHECK-LABEL: attn.normalizer @linear
// CHECK-SAME: algorithm = #attn<algorithm plain>
// CHECK: attn.kernel @linear_attention normalizer(@linear) score(@elu) {algorithm = #attn<algorithm kernelised>}
attn.score @elu contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = math.exp %x : f32
  %neg = arith.cmpf olt, %x, %zero : f32
  %xp1 = arith.addf %x, %one : f32
  %phi = arith.select %neg, %e, %xp1 : f32
  attn.yield %phi : f32
}
attn.normalizer @linear {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator epsilon 1.0e-06 {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
}
attn.kernel @linear_attention normalizer(@linear) score(@elu)

// -----

// g = Δ·s/2 with a learnable Δ, a count denominator, a causal mask region and a
// scaled dot without feature map (φ = identity): still kernelised.
// CHECK: attn.kernel @scaled_linear {{.*}}{algorithm = #attn<algorithm kernelised>}
attn.score @scaled contract scaled_dot scale 0.5
attn.mask @causal {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}
attn.normalizer @weighted params(delta = 1.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %delta: f32):
    %two = arith.constant 2.0 : f32
    %ds = arith.mulf %delta, %s : f32
    %g = arith.divf %ds, %two : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @scaled_linear normalizer(@weighted) score(@scaled) mask(@causal)

// -----

// cosformer: relu features, s·cos(π/2·(i − j)/M).
// CHECK: attn.kernel @cosformer {{.*}}{algorithm = #attn<algorithm kernelised>}
attn.score @cos_reweighted contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %r = arith.maximumf %x, %zero : f32
  attn.yield %r : f32
} mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %d = arith.subi %i, %j : index
  %di = arith.index_cast %d : index to i64
  %df = arith.sitofp %di : i64 to f32
  %w = arith.constant 1.5339808e-03 : f32
  %x = arith.mulf %df, %w : f32
  %c = math.cos %x : f32
  %t = arith.mulf %s, %c : f32
  attn.yield %t : f32
}
attn.normalizer @lin {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator epsilon 1.0e-06 {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
}
attn.kernel @cosformer normalizer(@lin) score(@cos_reweighted)

// -----

// Softmax keeps its normalizer's algorithm: no feature map, so no remark.
// CHECK: attn.kernel @softmax_attention normalizer(@softmax) {algorithm = #attn<algorithm online>}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
attn.kernel @softmax_attention normalizer(@softmax)
