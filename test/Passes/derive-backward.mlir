// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-derive-backward --canonicalize --cse | FileCheck %s

// TanhMax: the online form shifts every exp by the running max m, and
// d/ds (e^s - e^-s) = e^s + e^-s.
attn.normalizer @tanhmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %g = arith.subf %p, %n : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %sum = arith.addf %p, %n : f32
    attn.yield %sum : f32
  }
}
attn.kernel @k normalizer(@tanhmax)

// CHECK-LABEL: func.func private @k.num(
// CHECK-SAME: %[[S:.*]]: f32, %[[M:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index) -> f32
// CHECK-DAG: %[[A:.*]] = arith.subf %[[S]], %[[M]]
// CHECK-DAG: %[[EA:.*]] = math.exp %[[A]]
// CHECK-DAG: %[[NS:.*]] = arith.negf %[[S]]
// CHECK-DAG: %[[B:.*]] = arith.subf %[[NS]], %[[M]]
// CHECK-DAG: %[[EB:.*]] = math.exp %[[B]]
// CHECK: %[[G:.*]] = arith.subf %[[EA]], %[[EB]]
// CHECK: return %[[G]]

// CHECK-LABEL: func.func private @k.num.d.s(
// CHECK-SAME: %[[S:.*]]: f32, %[[M:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index) -> f32
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
// CHECK-SAME: %[[S:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index) -> f32
// CHECK: %[[NS:.*]] = arith.negf %[[S]]
// CHECK: arith.maximumf %[[S]], %[[NS]]

// -----

// Softmax: d/ds e^(s-m) = e^(s-m); the stabiliser is s itself.
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
attn.kernel @k normalizer(@softmax)

// The functions are recorded on the kernel by role; later passes read them there.
// CHECK: attn.kernel @k normalizer(@softmax) {algorithm = #attn<algorithm online>, functions = [#attn.functions<type = f32, numerator = @k.num, denominator = @k.den, stabilizer = @k.stab, numerator_ds = @k.num.d.s, denominator_ds = @k.den.d.s>]}
// CHECK-LABEL: func.func private @k.num.d.s(
// CHECK-SAME: %[[S:.*]]: f32, %[[M:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index) -> f32
// CHECK-NEXT: %[[X:.*]] = arith.subf %[[S]], %[[M]]
// CHECK-NEXT: %[[E:.*]] = math.exp %[[X]]
// CHECK-NEXT: return %[[E]]
// CHECK-LABEL: func.func private @k.stab(
// CHECK-SAME: %[[S:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index) -> f32
// CHECK-NEXT: return %[[S]]

// -----

// Plain normalizers keep their exps (inside a bounded sigmoid) unshifted, and
// every param gets a derivative. The quotient rule for a / (k + e^u) comes out
// as σ·(1 - σ), which stays finite where e^u overflows.
attn.normalizer @sigmoid params(bias = -4.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f32):
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
// CHECK-SAME: %[[S:.*]]: f32, %[[M:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[B:.*]]: f32) -> f32
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
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @k normalizer(@relu)

// CHECK-LABEL: func.func private @k.num.d.s(
// CHECK-SAME: %[[S:.*]]: f32, %{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index) -> f32
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
^bb0(%s: f32, %bx: index, %h: index, %i: index, %j: index, %slope: f32):
  %ii = arith.index_cast %i : index to i64
  %jj = arith.index_cast %j : index to i64
  %dij = arith.subi %ii, %jj : i64
  %df = arith.sitofp %dij : i64 to f32
  %b = arith.mulf %slope, %df : f32
  %t = arith.subf %s, %b : f32
  attn.yield %t : f32
}
attn.mask @causal {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}
attn.normalizer @linear {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator epsilon 1.0e-6 {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
}
attn.kernel @k normalizer(@linear) score(@biased) mask(@causal)

// CHECK: functions = [#attn.functions<type = f32, numerator = @k.num, denominator = @k.den, score = @k.score, feature = @k.feature, mask = @k.mask, numerator_ds = @k.num.d.s, denominator_ds = @k.den.d.s, score_ds = @k.score.d.s, feature_dx = @k.feature.d.x, score_dp = [@k.score.d.slope]>]
// CHECK-LABEL: func.func private @k.num.d.s(
// CHECK: %[[ONE:.*]] = arith.constant 1.0
// CHECK-NEXT: return %[[ONE]]
// CHECK-LABEL: func.func private @k.score(
// CHECK-SAME: %[[R:.*]]: f32, %[[BI:.*]]: index, %[[HI:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index, %[[SLOPE:.*]]: f32) -> f32
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
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
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
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
attn.kernel @k normalizer(@sigsoftmax)

// CHECK-LABEL: func.func private @k.num(
// CHECK-SAME: %[[S:.*]]: f32, %[[M:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index) -> f32
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

// -----

// The indices are arguments of every function (after s and the shift m for the
// normalizer's): an exp of s + c·(j - i) is one exp factor, stabilised by the
// running max of its argument, and its derivative by s treats j - i as a
// constant of the pair.
attn.normalizer @tilted {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %d = arith.subi %j, %i : index
    %d64 = arith.index_cast %d : index to i64
    %df = arith.sitofp %d64 : i64 to f32
    %x = arith.addf %s, %df : f32
    %e = math.exp %x : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
attn.mask @by_head {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %h, %j : index
  attn.yield %keep : i1
}
attn.kernel @k normalizer(@tilted) mask(@by_head)

// CHECK-LABEL: func.func private @k.num(
// CHECK-SAME: %[[S:.*]]: f32, %[[M:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %[[I:.*]]: index, %[[J:.*]]: index) -> f32
// CHECK: %[[D:.*]] = arith.subi %[[J]], %[[I]]
// CHECK: %[[DF:.*]] = arith.sitofp
// CHECK: %[[X:.*]] = arith.addf %[[S]], %[[DF]]
// CHECK: %[[SH:.*]] = arith.subf %[[X]], %[[M]]
// CHECK: %[[G:.*]] = math.exp %[[SH]]
// CHECK: return %[[G]]
// CHECK-LABEL: func.func private @k.num.d.s(
// CHECK-SAME: %[[S:.*]]: f32, %[[M:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %[[I:.*]]: index, %[[J:.*]]: index) -> f32
// CHECK: arith.subi %[[J]], %[[I]]
// CHECK: %[[G:.*]] = math.exp
// CHECK: return %[[G]]
// CHECK-LABEL: func.func private @k.stab(
// CHECK-SAME: %[[S:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %[[I:.*]]: index, %[[J:.*]]: index) -> f32
// CHECK: arith.subi %[[J]], %[[I]]
// CHECK: %[[X:.*]] = arith.addf %[[S]], %{{.*}}
// CHECK: arith.maximumf %[[X]], %[[S]]
// CHECK-LABEL: func.func private @k.mask(
// CHECK-SAME: %{{.*}}: index, %[[H:.*]]: index, %{{.*}}: index, %[[J:.*]]: index) -> i1
// CHECK: arith.cmpi ule, %[[H]], %[[J]]

// -----

// Tensor inputs: every function takes them after the params (memrefs of their
// rank, float ones in the kernel's type); attn.read becomes attn.table_load. Each
// read of a learnable input gets #attn.table_grad: the derivative of its function by
// the value read (e^(s + w[h]) by w[h]: itself) and the position it reads.
attn.input @w learnable : tensor<?xf32>
attn.input @c learnable : tensor<?x?xf32>
attn.input @doc : tensor<?x?xi32>
attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %w = attn.read @w[%h] : f32
    %x = arith.addf %s, %w : f32
    %e = math.exp %x : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
attn.score @sc contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %c = attn.read @c[%h, %i] : f32
  %t = arith.mulf %s, %c : f32
  attn.yield %t : f32
}
attn.mask @same {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %di = attn.read @doc[%b, %i] : i32
  %dj = attn.read @doc[%b, %j] : i32
  %keep = arith.cmpi eq, %di, %dj : i32
  attn.yield %keep : i1
}
attn.kernel @k normalizer(@n) score(@sc) mask(@same)

// CHECK: table_grads = [#attn.table_grad<role = numerator, input = 0, derivative = @k.num.d.w.0, position = @k.num.at.w.0>, #attn.table_grad<role = score, input = 1, derivative = @k.score.d.c.0, position = @k.score.at.c.0>]
// CHECK-LABEL: func.func private @k.num(
// CHECK-SAME: %[[S:.*]]: f32, %[[M:.*]]: f32, %{{.*}}: index, %[[H:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[W:[a-z0-9]*]]: memref<?xf32, strided<[?], offset: ?>>, %{{.*}}: memref<?x?xf32, strided<[?, ?], offset: ?>>, %{{.*}}: memref<?x?xi32, strided<[?, ?], offset: ?>>) -> f32
// CHECK: %[[R:.*]] = attn.table_load %[[W]][%[[H]]] : memref<?xf32, strided<[?], offset: ?>>, index -> f32
// CHECK: arith.addf %[[S]], %[[R]]
// CHECK-LABEL: func.func private @k.num.at.w.0(
// CHECK-SAME: %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: index, %[[H:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[W:[a-z0-9]*]]: memref
// CHECK: %[[P:.*]] = attn.table_position %[[W]][%[[H]]] : memref<?xf32, strided<[?], offset: ?>>, index -> index
// CHECK: return %[[P]] : index
// CHECK-LABEL: func.func private @k.num.d.w.0(
// CHECK: %[[E:.*]] = math.exp
// CHECK-NEXT: return %[[E]] : f32
// CHECK-LABEL: func.func private @k.score.at.c.0(
// CHECK: attn.table_position
// CHECK-LABEL: func.func private @k.score.d.c.0(
// CHECK-SAME: %[[R:.*]]: f32, %{{.*}}: index
// CHECK: return %[[R]] : f32
// CHECK-LABEL: func.func private @k.mask(
// CHECK: attn.table_load %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x?xi32, strided<[?, ?], offset: ?>>, index, index -> i32
// CHECK: arith.cmpi eq

// -----

// A row offset: offset(m, b, h, i, θ..., tables...) is β at the shift m (e^(sink - m)),
// offset.stab its exponent (what the running max starts from), offset.d.<param> its
// derivatives, and a learnable read of the offset a table_grad of role offset.
attn.input @sinks learnable : tensor<?xf32>
attn.normalizer @n params(t = 1.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  offset {
  ^bb0(%b: index, %h: index, %i: index, %t: f32):
    %sink = attn.read @sinks[%h] : f32
    %x = arith.mulf %sink, %t : f32
    %e = math.exp %x : f32
    attn.yield %e : f32
  }
}
attn.kernel @k normalizer(@n)

// CHECK: offset = @k.offset, offset_stab = @k.offset.stab
// CHECK-SAME: offset_dp = [@k.offset.d.t]
// CHECK-SAME: table_grads = [#attn.table_grad<role = offset, input = 0, derivative = @k.offset.d.sinks.0, position = @k.offset.at.sinks.0>]
// CHECK-LABEL: func.func private @k.offset(
// CHECK-SAME: %[[M:.*]]: f32, %{{.*}}: index, %[[H:.*]]: index, %{{.*}}: index, %[[T:.*]]: f32, %[[SINKS:[a-z0-9]*]]: memref<?xf32, strided<[?], offset: ?>>) -> f32
// CHECK: %[[SINK:.*]] = attn.table_load %[[SINKS]][%[[H]]]
// CHECK: %[[X:.*]] = arith.mulf %[[SINK]], %[[T]]
// CHECK: %[[SH:.*]] = arith.subf %[[X]], %[[M]]
// CHECK: %[[E:.*]] = math.exp %[[SH]]
// CHECK: return %[[E]]
// CHECK-LABEL: func.func private @k.offset.d.t(
// CHECK: math.exp
// CHECK: arith.mulf
// CHECK-LABEL: func.func private @k.offset.stab(
// CHECK-SAME: %{{.*}}: index, %[[H:.*]]: index, %{{.*}}: index, %[[T:.*]]: f32, %[[SINKS:[a-z0-9]*]]: memref
// CHECK: %[[SINK:.*]] = attn.table_load %[[SINKS]][%[[H]]]
// CHECK: %[[X:.*]] = arith.mulf %[[SINK]], %[[T]]
// CHECK: return %[[X]]

// -----

// A positive constant offset of an online normalizer is e^(log c): offset = c·e^-m,
// offset.stab = log c.
attn.normalizer @n {
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
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %two = arith.constant 2.0 : f32
    attn.yield %two : f32
  }
}
attn.kernel @k normalizer(@n)

// CHECK-LABEL: func.func private @k.offset(
// CHECK-SAME: %[[M:.*]]: f32
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-DAG: %[[NM:.*]] = arith.negf %[[M]]
// CHECK: %[[E:.*]] = math.exp %[[NM]]
// CHECK: %[[B:.*]] = arith.mulf %[[E]], %[[TWO]]
// CHECK: return %[[B]]
// CHECK-LABEL: func.func private @k.offset.stab(
// CHECK: %[[LOG:.*]] = arith.constant 0.693147182 : f32
// CHECK: return %[[LOG]]

// -----

// e^s·e^-|s|: only e^s carries the row's exp factor (the bounded e^-|s| reads as
// degree 0 in a product): the stabiliser is s, and e^-|s| is computed as written.
attn.normalizer @damped {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    %abs = math.absf %s : f32
    %neg = arith.negf %abs : f32
    %d = math.exp %neg : f32
    %g = arith.mulf %e, %d : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
attn.kernel @k normalizer(@damped)

// CHECK-LABEL: func.func private @k.num(
// CHECK-SAME: %[[S:.*]]: f32, %[[M:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index) -> f32
// CHECK-DAG: %[[X:.*]] = arith.subf %[[S]], %[[M]]
// CHECK-DAG: %[[E:.*]] = math.exp %[[X]]
// CHECK-DAG: %[[A:.*]] = math.absf %[[S]]
// CHECK-DAG: %[[N:.*]] = arith.negf %[[A]]
// CHECK-DAG: %[[D:.*]] = math.exp %[[N]]
// CHECK: %[[G:.*]] = arith.mulf %[[E]], %[[D]]
// CHECK: return %[[G]]
// CHECK-LABEL: func.func private @k.stab(
// CHECK-SAME: %[[S:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index) -> f32
// CHECK-NEXT: return %[[S]]
