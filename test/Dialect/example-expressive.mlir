// RUN: attn-opt %examples/normalizers/expressive.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too.
// RUN: attn-opt %examples/normalizers/expressive.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/normalizers/expressive.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/normalizers/expressive.mlir --verify-roundtrip > /dev/null

// CHECK-LABEL: attn.score @squared_dot contract dot mod {
// CHECK-NEXT:  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:    %[[SQ:.*]] = arith.mulf %s, %s : f32
// CHECK-NEXT:    attn.yield %[[SQ]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  attn.normalizer @expressive {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:      attn.yield %s : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    denominator epsilon {{9.9999999999999995E-7|1.0e-06}} sum
// CHECK-NEXT:  }
// CHECK-NEXT:  attn.kernel @expressive_attention normalizer(@expressive) score(@squared_dot){{$}}
