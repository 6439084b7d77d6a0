// RUN: attn-opt %examples/normalizers/linear.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too.
// RUN: attn-opt %examples/normalizers/linear.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/normalizers/linear.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/normalizers/linear.mlir --verify-roundtrip > /dev/null

// CHECK-LABEL: attn.score @elu_feature contract dot feature {
// CHECK-NEXT:  ^bb0(%x: f32):
// CHECK:         %[[E:.*]] = math.exp %x : f32
// CHECK-NEXT:    %[[NEG:.*]] = arith.cmpf olt, %x, %{{.*}} : f32
// CHECK-NEXT:    %[[XP1:.*]] = arith.addf %x, %{{.*}} : f32
// CHECK-NEXT:    %[[PHI:.*]] = arith.select %[[NEG]], %[[E]], %[[XP1]] : f32
// CHECK-NEXT:    attn.yield %[[PHI]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  attn.normalizer @linear {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:      attn.yield %s : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    denominator epsilon {{9.9999999999999995E-7|1.0e-06}} sum
// CHECK-NEXT:  }
// CHECK-NEXT:  attn.kernel @linear_attention normalizer(@linear) score(@elu_feature){{$}}
