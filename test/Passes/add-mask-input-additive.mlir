// kind=additive: a score bias [B, H, Nq, Nk] in the kernel's float type, added after
// the score's mod (a new mod, and a new score where the kernel has none), its -inf
// entries masked. The result goes through classification and differentiation.
// RUN: attn-opt %s --split-input-file --attn-add-mask-input="kind=additive kernel=a" | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-add-mask-input="kind=learnable-additive kernel=a" | FileCheck %s --check-prefix=LEARNABLE
// RUN: attn-opt %s --split-input-file --attn-add-mask-input="kind=learnable-additive kernel=a" --attn-classify-normalizer --attn-derive-backward | FileCheck %s --check-prefix=DERIVED

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
attn.kernel @a normalizer(@softmax)

// Without a score: the default q·k/sqrt(d) as scaled_dot, with the mod s + table; and
// a mask that drops the -inf entries.
// CHECK-LABEL: attn.normalizer @softmax
// CHECK: attn.input @attn_mask : tensor<?x?x?x?xf32>
// CHECK-NEXT: attn.score @a_score contract scaled_dot mod {
// CHECK-NEXT: ^bb0(%[[S:.*]]: f32, %[[B:.*]]: index, %[[H:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT: %[[E:.*]] = attn.read @attn_mask[%[[B]], %[[H]], %[[I]], %[[J]]] : f32
// CHECK-NEXT: %[[T:.*]] = arith.addf %[[S]], %[[E]] : f32
// CHECK-NEXT: attn.yield %[[T]] : f32
// CHECK: attn.mask @a_mask {
// CHECK-NEXT: ^bb0(%[[B:.*]]: index, %[[H:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT: %[[E:.*]] = attn.read @attn_mask[%[[B]], %[[H]], %[[I]], %[[J]]] : f32
// CHECK-NEXT: %[[INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-NEXT: %[[K:.*]] = arith.cmpf une, %[[E]], %[[INF]] : f32
// CHECK-NEXT: attn.yield %[[K]] : i1
// CHECK: attn.kernel @a normalizer(@softmax) score(@a_score) mask(@a_mask)
// LEARNABLE-LABEL: attn.normalizer @softmax
// LEARNABLE: attn.input @attn_mask learnable : tensor<?x?x?x?xf32>
// The learnable input's gradient comes from the derivative of the mod by the value read.
// DERIVED: attn.kernel @a normalizer(@softmax) score(@a_score) mask(@a_mask) {algorithm = #attn<algorithm online>{{.*}}table_grads = [#attn.table_grad<role = score, input = 0, derivative = @a.score.d.attn_mask.0

// -----

attn.score @alibi contract scaled_dot params(slope = 0.25) mod {
^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index, %slope: f64):
  %delta = arith.subi %i, %j : index
  %delta64 = arith.index_cast %delta : index to i64
  %distance = arith.sitofp %delta64 : i64 to f64
  %penalty = arith.mulf %slope, %distance : f64
  %biased = arith.subf %s, %penalty : f64
  attn.yield %biased : f64
}
attn.mask @causal {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f64
    attn.yield %e : f64
  }
  denominator {
  ^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f64
    attn.yield %e : f64
  }
}
attn.kernel @a normalizer(@softmax) score(@alibi) mask(@causal)

// An existing mod (with params) is composed with: the table is added to its result, in
// the kernel's float type (f64). The causal mask also drops the -inf entries.
// CHECK-LABEL: attn.score @alibi contract scaled_dot params(slope = 0.25) mod {
// CHECK-NEXT: ^bb0(%[[S:.*]]: f64, %[[B:.*]]: index, %[[H:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index, %{{.*}}: f64):
// CHECK: %[[MOD:.*]] = arith.subf %[[S]], %{{.*}} : f64
// CHECK-NEXT: %[[E:.*]] = attn.read @attn_mask[%[[B]], %[[H]], %[[I]], %[[J]]] : f64
// CHECK-NEXT: %[[T:.*]] = arith.addf %[[MOD]], %[[E]] : f64
// CHECK-NEXT: attn.yield %[[T]] : f64
// CHECK-LABEL: attn.mask @causal {
// CHECK: %[[C:.*]] = arith.cmpi ule
// CHECK-NEXT: %[[E:.*]] = attn.read @attn_mask[{{.*}}] : f64
// CHECK-NEXT: %[[INF:.*]] = arith.constant 0xFFF0000000000000 : f64
// CHECK-NEXT: %[[K:.*]] = arith.cmpf une, %[[E]], %[[INF]] : f64
// CHECK-NEXT: %[[BOTH:.*]] = arith.andi %[[C]], %[[K]] : i1
// CHECK-NEXT: attn.yield %[[BOTH]] : i1
// CHECK: attn.input @attn_mask : tensor<?x?x?x?xf64>
// CHECK-NEXT: attn.kernel @a normalizer(@softmax) score(@alibi) mask(@causal)
// DERIVED: attn.kernel @a normalizer(@softmax) score(@alibi) mask(@causal) {algorithm = #attn<algorithm online>

// -----

attn.score @half contract scaled_dot scale 0.5
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @a normalizer(@relu) score(@half)
attn.kernel @b normalizer(@relu) score(@half)

// A score without a mod gets one; shared with another kernel, it is copied first.
// CHECK-LABEL: attn.score @half contract scaled_dot scale 0.5{{$}}
// CHECK: attn.input @attn_mask : tensor<?x?x?x?xf32>
// CHECK-NEXT: attn.score @a_half contract scaled_dot scale 0.5 mod {
// CHECK-NEXT: ^bb0(%[[S:.*]]: f32, %[[B:.*]]: index, %[[H:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT: %[[E:.*]] = attn.read @attn_mask[%[[B]], %[[H]], %[[I]], %[[J]]] : f32
// CHECK-NEXT: %[[T:.*]] = arith.addf %[[S]], %[[E]] : f32
// CHECK-NEXT: attn.yield %[[T]] : f32
// CHECK: attn.mask @a_mask {
// CHECK: attn.kernel @a normalizer(@relu) score(@a_half) mask(@a_mask)
// CHECK-NEXT: attn.kernel @b normalizer(@relu) score(@half){{$}}
// DERIVED: attn.kernel @a normalizer(@relu) score(@a_half) mask(@a_mask) {algorithm = #attn<algorithm plain>
