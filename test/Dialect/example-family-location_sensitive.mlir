// RUN: attn-opt %examples/families/location_sensitive.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel lowers (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/location_sensitive.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/location_sensitive.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/location_sensitive.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/location_sensitive.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.score @location_sensitive contract additive hidden 16 weights(W_q: 16x21 = identity, W_k: 16x21 = identity, v: 16 = 0.25)
// CHECK: attn.kernel @location_sensitive_attention
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
