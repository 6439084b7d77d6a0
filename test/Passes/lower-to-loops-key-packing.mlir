// RUN: attn-opt %s --attn-expand-shared-regions --attn-classify-normalizer --attn-derive-backward --attn-select-schedule="element-types=f32 vector-bits=256" --attn-instantiate-functions --attn-lower-to-loops | FileCheck %s

// The tiled kernels pack kᵀ (and the backward vᵀ) into panels of one score tile's
// keys (32 in the forward, 16 in the backward, with 8 lanes) by squares of 8 keys
// by 8 columns: the squares' rows are loaded as vectors and transposed in
// registers by three rounds of shuffles, each swapping the off-diagonal 4 × 4,
// then 2 × 2, then 1 × 1 blocks, and the 8 columns are stored as panel rows;
// no element is stored alone. The forward packs every key first where the call
// has more than one query panel (128 rows), and otherwise each key block (512
// keys) as the panel reaches it, into one block's panels.
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @k normalizer(@softmax) {head_dims = array<i64: 64>}

// CHECK-LABEL: func.func private @attn_forward_f32.d64(
// CHECK: %[[PANELS:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x32xf32>
// CHECK: scf.if %{{.*}} {
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c8 {
// CHECK: %[[R0:.*]] = vector.load %arg1[%{{.*}}, %{{.*}}] : memref<?x?xf32, strided<[?, 1], offset: ?>>, vector<8xf32>
// CHECK: %[[LOW:.*]] = vector.shuffle %[[A:.*]], %[[B:.*]] [0, 1, 2, 3, 8, 9, 10, 11] : vector<8xf32>, vector<8xf32>
// CHECK-NEXT: %[[HIGH:.*]] = vector.shuffle %[[A]], %[[B]] [4, 5, 6, 7, 12, 13, 14, 15] : vector<8xf32>, vector<8xf32>
// CHECK-COUNT-3: vector.shuffle {{.*}} [4, 5, 6, 7, 12, 13, 14, 15]
// CHECK-COUNT-4: vector.shuffle {{.*}} [2, 3, 10, 11, 6, 7, 14, 15]
// CHECK-COUNT-4: vector.shuffle {{.*}} [1, 9, 3, 11, 5, 13, 7, 15]
// CHECK-COUNT-8: vector.store %{{.*}}, %[[PANELS]][%{{.*}}, %{{.*}}] : memref<?x32xf32>, vector<8xf32>
// The key blocks of the query panel, the block's squares first where it is the only one.
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c512{{.*}} {
// CHECK-NEXT: scf.if %{{.*}} {
// CHECK: vector.shuffle {{.*}} [1, 9, 3, 11, 5, 13, 7, 15]
// CHECK: vector.store %{{.*}}, %[[PANELS]][%{{.*}}, %{{.*}}] : memref<?x32xf32>, vector<8xf32>
// CHECK-NOT: memref.store %{{.*}}, %[[PANELS]][
// CHECK-LABEL: func.func private @attn_forward_f32.d128(

// CHECK-LABEL: func.func private @attn_backward_f32.d64(
// CHECK: %[[KEYS:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x16xf32>
// CHECK: %[[VALUES:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x16xf32>
// CHECK: vector.shuffle {{.*}} [1, 9, 3, 11, 5, 13, 7, 15]
// CHECK-COUNT-8: vector.store %{{.*}}, %[[KEYS]][%{{.*}}, %{{.*}}] : memref<?x16xf32>, vector<8xf32>
// CHECK: vector.shuffle {{.*}} [1, 9, 3, 11, 5, 13, 7, 15]
// CHECK-COUNT-8: vector.store %{{.*}}, %[[VALUES]][%{{.*}}, %{{.*}}] : memref<?x16xf32>, vector<8xf32>
// CHECK-NOT: memref.store %{{.*}}, %[[KEYS]][
// CHECK-NOT: memref.store %{{.*}}, %[[VALUES]][
// CHECK-LABEL: func.func private @attn_backward_f32.d128(
