// RUN: attn-opt %s --attn-emit-manifest | FileCheck %s

// The manifest alone (JSON, runtime/python/attn/manifest.schema.json): the kernel's
// classification and params, the types of its CPU schedules (in order), the entry
// points written out as stubs that carry their #attn.entry.
attn.normalizer @sig params(bias = -2.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f32):
    %x = arith.addf %s, %bias : f32
    attn.yield %x : f32
  }
  denominator constant 1.0
}
attn.kernel @k normalizer(@sig) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f64, variant = generic>, #attn.cpu_schedule<type = f32, variant = generic>]}
func.func @attn_forward_f64(%q: memref<?x?xf64>) attributes {attn.entry = #attn.entry<role = forward, type = f64, kernel = @k>} {
  return
}
func.func @attn_backward_f64(%q: memref<?x?xf64>) attributes {attn.entry = #attn.entry<role = backward, type = f64, kernel = @k>} {
  return
}
func.func @attn_forward_f32(%q: memref<?x?xf32>) attributes {attn.entry = #attn.entry<role = forward, type = f32, kernel = @k>} {
  return
}
func.func @attn_backward_f32(%q: memref<?x?xf32>) attributes {attn.entry = #attn.entry<role = backward, type = f32, kernel = @k>} {
  return
}

// CHECK: attn.kernel @k
// CHECK: llvm.mlir.global internal constant @attn_manifest_text("{\0A  \22abi\22: 10,\0A  \22algorithm\22: \22plain\22,\0A  \22contract\22: {\0A    \22feature\22: false,\0A    \22kind\22: \22scaled_dot\22,\0A    \22scale\22: null\0A  },\0A  \22cpu_cost\22: [\0A    {\0A      \22backward\22: 40,\0A      \22dtype\22: \22f64\22,\0A      \22forward\22: 60\0A    },\0A    {\0A      \22backward\22: 20,\0A      \22dtype\22: \22f32\22,\0A      \22forward\22: 30\0A    }\0A  ],\0A  \22denominator\22: \22constant\22,\0A  \22devices\22: [\0A    \22cpu\22\0A  ],\0A  \22dtypes\22: [\0A    \22f64\22,\0A    \22f32\22\0A  ],\0A  \22inputs\22: [],\0A  \22kernel\22: \22k\22,\0A  \22mask\22: \22none\22,\0A  \22normalizer\22: \22sig\22,\0A  \22params\22: [\0A    {\0A      \22init\22: -2,\0A      \22name\22: \22bias\22,\0A      \22shape\22: []\0A    }\0A  ],\0A  \22splits\22: {\0A    \22backward\22: \22key_chunks\22,\0A    \22forward\22: \22key_chunks\22,\0A    \22partial_calls\22: true\0A  }\0A}\0A\00") {addr_space = 0 : i32}
// CHECK: llvm.func @attn_manifest() -> !llvm.ptr {
// CHECK: llvm.mlir.addressof @attn_manifest_text
