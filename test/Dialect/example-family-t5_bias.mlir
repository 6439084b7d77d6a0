// RUN: attn-opt %examples/families/t5_bias.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel is classified online and lowers
// (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/t5_bias.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/t5_bias.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/t5_bias.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/t5_bias.mlir --attn-expand-shared-regions --attn-classify-normalizer | FileCheck %s --check-prefix=CLASSIFIED
// RUN: attn-opt %examples/families/t5_bias.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.input @bias learnable : tensor<?x32xf32> dims(H, 32)
// CHECK: attn.score @t5 contract dot mod
// CHECK: math.ctlz
// CHECK: attn.read @bias[%h, %{{.*}}] : f32
// CHECK: attn.kernel @t5_attention normalizer(@softmax) score(@t5)
// CLASSIFIED: attn.kernel {{.*}} {algorithm = #attn<algorithm online>}
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
