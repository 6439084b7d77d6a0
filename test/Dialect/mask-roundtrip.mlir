// RUN: attn-opt %s --split-input-file | FileCheck %s
// RUN: attn-opt %s --split-input-file > %t.1
// RUN: attn-opt %t.1 --split-input-file > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %s --split-input-file --mlir-print-op-generic | attn-opt --split-input-file > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %s --split-input-file --verify-roundtrip > /dev/null

// CHECK-LABEL: attn.mask @causal {
// CHECK-NEXT:  ^bb0(%b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:    %[[K:.*]] = arith.cmpi ule, %j, %i : index
// CHECK-NEXT:    attn.yield %[[K]] : i1
// CHECK-NEXT:  }
attn.mask @causal {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}

// -----

// Sliding window |i - j| <= 128, combined with causality; block arguments
// are renamed to %i and %j whatever the source called them.
// CHECK-LABEL: attn.mask @local_causal {
// CHECK-NEXT:  ^bb0(%b: index, %h: index, %i: index, %j: index):
// CHECK:         arith.andi %{{.*}}, %{{.*}} : i1
// CHECK:         attn.yield %{{.*}} : i1
attn.mask @local_causal {
^bb0(%b: index, %h: index, %q: index, %k: index):
  %w = arith.constant 128 : index
  %causal = arith.cmpi ule, %k, %q : index
  %d = arith.subi %q, %k : index
  %near = arith.cmpi ule, %d, %w : index
  %keep = arith.andi %causal, %near : i1
  attn.yield %keep : i1
}

// -----

// A constant mask and a mask that computes through floats.
// CHECK-LABEL: attn.mask @all {
// CHECK-NEXT:  ^bb0(%b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:    %[[T:.*]] = arith.constant true
// CHECK-NEXT:    attn.yield %[[T]] : i1
// CHECK-LABEL: attn.mask @float_window {
// CHECK:         arith.cmpf olt, %{{.*}}, %{{.*}} : f32
attn.mask @all {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %t = arith.constant true
  attn.yield %t : i1
}
attn.mask @float_window {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %ii = arith.index_cast %i : index to i64
  %ji = arith.index_cast %j : index to i64
  %fi = arith.sitofp %ii : i64 to f32
  %fj = arith.sitofp %ji : i64 to f32
  %d = arith.subf %fi, %fj : f32
  %a = math.absf %d : f32
  %w = arith.constant 6.4e+01 : f32
  %keep = arith.cmpf olt, %a, %w : f32
  attn.yield %keep : i1
}

// -----

// CHECK: attn.mask @tagged attributes {note = "user"} {
attn.mask @tagged attributes {note = "user"} {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi uge, %j, %i : index
  attn.yield %keep : i1
}
