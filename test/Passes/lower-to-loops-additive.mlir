// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-derive-backward --attn-select-schedule="element-types=f32 vector-bits=256" --attn-instantiate-functions --attn-lower-to-loops | FileCheck %s

// The additive contraction v·tanh(W_q q + W_k k) gets a tiled schedule at its
// hidden width only (its projected rows are that wide): the score tile is
// Σ_c v_c·tanh(q_rc + k_jc) on 8-lane vectors of the packed key panels; the
// backward keeps the tile's tanh values (32 hidden × 4 rows·16 keys) for dQ, dK
// and dv, whose sums it gathers per (row, c), per key panel and per c.
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
attn.score @concat contract additive hidden 32 weights(W_q: 32x16 = identity, W_k: 32x16 = 0.5, v: 32 = 0.25)
attn.kernel @k normalizer(@softmax) score(@concat)

// CHECK: attn.kernel @k normalizer(@softmax) score(@concat) {{.*}}cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>, #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 2, forward_keys = 32, backward_keys = 16, backward_rows = 4>]
// CHECK-LABEL: func.func private @attn_forward_f32.inner.d32(
// CHECK: scf.for
// CHECK: %[[TANH:.*]] = math.tanh %{{.*}} : vector<8xf32>
// CHECK: vector.fma %{{.*}}, %[[TANH]], %{{.*}} : vector<8xf32>
// CHECK-LABEL: func.func private @attn_forward_f32.inner(
// CHECK: call @attn_forward_f32.inner.d32(
// CHECK: call @attn_forward_f32.inner.generic(
// CHECK-LABEL: func.func private @attn_backward_f32.inner.d32(
// CHECK-DAG: %[[TANHS:.*]] = memref.alloca() : memref<32x64xf32>
// CHECK-DAG: memref.alloca() : memref<128x8xf32>
// CHECK-DAG: memref.alloca() : memref<32x8xf32>
// CHECK: vector.store %{{.*}}, %[[TANHS]]
// CHECK: vector.load %[[TANHS]]
// CHECK-LABEL: func.func private @attn_backward_f32.inner(
// CHECK: call @attn_backward_f32.inner.d32(

// -----

// A hidden width without a tiled schedule: the generic loops only.
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
attn.score @concat contract additive hidden 16 weights(W_q: 16x16 = identity, W_k: 16x16 = 0.5, v: 16 = 0.25)
attn.kernel @k normalizer(@softmax) score(@concat)

// CHECK: attn.kernel @k normalizer(@softmax) score(@concat) {{.*}}cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]
// CHECK-NOT: .inner.d
// CHECK-LABEL: func.func private @attn_forward_f32.inner.generic(
// CHECK-NOT: .inner.d
