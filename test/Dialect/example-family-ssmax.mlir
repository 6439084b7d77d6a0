// RUN: attn-opt %examples/families/ssmax.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel is classified online and lowers
// (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/ssmax.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/ssmax.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/ssmax.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/ssmax.mlir --attn-expand-shared-regions --attn-classify-normalizer | FileCheck %s --check-prefix=CLASSIFIED
// RUN: attn-opt %examples/families/ssmax.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.input @scale learnable = 0.43 : tensor<?xf32> dims(H)
// CHECK: attn.read @scale[%h] : f32
// CHECK: attn.kernel @ssmax_attention normalizer(@softmax) score(@scalable) mask(@causal)
// CLASSIFIED: attn.kernel {{.*}} {algorithm = #attn<algorithm online>}
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
