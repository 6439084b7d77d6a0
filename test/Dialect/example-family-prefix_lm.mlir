// RUN: attn-opt %examples/families/prefix_lm.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel is classified online and lowers
// (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/prefix_lm.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/prefix_lm.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/prefix_lm.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/prefix_lm.mlir --attn-expand-shared-regions --attn-classify-normalizer | FileCheck %s --check-prefix=CLASSIFIED
// RUN: attn-opt %examples/families/prefix_lm.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.input @prefix : tensor<?xi64> dims(B)
// CHECK: attn.mask @prefix_lm
// CHECK: attn.read @prefix[%b] : i64
// CHECK: attn.kernel @prefix_lm_attention normalizer(@softmax) mask(@prefix_lm)
// CLASSIFIED: attn.kernel {{.*}} {algorithm = #attn<algorithm online>}
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
