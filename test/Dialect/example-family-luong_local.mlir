// RUN: attn-opt %examples/families/luong_local.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel lowers (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/luong_local.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/luong_local.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/luong_local.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/luong_local.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.input @p learnable : tensor<?x?x?xf32> dims(B, H, Nq)
// CHECK: attn.score @local_p contract dot params(sigma = 2.0) mod
// CHECK: attn.read @p[%b, %h, %i] : f32
// CHECK: attn.kernel @luong_local_attention
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
