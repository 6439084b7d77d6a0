// RUN: attn-opt %s --attn-lower-to-gpu | FileCheck %s
// RUN: attn-opt %s --attn-lower-to-gpu | FileCheck %s --check-prefix=INLINED

// The GPU lowering alone, on a kernel annotated by hand: classified plain, its
// f32 scalar functions written out and one SIMT schedule pinned (f32, d = 32).
attn.normalizer @identity {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k normalizer(@identity) {algorithm = #attn<algorithm plain>,
  functions = [#attn.functions<type = f32, numerator = @g, numerator_ds = @dg>],
  gpu_schedule = [#attn.gpu_schedule<type = f32, head_dim = 32, variant = simt>]}
func.func private @g(%s: f32, %m: f32) -> f32 {
  %half = arith.constant 0.5 : f32
  %g = arith.mulf %s, %half : f32
  return %g : f32
}
func.func private @dg(%s: f32, %m: f32) -> f32 {
  %half = arith.constant 0.5 : f32
  return %half : f32
}

// CHECK-LABEL: gpu.module @attn_cuda {
// CHECK: gpu.func @attn_forward_f32_d32(
// CHECK-SAME: workgroup(%{{.*}} : memref<32x32xf32, #gpu.address_space<workgroup>>, %[[VT:.*]] : memref<32x32xf32, #gpu.address_space<workgroup>>)
// CHECK-SAME: attn.role = "forward", attn.tile = 8 : i64, known_block_size = array<i32: 256, 1, 1>
// CHECK: gpu.shuffle  xor
// g inlined: w = s·0.5, O += w·v.
// CHECK: %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT: %[[W:.*]] = arith.mulf %{{.*}}, %[[HALF]] : f32
// CHECK: %[[V:.*]] = memref.load %[[VT]]
// CHECK-NEXT: arith.mulf %[[W]], %[[V]] : f32
// CHECK: gpu.func @attn_backward_prep_f32_d32(
// CHECK-SAME: attn.role = "backward_prep"
// CHECK: gpu.func @attn_backward_dkdv_f32_d32(
// CHECK-SAME: attn.role = "backward_dkdv"
// CHECK: gpu.func @attn_backward_dq_f32_d32(
// CHECK-SAME: attn.role = "backward_dq"
// The scalar functions are inlined: a gpu.module cannot call the host module.
// INLINED-NOT: func.call
