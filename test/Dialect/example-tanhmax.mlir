// RUN: attn-opt %examples/normalizers/tanhmax.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too.
// RUN: attn-opt %examples/normalizers/tanhmax.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/normalizers/tanhmax.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/normalizers/tanhmax.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/normalizers/tanhmax.mlir --attn-expand-shared-regions | FileCheck %s --check-prefix=EXPANDED

// CHECK-LABEL: attn.normalizer @tanhmax {
// CHECK-NEXT:    shared {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:      %[[P:.*]] = math.exp %s : f32
// CHECK-NEXT:      %[[NS:.*]] = arith.negf %s : f32
// CHECK-NEXT:      %[[N:.*]] = math.exp %[[NS]] : f32
// CHECK-NEXT:      attn.yield %[[P]], %[[N]] : f32, f32
// CHECK-NEXT:    }
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %v0: f32, %v1: f32):
// CHECK-NEXT:      %[[G:.*]] = arith.subf %v0, %v1 : f32
// CHECK-NEXT:      attn.yield %[[G]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    denominator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %v0: f32, %v1: f32):
// CHECK-NEXT:      %[[H:.*]] = arith.addf %v0, %v1 : f32
// CHECK-NEXT:      attn.yield %[[H]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK-NEXT:  attn.kernel @tanhmax_attention normalizer(@tanhmax){{$}}

// Written out, the shared ops open both regions.
// EXPANDED-LABEL: attn.normalizer @tanhmax {
// EXPANDED-NEXT:    numerator {
// EXPANDED-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// EXPANDED-NEXT:      %[[P:.*]] = math.exp %s : f32
// EXPANDED-NEXT:      %[[NS:.*]] = arith.negf %s : f32
// EXPANDED-NEXT:      %[[N:.*]] = math.exp %[[NS]] : f32
// EXPANDED-NEXT:      %[[G:.*]] = arith.subf %[[P]], %[[N]] : f32
// EXPANDED-NEXT:      attn.yield %[[G]] : f32
// EXPANDED-NEXT:    }
// EXPANDED-NEXT:    denominator {
// EXPANDED-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// EXPANDED-NEXT:      %[[P2:.*]] = math.exp %s : f32
// EXPANDED-NEXT:      %[[NS2:.*]] = arith.negf %s : f32
// EXPANDED-NEXT:      %[[N2:.*]] = math.exp %[[NS2]] : f32
// EXPANDED-NEXT:      %[[H:.*]] = arith.addf %[[P2]], %[[N2]] : f32
// EXPANDED-NEXT:      attn.yield %[[H]] : f32
// EXPANDED-NEXT:    }
// EXPANDED-NEXT:  }
// EXPANDED-NEXT:  attn.kernel @tanhmax_attention normalizer(@tanhmax){{$}}
