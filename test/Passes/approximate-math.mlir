// RUN: attn-opt %s --attn-approximate-math | FileCheck %s

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
