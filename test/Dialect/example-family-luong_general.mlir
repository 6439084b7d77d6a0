// RUN: attn-opt %examples/families/luong_general.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel lowers (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/luong_general.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/luong_general.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/luong_general.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/luong_general.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.score @general contract bilinear weights(W: 32x32 = identity)
// CHECK: attn.kernel @luong_general_attention
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
