// kind=bool: a keep table [B, H, Nq, Nk] of i8, and-ed into the kernel's mask. The
// result goes through classification and differentiation like a hand-written mask.
// RUN: attn-opt %s --split-input-file --attn-add-mask-input="kind=bool kernel=a" | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-add-mask-input="kind=bool kernel=a" --attn-classify-normalizer --attn-derive-backward | FileCheck %s --check-prefix=DERIVED

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

// Without a mask: a new one that keeps the pairs whose entry is nonzero.
// CHECK-LABEL: attn.normalizer @softmax
// CHECK: attn.input @attn_mask : tensor<?x?x?x?xi8>
// CHECK-NEXT: attn.mask @a_mask {
// CHECK-NEXT: ^bb0(%[[B:.*]]: index, %[[H:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT: %[[E:.*]] = attn.read @attn_mask[%[[B]], %[[H]], %[[I]], %[[J]]] : i8
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0 : i8
// CHECK-NEXT: %[[K:.*]] = arith.cmpi ne, %[[E]], %[[Z]] : i8
// CHECK-NEXT: attn.yield %[[K]] : i1
// CHECK-NEXT: }
// CHECK-NEXT: attn.kernel @a normalizer(@softmax) mask(@a_mask)
// DERIVED: attn.kernel @a normalizer(@softmax) mask(@a_mask) {algorithm = #attn<algorithm online>, functions = [#attn.functions<{{.*}}mask = @a.mask

// -----

attn.mask @causal {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @a normalizer(@relu) mask(@causal)

// A mask only this kernel uses is changed in place: its result and the table's.
// CHECK-LABEL: attn.mask @causal {
// CHECK-NEXT: ^bb0(%[[B:.*]]: index, %[[H:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT: %[[C:.*]] = arith.cmpi ule, %[[J]], %[[I]] : index
// CHECK-NEXT: %[[E:.*]] = attn.read @attn_mask[%[[B]], %[[H]], %[[I]], %[[J]]] : i8
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0 : i8
// CHECK-NEXT: %[[K:.*]] = arith.cmpi ne, %[[E]], %[[Z]] : i8
// CHECK-NEXT: %[[BOTH:.*]] = arith.andi %[[C]], %[[K]] : i1
// CHECK-NEXT: attn.yield %[[BOTH]] : i1
// CHECK: attn.input @attn_mask : tensor<?x?x?x?xi8>
// CHECK-NEXT: attn.kernel @a normalizer(@relu) mask(@causal)
// CHECK-NOT: attn.mask
// DERIVED: attn.kernel @a normalizer(@relu) mask(@causal) {algorithm = #attn<algorithm plain>

// -----

attn.mask @causal {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f64
    %g = arith.maximumf %s, %zero : f64
    attn.yield %g : f64
  }
  denominator count
}
attn.kernel @a normalizer(@relu) mask(@causal)
attn.kernel @b normalizer(@relu) mask(@causal)

// A mask another kernel shares is copied for this one; the other keeps the original.
// CHECK-LABEL: attn.mask @causal {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: arith.cmpi ule
// CHECK-NEXT: attn.yield
// CHECK: attn.input @attn_mask : tensor<?x?x?x?xi8>
// CHECK-NEXT: attn.mask @a_causal {
// CHECK: arith.cmpi ule
// CHECK: attn.read @attn_mask
// CHECK: arith.andi
// CHECK: attn.kernel @a normalizer(@relu) mask(@a_causal)
// CHECK-NEXT: attn.kernel @b normalizer(@relu) mask(@causal)
