// The parser skips white space and // comments between `array<` and its element
// type, and so does the guard (tools/ParserGuards.h).
// RUN: not attn-opt %s 2>&1 | FileCheck %s

// CHECK: index-array-comment-invalid.mlir:[[@LINE+2]]:32: error: a dense array of index elements
// CHECK-NOT: Stack dump
func.func @f() attributes {a = array< // a comment between
  index: 1>} { return }
