// RUN: attn-opt %examples/families/sliding_window_sinks.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel is classified online and lowers
// (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/sliding_window_sinks.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/sliding_window_sinks.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/sliding_window_sinks.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/sliding_window_sinks.mlir --attn-expand-shared-regions --attn-classify-normalizer | FileCheck %s --check-prefix=CLASSIFIED
// RUN: attn-opt %examples/families/sliding_window_sinks.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.input @sinks learnable : tensor<?xf32> dims(H)
// CHECK: attn.mask @window
// CHECK: attn.normalizer @softmax_sinks
// CHECK: offset {
// CHECK-NEXT: ^bb0(%b: index, %h: index, %i: index):
// CHECK-NEXT: attn.read @sinks[%h] : f32
// CHECK: attn.kernel @sliding_window_sinks_attention normalizer(@softmax_sinks) mask(@window)
// CLASSIFIED: attn.kernel {{.*}} {algorithm = #attn<algorithm online>}
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
