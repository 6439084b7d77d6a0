// RUN: attn-opt %s --attn-erase-declarations | FileCheck %s

// Every attn op goes; the functions (and the rest of the module) stay.
attn.score @scaled contract scaled_dot scale 0.5
attn.mask @causal {
^bb0(%i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k normalizer(@relu) score(@scaled) mask(@causal) {functions = [#attn.functions<type = f32, numerator = @g, numerator_ds = @g>]}
func.func private @g(%s: f32, %m: f32) -> f32 {
  return %s : f32
}

// CHECK-NOT: attn.
// CHECK: func.func private @g(
// CHECK-NOT: attn.
