// attn-compile --attn-mask runs attn-add-mask-input before the pipeline: the manifest
// and attn_signature (the ABI version, T = 1 input, any head dim, 0 params, then the input:
// rank 4, element i8 (8) or float (0), learnable, extents any) describe the input.
// RUN: attn-compile %s -o %t.bool --emit=manifest --attn-mask=bool
// RUN: FileCheck %s --check-prefix=BOOL < %t.bool
// RUN: attn-compile %s -o %t.additive --emit=manifest --attn-mask=additive
// RUN: FileCheck %s --check-prefix=ADDITIVE < %t.additive
// RUN: attn-compile %s -o %t.ll --emit=llvm --dtypes=f32 --attn-mask=learnable-additive
// RUN: FileCheck %s --check-prefix=SIGNATURE < %t.ll
// RUN: not attn-compile %s -o %t.so --attn-mask=causal 2>&1 | FileCheck %s --check-prefix=UNKNOWN

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
attn.kernel @softmax_attention normalizer(@softmax)

// BOOL: "inputs": [
// BOOL-NEXT: {
// BOOL-NEXT: "element": "i8",
// BOOL-NEXT: "learnable": false,
// BOOL-NEXT: "name": "attn_mask",
// BOOL-NEXT: "shape": [
// BOOL-NEXT: "?",
// BOOL-NEXT: "?",
// BOOL-NEXT: "?",
// BOOL-NEXT: "?"
// BOOL-NEXT: ]
// BOOL-NEXT: }
// BOOL-NEXT: ],
// BOOL: "mask": "softmax_attention_mask",
// ADDITIVE: "inputs": [
// ADDITIVE-NEXT: {
// ADDITIVE-NEXT: "element": "float",
// ADDITIVE-NEXT: "learnable": false,
// ADDITIVE-NEXT: "name": "attn_mask",
// ADDITIVE: "mask": "softmax_attention_mask",
// SIGNATURE: @attn_signature = {{.*}}constant [11 x i64] [i64 10, i64 1, i64 0, i64 0, i64 4, i64 0, i64 1, i64 -1, i64 -1, i64 -1, i64 -1], align 8
// UNKNOWN: for the --attn-mask option: Cannot find option named 'causal'!
