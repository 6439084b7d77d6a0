// RUN: attn-opt %s --attn-classify-normalizer --attn-derive-backward --attn-analyze-block-sparsity "--attn-select-schedule=element-types=f32 vector-bits=256" --attn-instantiate-functions --attn-lower-to-loops | FileCheck %s

// A causal attn.mask on the tiled schedule: per (row block, key tile) the interval
// code asks, at the tile's positions (rows + query_start, keys + key_start), whether
// the mask may keep a pair (jLo <= iHi) and whether it may drop one (jHi > iLo); a tile it keeps nothing of yields its carried values untouched
// (the forward's zeroes its weights), one it keeps whole runs without calling the
// mask, the others call it per lane.
attn.mask @causal {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}
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
attn.kernel @k normalizer(@softmax) mask(@causal)

// CHECK: attn.kernel @k {{.*}}block_sparsity = #attn<block_sparsity indices>
// The generic loops classify each row's blocks of 64 keys the same way.
// CHECK-LABEL: func.func private @attn_forward_f32.generic(
// CHECK: %[[GKS:.*]] = arith.index_cast %arg18 : i64 to index
// CHECK: scf.for %[[GJ0:.*]] = %{{.*}} to %{{.*}} step %c64{{.*}} iter_args(%[[GACC:[^ ]*]] =
// CHECK: %[[GJP:.*]] = arith.addi %[[GJ0]], %[[GKS]] : index
// CHECK: arith.cmpi sle, %[[GJP]], %{{.*}} : index
// CHECK: scf.if %{{.*}} -> (f32, f32, f32, index)
// CHECK-NEXT: scf.if %{{.*}} -> (f32, f32, f32, index)
// CHECK-NOT: @k.mask(
// CHECK: } else {
// CHECK: func.call @k.mask(
// CHECK: } else {
// CHECK: scf.yield %[[GACC]],
// CHECK-LABEL: func.func private @attn_forward_f32.d32(
// CHECK: %[[KS:.*]] = arith.index_cast %arg18 : i64 to index
// CHECK: scf.for %[[J0:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:[^ ]*]] =
// CHECK: %[[JP:.*]] = arith.addi %[[J0]], %[[KS]] : index
// CHECK: %[[MAY_KEEP:.*]] = arith.cmpi sle, %[[JP]], %[[ROW_HI:.*]] : index
// CHECK: %[[MAY_DROP:.*]] = arith.cmpi sgt, %{{.*}}, %{{.*}} : index
// CHECK: scf.if %[[ANY:.*]] -> (f32, f32
// CHECK-NEXT: scf.if %[[ALL:.*]] -> (f32, f32
// CHECK-NOT: @k.mask.x8
// CHECK: } else {
// CHECK: func.call @k.mask.x8(
// CHECK: } else {
// CHECK: vector.store %[[ZEROS:.*]], %[[WEIGHTS:.*]][%{{.*}}] : memref<2x1024xf32>, vector<8xf32>
// CHECK-NOT: scf.if
// CHECK: scf.yield %[[ACC]],
// CHECK-LABEL: func.func private @attn_backward_f32.generic(
// CHECK: %[[GBKS:.*]] = arith.index_cast %arg22 : i64 to index
// CHECK: scf.for %[[GBJ0:.*]] = %{{.*}} to %{{.*}} step %c64
// CHECK: %[[GBJP:.*]] = arith.addi %[[GBJ0]], %[[GBKS]] : index
// CHECK: arith.cmpi sle, %[[GBJP]], %{{.*}} : index
// CHECK: scf.if %{{.*}} {
// CHECK-NEXT: scf.if %{{.*}} {
// CHECK-NOT: @k.mask(
// CHECK: } else {
// CHECK: func.call @k.mask(
// The tiled backward packs a key block only if a row of the call may keep one of
// its keys, skips a row block's setup on a key block it keeps nothing of, then
// classifies each key tile. A row block is 4 register tiles of 4 rows (8 lanes).
// CHECK-LABEL: func.func private @attn_backward_f32.d32(
// CHECK: %[[BQS:.*]] = arith.index_cast %arg21 : i64 to index
// CHECK: %[[BKS:.*]] = arith.index_cast %arg22 : i64 to index
// CHECK: scf.for %[[KB:.*]] = %{{.*}} to %{{.*}} step %c1024{{(_[0-9]+)?}} {
// CHECK: %[[KBP:.*]] = arith.addi %[[KB]], %[[BKS]] : index
// CHECK: arith.cmpi sle, %[[KBP]], %{{.*}} : index
// CHECK: scf.if %{{.*}} {
// CHECK: scf.for %{{.*}} = %c0{{(_[0-9]+)?}} to %{{.*}} step %c8 {
// CHECK: scf.for %[[I0:.*]] = %{{.*}} to %{{.*}} step %c16{{(_[0-9]+)?}} {
// CHECK: %[[I0P:.*]] = arith.addi %[[I0]], %[[BQS]] : index
// CHECK: %[[KBP2:.*]] = arith.addi %[[KB]], %[[BKS]] : index
// CHECK: arith.cmpi sle, %[[KBP2]], %{{.*}} : index
// CHECK-NEXT: arith.cmpi sgt, %{{.*}}, %[[I0P]] : index
// CHECK: scf.if %{{.*}} {
// CHECK: scf.for %[[J0:.*]] = %[[KB]] to %{{.*}} step %c16
// CHECK: %[[I0P2:.*]] = arith.addi %[[I0]], %[[BQS]] : index
// CHECK: %[[J0P:.*]] = arith.addi %[[J0]], %[[BKS]] : index
// CHECK: arith.cmpi sle, %[[J0P]], %{{.*}} : index
// CHECK-NEXT: arith.cmpi sgt, %{{.*}}, %[[I0P2]] : index
// CHECK: scf.if %{{.*}} {
// CHECK-NEXT: scf.if %{{.*}} {
// CHECK-NOT: @k.mask.x8
// CHECK: } else {
// CHECK: func.call @k.mask.x8(
