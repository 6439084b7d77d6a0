// RUN: attn-opt %examples/families/luong_local_post.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel is classified online and lowers
// (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/luong_local_post.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/luong_local_post.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/luong_local_post.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/luong_local_post.mlir --attn-expand-shared-regions --attn-classify-normalizer | FileCheck %s --check-prefix=CLASSIFIED
// RUN: attn-opt %examples/families/luong_local_post.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.input @p learnable : tensor<?x?x?xf32> dims(B, H, Nq)
// CHECK: attn.normalizer @local_softmax params(sigma = 2.0)
// CHECK: numerator {
// CHECK: attn.read @p[%b, %h, %i] : f32
// CHECK: attn.kernel @luong_local_post_attention normalizer(@local_softmax) score(@dot)
// CLASSIFIED: attn.kernel {{.*}} {algorithm = #attn<algorithm online>}
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
