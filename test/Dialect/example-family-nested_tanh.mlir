// RUN: attn-opt %examples/families/nested_tanh.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel lowers (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/nested_tanh.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/nested_tanh.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/nested_tanh.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/nested_tanh.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.score @nested contract dot weights(W: 32x16 = identity) feature
// CHECK: attn.kernel @nested_tanh_attention
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
