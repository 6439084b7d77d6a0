// RUN: attn-opt %s --split-input-file --attn-instantiate-functions | FileCheck %s

// A tiled f32 schedule on 8 lanes and an f64 one: the f32 functions copied to
// vector<8 x _> and to f64 (constants converted), all recorded by role.
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, functions = [#attn.functions<type = f32, numerator = @g, numerator_ds = @dg>], cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>, #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 2, forward_keys = 16, backward_keys = 8, backward_rows = 2>, #attn.cpu_schedule<type = f64, variant = generic>]}
func.func private @g(%s: f32, %m: f32) -> f32 {
  %half = arith.constant 0.5 : f32
  %g = arith.mulf %s, %half : f32
  return %g : f32
}
func.func private @dg(%s: f32, %m: f32) -> f32 {
  %half = arith.constant 0.5 : f32
  return %half : f32
}

// CHECK: functions = [#attn.functions<type = f32, numerator = @g, numerator_ds = @dg>, #attn.functions<type = f32, lanes = 8, numerator = @g.x8, numerator_ds = @dg.x8>, #attn.functions<type = f64, numerator = @g.f64, numerator_ds = @dg.f64>]
// CHECK-LABEL: func.func private @g.f64(%{{.*}}: f64, %{{.*}}: f64) -> f64
// CHECK: arith.constant 5.000000e-01 : f64
// CHECK-LABEL: func.func private @g.x8(%{{.*}}: vector<8xf32>, %{{.*}}: vector<8xf32>) -> vector<8xf32>
// CHECK: arith.constant dense<5.000000e-01> : vector<8xf32>
