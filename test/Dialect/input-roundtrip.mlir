// RUN: attn-opt %s | FileCheck %s
// RUN: attn-opt %s > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %s --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %s --verify-roundtrip > /dev/null
// RUN: attn-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Extents that name the call's dimensions, '?' and numbers in dims(...), and the
// initial value of a learnable input.
// CHECK-LABEL: module {
// CHECK-NEXT:    attn.input @slopes : tensor<?xf32> dims(H)
// CHECK-NEXT:    attn.input @gate learnable : tensor<?x?x?xf32> dims(B, H, Nq)
// CHECK-NEXT:    attn.input @bias learnable : tensor<?x32xf32> dims(Hkv, 32)
// CHECK-NEXT:    attn.input @doc : tensor<?x?xi64> dims(B, Nk)
// CHECK-NEXT:    attn.input @free : tensor<?x?xf32> dims(?, Nq)
// CHECK-NEXT:    attn.input @scale learnable = 0.43 : tensor<?xf32> dims(H)
// CHECK-NEXT:    attn.input @sink learnable = -1.5 : tensor<8xf32>
// CHECK-NEXT:    attn.input @plain : tensor<?x4xf32>
// CHECK-NEXT:  }
// GENERIC: dims = [#attn<call_dim B>, #attn<call_dim H>, #attn<call_dim Nq>]
// GENERIC: dims = [unit, #attn<call_dim Nq>]
// GENERIC: init = 4.300000e-01 : f64
attn.input @slopes : tensor<?xf32> dims(H)
attn.input @gate learnable : tensor<?x?x?xf32> dims(B, H, Nq)
attn.input @bias learnable : tensor<?x32xf32> dims(Hkv, 32)
attn.input @doc : tensor<?x?xi64> dims(B, Nk)
attn.input @free : tensor<?x?xf32> dims(?, Nq)
attn.input @scale learnable = 0.43 : tensor<?xf32> dims(H)
attn.input @sink learnable = -1.5 : tensor<8xf32>
attn.input @plain : tensor<?x4xf32>
