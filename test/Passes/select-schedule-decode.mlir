// RUN: attn-opt %s --attn-classify-normalizer --attn-derive-backward --attn-select-schedule="element-types=f32 vector-bits=256" | FileCheck %s --check-prefix=SELECT
// RUN: attn-opt %s --attn-classify-normalizer --attn-derive-backward --attn-select-schedule="element-types=f32 vector-bits=256" --attn-instantiate-functions --attn-lower-to-loops | FileCheck %s

// Beside each f32 tiled schedule of a dot-product score, attn-select-schedule adds a
// decode schedule for forward calls of at most 16 query rows, with the tiled
// forward's keys per tile (4 vectors). Its forward is a function of its own,
// `.d<D>.decode`, which packs no key panels (no memref.alloc): a panel of 16 rows
// (the most a call of it has), tiles of one row whose scores are the dot products
// of K's rows with the row, lanes added by one shuffle tree per 8 keys, each key's
// row prefetched 32 keys ahead (one prefetch per 64-byte line, clamped to the last
// key: a 32-float row takes two). The entry
// point calls it for calls of at most 16 rows at that head dim and the tiled
// forward for more; the backward has no decode variant.
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

// SELECT: cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>,
// SELECT-SAME: #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 2, forward_keys = 32, backward_keys = 16, backward_rows = 4>, #attn.cpu_schedule<type = f32, variant = decode, head_dim = 32, lanes = 8, rows = 16, forward_keys = 32>,
// SELECT-SAME: #attn.cpu_schedule<type = f32, variant = decode, head_dim = 64, lanes = 8, rows = 16, forward_keys = 32>,
// SELECT-SAME: #attn.cpu_schedule<type = f32, variant = decode, head_dim = 128, lanes = 8, rows = 16, forward_keys = 32>]

// CHECK-LABEL: func.func private @attn_forward_f32.d32(
// CHECK: memref.alloc(
// CHECK-LABEL: func.func private @attn_forward_f32.d32.decode(
// CHECK-NOT: memref.alloc(
// CHECK-DAG: memref.alloca() : memref<16x32xf32>
// CHECK-DAG: memref.alloca() : memref<1x1024xf32>
// CHECK-DAG: memref.alloca() : memref<16x4xf32>
// CHECK: memref.prefetch %arg1[%[[AHEAD:.*]], %{{.*}}], read, locality<3>, data
// CHECK-NEXT: %[[C16:.*]] = arith.constant 16 : index
// CHECK-NEXT: memref.prefetch %arg1[%[[AHEAD]], %[[C16]]], read, locality<3>, data
// CHECK-NOT: memref.prefetch
// CHECK: vector.load %arg1[{{.*}}] : memref<?x?xf32, strided<[?, 1], offset: ?>>, vector<8xf32>
// CHECK: vector.fma
// CHECK: vector.shuffle
// CHECK-LABEL: func.func private @attn_forward_f32.d64(
// CHECK-LABEL: func.func @attn_forward_f32(
// CHECK: %[[ROWS:.*]] = arith.subi %arg12, %arg11 : i64
// CHECK: %[[FEW:.*]] = arith.cmpi sle, %[[ROWS]], %c16_i64 : i64
// CHECK: scf.if %[[FEW]] {
// CHECK-NEXT: func.call @attn_forward_f32.d32.decode(
// CHECK-NEXT: } else {
// CHECK-NEXT: func.call @attn_forward_f32.d32(
// CHECK: func.call @attn_forward_f32.d64.decode(
// CHECK: func.call @attn_forward_f32.d64(
// CHECK: func.call @attn_forward_f32.d128.decode(
// CHECK: func.call @attn_forward_f32.d128(
// CHECK: func.call @attn_forward_f32.generic(
// CHECK-LABEL: func.func @attn_backward_f32(
// CHECK-NOT: decode
// CHECK: return
