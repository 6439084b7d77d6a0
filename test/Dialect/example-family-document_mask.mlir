// RUN: attn-opt %examples/families/document_mask.mlir | FileCheck %s
// Printing, re-parsing and printing again gives identical text; the generic
// and bytecode forms round-trip too; the kernel is classified online and lowers
// (attn-cpu-pipeline).
// RUN: attn-opt %examples/families/document_mask.mlir > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %examples/families/document_mask.mlir --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %examples/families/document_mask.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/document_mask.mlir --attn-expand-shared-regions --attn-classify-normalizer | FileCheck %s --check-prefix=CLASSIFIED
// RUN: attn-opt %examples/families/document_mask.mlir --attn-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// CHECK: attn.input @doc : tensor<?x?xi64> dims(B, ?)
// CHECK: attn.mask @same_document
// CHECK: attn.read @doc[%b, %i] : i64
// CHECK: attn.read @doc[%b, %j] : i64
// CHECK: attn.kernel @document_attention normalizer(@softmax) mask(@same_document)
// CLASSIFIED: attn.kernel {{.*}} {algorithm = #attn<algorithm online>}
// LOWERED: func.func @attn_forward_f32(
// LOWERED: func.func @attn_backward_f32(
