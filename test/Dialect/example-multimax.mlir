// RUN: attn-opt %examples/normalizers/multimax.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too.
// RUN: attn-opt %examples/normalizers/multimax.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/normalizers/multimax.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/normalizers/multimax.mlir --verify-roundtrip > /dev/null

// CHECK-LABEL: attn.normalizer @multimax params(tb1 = 1.0, td1 = 1.0, b1 = -1.0, d1 = 1.0, tb2 = 1.0, td2 = 1.0, b2 = -2.0, d2 = 2.0) {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %tb1: f32, %td1: f32, %b1: f32, %d1: f32, %tb2: f32, %td2: f32, %b2: f32, %d2: f32):
// CHECK:           arith.subf %b1, %s : f32
// CHECK:           arith.maximumf
// CHECK:           arith.subf %s, %d2 : f32
// CHECK:           %[[SIGMA:.*]] = math.fma %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[SIGMA]] : f32
// CHECK-NEXT:      attn.yield %[[E]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    denominator sum
// CHECK-NEXT:  }
// CHECK-NEXT:  attn.kernel @multimax_attention normalizer(@multimax){{$}}
