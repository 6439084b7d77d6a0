// RUN: attn-opt %examples/families/luong_dot.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel lowers (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/luong_dot.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/luong_dot.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/luong_dot.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/luong_dot.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.score @dot contract dot
// CHECK: attn.kernel @luong_dot_attention
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
