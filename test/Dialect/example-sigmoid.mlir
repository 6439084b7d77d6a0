// RUN: attn-opt %examples/normalizers/sigmoid.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too.
// RUN: attn-opt %examples/normalizers/sigmoid.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/normalizers/sigmoid.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/normalizers/sigmoid.mlir --verify-roundtrip > /dev/null

// CHECK-LABEL: attn.normalizer @sigmoid params(bias = -4.0) {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f32):
// CHECK:           arith.addf %s, %bias : f32
// CHECK:           math.exp
// CHECK:           %[[G:.*]] = arith.divf
// CHECK-NEXT:      attn.yield %[[G]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    denominator constant 1.0
// CHECK-NEXT:  }
// CHECK-NEXT:  attn.kernel @sigmoid_attention normalizer(@sigmoid){{$}}
