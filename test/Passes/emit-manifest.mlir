// RUN: attn-opt %s --attn-emit-manifest | FileCheck %s

// The manifest alone: the kernel's classification and params, the types of its
// CPU schedules (in order), the entry points written out as stubs.
attn.normalizer @sig params(bias = -2.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f32):
    %x = arith.addf %s, %bias : f32
    attn.yield %x : f32
  }
  denominator constant 1.0
}
attn.kernel @k normalizer(@sig) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f64, variant = generic>, #attn.cpu_schedule<type = f32, variant = generic>]}
func.func @attn_forward_f64() {
  return
}
func.func @attn_backward_f64() {
  return
}
func.func @attn_forward_f32() {
  return
}
func.func @attn_backward_f32() {
  return
}

// CHECK: attn.kernel @k
// CHECK: llvm.mlir.global internal constant @attn_manifest_text("attn-abi 8\0Akernel k\0Anormalizer sig\0Aalgorithm plain\0Adenominator constant\0Amask none\0Aparams bias=-2\0Acontract scaled_dot 1/sqrt(d)\0Adtypes f64 f32\0Adevices cpu\0A\00")
// CHECK: llvm.func @attn_manifest() -> !llvm.ptr {
// CHECK: llvm.mlir.addressof @attn_manifest_text
