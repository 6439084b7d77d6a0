// RUN: attn-opt %s --attn-lower-to-loops | FileCheck %s

// The lowering alone, on a kernel annotated by hand: classified plain, its
// scalar functions written out (scalar and on 8 lanes) and one tiled f32
// schedule pinned: 2 rows against 16 keys forward, 8 backward, for d = 32. The
// forward keeps a panel of 32 such row tiles (64 rows: queries, O, O's errors, each
// row's running state) and runs each tile on a view of it; a tile's weights span
// its key block (1024 keys of d = 32 in 256 KiB of key and value panels).
attn.normalizer @identity {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k normalizer(@identity) {algorithm = #attn<algorithm plain>,
  functions = [#attn.functions<type = f32, numerator = @g, numerator_ds = @dg>,
               #attn.functions<type = f32, lanes = 8, numerator = @g8, numerator_ds = @dg8>],
  cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>,
    #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 2, forward_keys = 16, backward_keys = 8, backward_rows = 2>]}
func.func private @g(%s: f32, %m: f32, %b: index, %h: index, %i: index, %j: index) -> f32 {
  return %s : f32
}
func.func private @dg(%s: f32, %m: f32, %b: index, %h: index, %i: index, %j: index) -> f32 {
  %one = arith.constant 1.0 : f32
  return %one : f32
}
func.func private @g8(%s: vector<8xf32>, %m: vector<8xf32>, %b: vector<8xindex>,
                      %h: vector<8xindex>, %i: vector<8xindex>, %j: vector<8xindex>) -> vector<8xf32> {
  return %s : vector<8xf32>
}
func.func private @dg8(%s: vector<8xf32>, %m: vector<8xf32>, %b: vector<8xindex>,
                       %h: vector<8xindex>, %i: vector<8xindex>, %j: vector<8xindex>) -> vector<8xf32> {
  %one = arith.constant dense<1.0> : vector<8xf32>
  return %one : vector<8xf32>
}

// CHECK-LABEL: func.func private @attn_forward_f32.generic(
// CHECK: func.call @g(
// CHECK-LABEL: func.func private @attn_forward_f32.d32(
// CHECK-DAG: memref.alloca() : memref<64x32xf32>
// CHECK-DAG: memref.alloca() : memref<2x1024xf32>
// CHECK-DAG: memref.alloca() : memref<64x4xf32>
// CHECK: memref.subview %{{.*}}[%{{.*}}, 0] [2, 32] [1, 1] : memref<64x32xf32> to memref<2x32xf32, strided<[32, 1], offset: ?>>
// CHECK: func.call @g8({{.*}}) : (vector<8xf32>, vector<8xf32>, vector<8xindex>, vector<8xindex>, vector<8xindex>, vector<8xindex>) -> vector<8xf32>
// CHECK-LABEL: func.func @attn_forward_f32(
// CHECK: func.call @attn_forward_f32.d32(
// CHECK-NOT: .d64
// CHECK: func.call @attn_forward_f32.generic(
// The backward's weights for a row block of 4 register tiles of backward_rows = 2
// rows, against backward_keys = 8 keys.
// CHECK-LABEL: func.func private @attn_backward_f32.d32(
// CHECK: memref.alloca() : memref<8x8xf32>
// CHECK: func.call @dg8(
// CHECK-LABEL: func.func @attn_backward_f32(
