// Regions are single blocks: a second block (here with memory ops and a
// non-float yield) is rejected, not skipped.
// RUN: not attn-opt %s 2>&1 | FileCheck %s

// CHECK: error: 'attn.score' op region #1 ('mod') failed to verify constraint: region with at most 1 blocks
attn.score @unchecked_block contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  attn.yield %s : f32
^bb1:
  %c0 = arith.constant 0 : index
  %m = memref.alloca() : memref<4xf32>
  %l = memref.load %m[%c0] : memref<4xf32>
  attn.yield %c0 : index
}
