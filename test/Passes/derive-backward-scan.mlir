// RUN: attn-opt %s --attn-classify-normalizer --attn-derive-backward --canonicalize --cse | FileCheck %s
//
// A scan's log-survival region becomes the kernel's `denominator` function d, with
// d/ds and d/dθ beside g's: the scan backward's ds = g'·e^S·dP + d'·(D − B) and
// dθ = ∂g/∂θ·e^S·dP + ∂d/∂θ·(D − B) (ScanLoops.cpp). No stabiliser: nothing is
// shifted. Here d = -(s + bias)²/2 - 1: d' = ∂d/∂bias = -(s + bias), as (x + x)·(-1/2).
attn.normalizer @shifted params(bias = -1.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f32):
    %one = arith.constant 1.0 : f32
    %x = arith.addf %s, %bias : f32
    %nx = arith.negf %x : f32
    %e = math.exp %nx : f32
    %den = arith.addf %one, %e : f32
    %sigma = arith.divf %one, %den : f32
    attn.yield %sigma : f32
  }
  denominator log_survival {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f32):
    %half = arith.constant -0.5 : f32
    %one = arith.constant 1.0 : f32
    %x = arith.addf %s, %bias : f32
    %sq = arith.mulf %x, %x : f32
    %h2 = arith.mulf %sq, %half : f32
    %d = arith.subf %h2, %one : f32
    attn.yield %d : f32
  }
}
attn.kernel @k normalizer(@shifted)

// CHECK: attn.kernel @k normalizer(@shifted)
// CHECK-SAME: algorithm = #attn<algorithm scan>
// CHECK-SAME: numerator = @k.num, denominator = @k.den
// CHECK-NOT: stabilizer
// CHECK-SAME: numerator_ds = @k.num.d.s, denominator_ds = @k.den.d.s
// CHECK-SAME: numerator_dp = [@k.num.d.bias], denominator_dp = [@k.den.d.bias]

// CHECK-LABEL: func.func private @k.den.d.bias(
// CHECK: arith.addf
// CHECK: arith.mulf
// CHECK: return

// CHECK-LABEL: func.func private @k.den.d.s(
// CHECK-SAME: %[[S:[^:]*]]: f32, %{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[BIAS:[^:]*]]: f32) -> f32
// CHECK-DAG: %[[HALF:.*]] = arith.constant -5.000000e-01 : f32
// CHECK-DAG: %[[X:.*]] = arith.addf %[[S]], %[[BIAS]]
// CHECK: %[[TWICE:.*]] = arith.addf %[[X]], %[[X]]
// CHECK: %[[D:.*]] = arith.mulf %[[TWICE]], %[[HALF]]
// CHECK: return %[[D]]
