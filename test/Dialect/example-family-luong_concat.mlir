// RUN: attn-opt %examples/families/luong_concat.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel lowers (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/luong_concat.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/luong_concat.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/luong_concat.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/luong_concat.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.score @concat contract additive hidden 8 weights(W_q: 8x16 = identity, W_k: 8x16 = identity, v: 8 = 0.25)
// CHECK: attn.kernel @luong_concat_attention
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
