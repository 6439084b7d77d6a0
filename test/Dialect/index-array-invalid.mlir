// A dense array of index elements crashes MLIR 22's parser (it reads `index` as a
// float type's width); attn-compile and attn-opt refuse it first (tools/ParserGuards.h).
// The parser fuzzer found it in the generic form of an attn.normalizer.
// RUN: not attn-compile %s -o %t.so 2>&1 | FileCheck %s
// RUN: not attn-opt %s 2>&1 | FileCheck %s

// CHECK: index-array-invalid.mlir:[[@LINE+3]]:82: error: a dense array of index elements (array<index ...>), on which MLIR's parser crashes; expected an integer (e.g. array<i64: ...>) or float element type
// CHECK-NOT: Stack dump
// "array<index>" in a string or a comment is no array: array<index: 1>
"attn.normalizer"() <{denominator_kind = #attn<denominator count>, param_inits = array < index: 1>, param_names = [], sym_name = "n"}> ({
^bb0(%s: f32):
  attn.yield %s : f32
}, {
}, {
}, {
}) {note = "array<index: 2>"} : () -> ()

