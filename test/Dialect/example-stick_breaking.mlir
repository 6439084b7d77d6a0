// RUN: attn-opt %examples/normalizers/stick_breaking.mlir | FileCheck %s
// RUN: attn-opt %examples/normalizers/stick_breaking_left_over.mlir | FileCheck %s --check-prefix=LEFT
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too.
// RUN: attn-opt %examples/normalizers/stick_breaking_left_over.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/normalizers/stick_breaking_left_over.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/normalizers/stick_breaking.mlir --verify-roundtrip > /dev/null

// CHECK-LABEL: attn.normalizer @stick_breaking {
// CHECK:         numerator {
// CHECK:           arith.divf
// CHECK:         denominator log_survival {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK:           math.log1p
// CHECK:           %[[D:.*]] = arith.negf
// CHECK-NEXT:      attn.yield %[[D]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK: attn.kernel @stick_breaking_attention normalizer(@stick_breaking) mask(@before)

// LEFT:         denominator log_survival {
// LEFT:           attn.yield
// LEFT-NEXT:    } left_over current
// LEFT-NEXT:  }
