// RUN: attn-opt %examples/families/fox.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel is classified online and lowers
// (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/fox.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/fox.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/fox.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/fox.mlir --attn-expand-shared-regions --attn-classify-normalizer | FileCheck %s --check-prefix=CLASSIFIED
// RUN: attn-opt %examples/families/fox.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.input @c learnable : tensor<?x?x?xf32> dims(B, H, Nq)
// CHECK: attn.read @c[%b, %h, %i] : f32
// CHECK: attn.read @c[%b, %h, %j] : f32
// CHECK: attn.kernel @fox_attention normalizer(@softmax) score(@forget) mask(@causal)
// CLASSIFIED: attn.kernel {{.*}} {algorithm = #attn<algorithm online>}
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
