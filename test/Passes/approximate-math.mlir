// RUN: attn-opt %s --split-input-file --attn-approximate-math | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-approximate-math=avx512 | FileCheck %s --check-prefix=AVX512

// f32 exp and tanh, scalar and on lanes, become polynomials (fma chains, no
// math.exp / math.tanh left); f64 stays on libm.
func.func @f(%x: f32, %v: vector<8xf32>, %y: f64) -> (f32, vector<8xf32>, f64) {
  %a = math.exp %x : f32
  %b = math.tanh %v : vector<8xf32>
  %c = math.exp %y : f64
  return %a, %b, %c : f32, vector<8xf32>, f64
}
// CHECK-LABEL: func.func @f(
// CHECK-NOT: math.exp {{.*}} : f32
// CHECK-NOT: math.tanh
// CHECK: math.fma {{.*}} : f32
// CHECK-NOT: math.exp {{.*}} : f32
// CHECK-NOT: math.tanh
// CHECK: math.fma {{.*}} : vector<8xf32>
// CHECK-NOT: math.tanh
// CHECK: %[[C:.*]] = math.exp %arg2 : f64
// CHECK: return %{{.*}}, %{{.*}}, %[[C]] : f32, vector<8xf32>, f64

// -----

// With avx512, exp on 16 f32 lanes scales by vscalefps (x86vector); other
// shapes keep the upstream form.
func.func @lanes(%v: vector<16xf32>, %w: vector<8xf32>, %x: f32) -> (vector<16xf32>, vector<8xf32>, f32) {
  %a = math.exp %v : vector<16xf32>
  %b = math.exp %w : vector<8xf32>
  %c = math.exp %x : f32
  return %a, %b, %c : vector<16xf32>, vector<8xf32>, f32
}
// AVX512-LABEL: func.func @lanes(
// AVX512: math.floor {{.*}} : vector<16xf32>
// AVX512: x86vector.avx512.mask.scalef {{.*}} : vector<16xf32>
// AVX512-NOT: x86vector
// AVX512: arith.shli {{.*}} : vector<8xi32>
// AVX512-NOT: x86vector
// AVX512: arith.shli {{.*}} : i32
// AVX512-NOT: x86vector
// AVX512: return
// Without the option nothing is target-specific.
// CHECK-LABEL: func.func @lanes(
// CHECK-NOT: x86vector
