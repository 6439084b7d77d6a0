// RUN: attn-opt %s --attn-classify-normalizer --attn-derive-backward | FileCheck %s --check-prefix=PHASE
// RUN: attn-opt %s --attn-classify-normalizer --attn-derive-backward --attn-select-schedule="element-types=f32" --attn-instantiate-functions --attn-lower-to-loops --attn-emit-manifest --attn-erase-declarations | FileCheck %s
// RUN: attn-opt %s --attn-classify-normalizer --attn-derive-backward --attn-select-schedule="element-types=f32" --attn-instantiate-functions --attn-lower-to-loops --attn-emit-manifest --attn-erase-declarations --inline --symbol-dce --canonicalize --cse | FileCheck %s --check-prefix=INLINED

// cosformer (relu features, s·cos(π/2·(i − j)/M), M = 1024) in the linear-time
// form: cos(A_i + B_j) splits into a feature map of width 2d.

// attn-derive-backward outlines the cos argument x(i, j) as the phase.
// PHASE-LABEL: func.func private @cosformer.phase(%{{.*}}: index, %{{.*}}: index) -> f32
// PHASE: arith.subi
// PHASE: math.cos
// PHASE: return %{{.*}} : f32

// No tiled quadratic specialisations: the dispatch calls the linear form only.
// CHECK-NOT: func.func private @attn_forward_f32.d
// CHECK-DAG: func.func private @attn_forward_f32.generic(
// CHECK-DAG: func.func private @attn_backward_f32.generic(
// CHECK-DAG: llvm.mlir.global internal constant @attn_manifest_text("{\0A  \22abi\22: 10,\0A  \22algorithm\22: \22kernelised\22,\0A  \22contract\22: {\0A    \22feature\22: true,\0A    \22kind\22: \22dot\22,\0A    \22scale\22: 1\0A  },{{.*}}\22kernel\22: \22cosformer\22,{{.*}}\22normalizer\22: \22lin\22,
// CHECK-NOT: func.func private @attn_backward_f32.d

// Forward buffers: the F×dv state S, z [F], two 64-row feature chunks; the
// phase as cos/sin of the query and key angles. Nothing N×N, nothing N×d.
// INLINED-LABEL: func.func @attn_forward_f32(
// INLINED: %[[D:.*]] = memref.dim %arg0, %c1
// INLINED: %[[F:.*]] = arith.muli %[[D]], %c2
// INLINED: memref.alloc(%[[F]], %{{.*}}) {alignment = 64 : i64} : memref<?x?xf32>
// INLINED: memref.alloc(%[[F]]) {alignment = 64 : i64} : memref<?xf32>
// INLINED: memref.alloc(%[[F]]) {alignment = 64 : i64} : memref<64x?xf32>
// INLINED: memref.alloc(%[[F]]) {alignment = 64 : i64} : memref<64x?xf32>
// INLINED-NOT: memref.alloc
// INLINED: math.cos
// INLINED: math.sin
// Backward adds two per-query coefficient vectors (a/C_i, −b·D_i/C_i) and (da, db).
// INLINED-LABEL: func.func @attn_backward_f32(
// INLINED: %[[BD:.*]] = memref.dim %arg0, %c1
// INLINED: %[[BF:.*]] = arith.muli %[[BD]], %c2
// INLINED: memref.alloc(%[[BF]], %{{.*}}) {alignment = 64 : i64} : memref<?x?xf32>
// INLINED: memref.alloc(%[[BF]]) {alignment = 64 : i64} : memref<?xf32>
// INLINED-COUNT-2: memref.alloc(%[[BF]]) {alignment = 64 : i64} : memref<64x?xf32>
// INLINED: memref.alloc(%[[BF]]) {alignment = 64 : i64} : memref<?xf32>
// INLINED: %[[NQ:.*]] = memref.dim %arg0, %c0
// INLINED: memref.alloc(%[[NQ]]) {alignment = 64 : i64} : memref<?xf32>
// INLINED: memref.alloc(%[[NQ]]) {alignment = 64 : i64} : memref<?xf32>
// INLINED: memref.alloc() {alignment = 64 : i64} : memref<2xf32>
// INLINED-NOT: memref.alloc
// INLINED-LABEL: llvm.mlir.global internal constant @attn_manifest_text

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
