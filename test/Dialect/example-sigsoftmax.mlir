// RUN: attn-opt %examples/normalizers/sigsoftmax.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too.
// RUN: attn-opt %examples/normalizers/sigsoftmax.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/normalizers/sigsoftmax.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/normalizers/sigsoftmax.mlir --verify-roundtrip > /dev/null

// CHECK-LABEL: attn.normalizer @sigsoftmax {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK:           %[[E:.*]] = math.exp %s : f32
// CHECK:           %[[SIG:.*]] = arith.divf
// CHECK-NEXT:      %[[G:.*]] = arith.mulf %[[E]], %[[SIG]] : f32
// CHECK-NEXT:      attn.yield %[[G]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    denominator sum
// CHECK-NEXT:  }
// CHECK-NEXT:  attn.kernel @sigsoftmax_attention normalizer(@sigsoftmax){{$}}
