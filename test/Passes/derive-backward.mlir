// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-derive-backward --canonicalize --cse | FileCheck %s

// TanhMax: the online form shifts every exp by the running max m, and
// d/ds (e^s - e^-s) = e^s + e^-s.
attn.normalizer @tanhmax {
  numerator {
  ^bb0(%s: f32):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %g = arith.subf %p, %n : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %h = arith.addf %p, %n : f32
    attn.yield %h : f32
  }
}
attn.kernel @k normalizer(@tanhmax)

// CHECK-LABEL: func.func private @k.num(
// CHECK-SAME: %[[S:.*]]: f32, %[[M:.*]]: f32) -> f32
// CHECK-DAG: %[[A:.*]] = arith.subf %[[S]], %[[M]]
// CHECK-DAG: %[[EA:.*]] = math.exp %[[A]]
// CHECK-DAG: %[[NS:.*]] = arith.negf %[[S]]
// CHECK-DAG: %[[B:.*]] = arith.subf %[[NS]], %[[M]]
// CHECK-DAG: %[[EB:.*]] = math.exp %[[B]]
// CHECK: %[[G:.*]] = arith.subf %[[EA]], %[[EB]]
// CHECK: return %[[G]]

// CHECK-LABEL: func.func private @k.num.d.s(
// CHECK-SAME: %[[S:.*]]: f32, %[[M:.*]]: f32) -> f32
// CHECK-DAG: %[[EA:.*]] = math.exp
// CHECK-DAG: %[[EB:.*]] = math.exp
// CHECK: %[[D:.*]] = arith.addf %[[EA]], %[[EB]]
// CHECK: return %[[D]]

// CHECK-LABEL: func.func private @k.den.d.s(
// CHECK-DAG: %[[EA:.*]] = math.exp
// CHECK-DAG: %[[EB:.*]] = math.exp
// CHECK: %[[D:.*]] = arith.subf %[[EA]], %[[EB]]
// CHECK: return %[[D]]

// The stabiliser is the max of all exp arguments: max(s, -s) = |s|.
// CHECK-LABEL: func.func private @k.stab(
// CHECK-SAME: %[[S:.*]]: f32) -> f32
// CHECK: %[[NS:.*]] = arith.negf %[[S]]
// CHECK: arith.maximumf %[[S]], %[[NS]]

// -----

// Softmax: d/ds e^(s-m) = e^(s-m); the stabiliser is s itself.
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
attn.kernel @k normalizer(@softmax)

// The functions are recorded on the kernel by role; later passes read them there.
// CHECK: attn.kernel @k normalizer(@softmax) {algorithm = #attn<algorithm online>, functions = [#attn.functions<type = f32, numerator = @k.num, denominator = @k.den, stabilizer = @k.stab, numerator_ds = @k.num.d.s, denominator_ds = @k.den.d.s>]}
// CHECK-LABEL: func.func private @k.num.d.s(
// CHECK-SAME: %[[S:.*]]: f32, %[[M:.*]]: f32) -> f32
// CHECK-NEXT: %[[X:.*]] = arith.subf %[[S]], %[[M]]
// CHECK-NEXT: %[[E:.*]] = math.exp %[[X]]
// CHECK-NEXT: return %[[E]]
// CHECK-LABEL: func.func private @k.stab(
// CHECK-SAME: %[[S:.*]]: f32) -> f32
// CHECK-NEXT: return %[[S]]

// -----

// Plain normalizers keep their exps (inside a bounded sigmoid) unshifted, and
// every param gets a derivative. The quotient rule for a / (k + e^u) comes out
// as σ·(1 - σ), which stays finite where e^u overflows.
attn.normalizer @sigmoid params(bias = -4.0) {
  numerator {
  ^bb0(%s: f32, %bias: f32):
    %one = arith.constant 1.0 : f32
    %x = arith.addf %s, %bias : f32
    %nx = arith.negf %x : f32
    %e = math.exp %nx : f32
    %den = arith.addf %one, %e : f32
    %g = arith.divf %one, %den : f32
    attn.yield %g : f32
  }
  denominator constant 1.0
}
attn.kernel @k normalizer(@sigmoid)

// CHECK-LABEL: func.func private @k.num(
// CHECK-SAME: %[[S:.*]]: f32, %[[M:.*]]: f32, %[[B:.*]]: f32) -> f32
// CHECK: %[[X:.*]] = arith.addf %[[S]], %[[B]]
// CHECK: %[[NX:.*]] = arith.negf %[[X]]
// CHECK: math.exp %[[NX]]
// CHECK-NOT: %[[M]]
// CHECK: return
// CHECK-LABEL: func.func private @k.num.d.bias(
// CHECK: %[[E:.*]] = math.exp
// CHECK: %[[Y:.*]] = arith.addf %[[E]], %[[ONE:.*]] : f32
// CHECK: %[[SIG:.*]] = arith.divf %[[ONE]], %[[Y]]
// CHECK: %[[REST:.*]] = arith.subf %[[ONE]], %[[SIG]]
// CHECK: %[[D:.*]] = arith.mulf %[[SIG]], %[[REST]]
// CHECK: return %[[D]]
// CHECK-LABEL: func.func private @k.num.d.s(
// CHECK-NOT: func.func private @k.den
// CHECK-NOT: func.func private @k.stab

// -----

// Kinks: d/ds max(s, 0) selects 1 only where s > 0 (0 at the kink, like ReLU).
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @k normalizer(@relu)

// CHECK-LABEL: func.func private @k.num.d.s(
// CHECK-SAME: %[[S:.*]]: f32, %{{.*}}: f32) -> f32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[GT:.*]] = arith.cmpf ogt, %[[S]], %[[ZERO]]
// CHECK: %[[D:.*]] = arith.select %[[GT]], %[[ONE]], %[[ZERO]]
// CHECK: return %[[D]]

// -----

// Score mods, feature maps and masks are outlined too, with derivatives by the
// score, by the feature input and by score params.
attn.score @biased contract dot params(slope = 0.5) feature {
^bb0(%x: f32):
  %t = math.tanh %x : f32
  attn.yield %t : f32
} mod {
^bb0(%s: f32, %i: index, %j: index, %slope: f32):
  %ii = arith.index_cast %i : index to i64
  %jj = arith.index_cast %j : index to i64
  %dij = arith.subi %ii, %jj : i64
  %df = arith.sitofp %dij : i64 to f32
  %b = arith.mulf %slope, %df : f32
  %t = arith.subf %s, %b : f32
  attn.yield %t : f32
}
attn.mask @causal {
^bb0(%i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}
attn.normalizer @linear {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator epsilon 1.0e-6 {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
}
attn.kernel @k normalizer(@linear) score(@biased) mask(@causal)

// CHECK: functions = [#attn.functions<type = f32, numerator = @k.num, denominator = @k.den, score = @k.score, feature = @k.feature, mask = @k.mask, numerator_ds = @k.num.d.s, denominator_ds = @k.den.d.s, score_ds = @k.score.d.s, feature_dx = @k.feature.d.x, score_dp = [@k.score.d.slope]>]
// CHECK-LABEL: func.func private @k.num.d.s(
// CHECK: %[[ONE:.*]] = arith.constant 1.0
// CHECK-NEXT: return %[[ONE]]
// CHECK-LABEL: func.func private @k.score(
// CHECK-SAME: %[[R:.*]]: f32, %[[I:.*]]: index, %[[J:.*]]: index, %[[SLOPE:.*]]: f32) -> f32
// CHECK-LABEL: func.func private @k.score.d.slope(
// CHECK: %[[D:.*]] = arith.sitofp
// CHECK: %[[N:.*]] = arith.negf %[[D]]
// CHECK: return %[[N]]
// CHECK-LABEL: func.func private @k.score.d.s(
// CHECK: %[[ONE:.*]] = arith.constant 1.0
// CHECK-NEXT: return %[[ONE]]
// CHECK-LABEL: func.func private @k.feature(
// CHECK: math.tanh
// CHECK-LABEL: func.func private @k.feature.d.x(
// CHECK: %[[T:.*]] = math.tanh
// CHECK: %[[TT:.*]] = arith.mulf %[[T]], %[[T]]
// CHECK: arith.subf %{{.*}}, %[[TT]]
// CHECK-LABEL: func.func private @k.mask(
// CHECK: arith.cmpi ule

// -----

// e^s·sigmoid(s) is stabilised as one exponential e^(s - log(1 + e^-s) - m):
// the sigmoid alone underflows to 0 for s ≈ -1e4 while the product's ratio to
// the row's other weights stays defined. The stabiliser uses the same exponent.
attn.normalizer @sigsoftmax {
  numerator {
  ^bb0(%s: f32):
    %one = arith.constant 1.0 : f32
    %e = math.exp %s : f32
    %ns = arith.negf %s : f32
    %en = math.exp %ns : f32
    %den = arith.addf %one, %en : f32
    %sig = arith.divf %one, %den : f32
    %g = arith.mulf %e, %sig : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
attn.kernel @k normalizer(@sigsoftmax)

// CHECK-LABEL: func.func private @k.num(
// CHECK-SAME: %[[S:.*]]: f32, %[[M:.*]]: f32) -> f32
// CHECK: %[[NS:.*]] = arith.negf %[[S]]
// CHECK: %[[A:.*]] = math.absf %[[NS]]
// CHECK: %[[NA:.*]] = arith.negf %[[A]]
// CHECK: %[[E:.*]] = math.exp %[[NA]]
// CHECK: %[[T:.*]] = math.log1p %[[E]]
// CHECK: %[[MX:.*]] = arith.maximumf %[[NS]], %{{.*}}
// CHECK: %[[L:.*]] = arith.addf %[[MX]], %[[T]]
// CHECK: %[[X:.*]] = arith.subf %[[S]], %[[L]]
// CHECK: %[[SH:.*]] = arith.subf %[[X]], %[[M]]
// CHECK: %[[G:.*]] = math.exp %[[SH]]
// CHECK: return %[[G]]
// CHECK-LABEL: func.func private @k.stab(
// CHECK: math.log1p
// CHECK: arith.maximumf
