// RUN: attn-opt %examples/families/bahdanau.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel lowers (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/bahdanau.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/bahdanau.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/bahdanau.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/bahdanau.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.score @additive contract additive hidden 32 weights(W_q: 32x32 = identity, W_k: 32x32 = identity, v: 32 = 0.125)
// CHECK: attn.kernel @bahdanau_attention
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
