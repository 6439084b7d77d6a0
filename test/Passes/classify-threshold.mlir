// RUN: attn-opt %s --split-input-file --attn-classify-normalizer | FileCheck %s
// `denominator threshold c` classifies as implicit, the kernel too (never kernelised:
// g = max(x, 0) is not linear in s), and gets the generic CPU schedule only.
// RUN: attn-opt %examples/normalizers/sparsemax.mlir --attn-classify-normalizer --attn-select-schedule | FileCheck %s --check-prefix=SCHEDULE

// CHECK-LABEL: attn.normalizer @sparsemax
// CHECK-SAME: algorithm = #attn<algorithm implicit>
// CHECK: denominator threshold 1.0
// CHECK: attn.kernel @sparsemax_attention
// CHECK-SAME: algorithm = #attn<algorithm implicit>
// SCHEDULE: cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>, #attn.cpu_schedule<type = f64, variant = generic>]}
attn.normalizer @sparsemax {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %x, %zero : f32
    attn.yield %g : f32
  }
  denominator threshold 1.0
}
attn.kernel @sparsemax_attention normalizer(@sparsemax)

// -----

// A g that does not fold (its param's initial value is known, but the table read
// is not) is taken as written.
// CHECK-LABEL: attn.normalizer @scaled_relu
// CHECK-SAME: algorithm = #attn<algorithm implicit>
attn.input @temperature : tensor<?xf32> dims(H)
attn.normalizer @scaled_relu {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %t = attn.read @temperature[%h] : f32
    %zero = arith.constant 0.0 : f32
    %y = arith.mulf %x, %t : f32
    %g = arith.maximumf %y, %zero : f32
    attn.yield %g : f32
  }
  denominator threshold 2.0
}
attn.kernel @scaled_relu_attention normalizer(@scaled_relu)
