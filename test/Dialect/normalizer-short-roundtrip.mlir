// RUN: attn-opt %s --split-input-file | FileCheck %s
// The short forms print back as written, and that text parses to the same IR.
// RUN: attn-opt %s --split-input-file > %t.1
// RUN: attn-opt %t.1 --split-input-file > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %s --split-input-file --mlir-print-op-generic | attn-opt --split-input-file > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %s --split-input-file --verify-roundtrip > /dev/null

// CHECK-LABEL: attn.normalizer @softmax {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:      %[[E:.*]] = math.exp %s : f32
// CHECK-NEXT:      attn.yield %[[E]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    denominator sum
// CHECK-NEXT:  }
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

// -----

// With a constant row offset and params.
// CHECK-LABEL: attn.normalizer @softmax1 params(t = 2.0) {
// CHECK:         denominator epsilon 1.0 sum
// CHECK-NEXT:  }
attn.normalizer @softmax1 params(t = 2.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %x = arith.mulf %s, %t : f32
    %e = math.exp %x : f32
    attn.yield %e : f32
  }
  denominator epsilon 1.0 sum
}

// -----

// A shared region: its values follow the params, printed as %v0, %v1, ...
// CHECK-LABEL: attn.normalizer @tanhmax params(t = 1.0) {
// CHECK-NEXT:    shared {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
// CHECK:           attn.yield %{{.*}}, %{{.*}} : f32, f32
// CHECK-NEXT:    }
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32, %v0: f32, %v1: f32):
// CHECK-NEXT:      %[[G:.*]] = arith.subf %v0, %v1 : f32
// CHECK-NEXT:      attn.yield %[[G]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    denominator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32, %v0: f32, %v1: f32):
// CHECK-NEXT:      %[[H:.*]] = arith.addf %v0, %v1 : f32
// CHECK-NEXT:      attn.yield %[[H]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:  }
attn.normalizer @tanhmax params(t = 1.0) {
  shared {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %x = arith.mulf %s, %t : f32
    %pos = math.exp %x : f32
    %nx = arith.negf %x : f32
    %neg = math.exp %nx : f32
    attn.yield %pos, %neg : f32, f32
  }
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32, %pos: f32, %neg: f32):
    %g = arith.subf %pos, %neg : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32, %pos: f32, %neg: f32):
    %weight = arith.addf %pos, %neg : f32
    attn.yield %weight : f32
  }
}

// -----

// Both, with an offset region (which takes no shared values) and a non-float shared value.
// CHECK-LABEL: attn.normalizer @both {
// CHECK-NEXT:    shared {
// CHECK:           attn.yield %{{.*}}, %{{.*}} : f32, i1
// CHECK:         numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %v0: f32, %v1: i1):
// CHECK:         denominator sum
// CHECK-NEXT:    offset {
// CHECK-NEXT:    ^bb0(%b: index, %h: index, %i: index):
attn.normalizer @both {
  shared {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    %near = arith.cmpi ule, %j, %i : index
    attn.yield %e, %near : f32, i1
  }
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %e: f32, %near: i1):
    %twice = arith.addf %e, %e : f32
    %g = arith.select %near, %twice, %e : f32
    attn.yield %g : f32
  }
  denominator sum
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  }
}
