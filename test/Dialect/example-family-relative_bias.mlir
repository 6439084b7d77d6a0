// RUN: attn-opt %examples/families/relative_bias.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel lowers (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/relative_bias.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/relative_bias.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/relative_bias.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/relative_bias.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.score @relative_bias contract scaled_dot params(b_m2 = 0.0, b_m1 = 0.0, b_0 = 0.0, b_p1 = 0.0, b_p2 = 0.0) mod
// CHECK: attn.kernel @relative_bias_attention
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
