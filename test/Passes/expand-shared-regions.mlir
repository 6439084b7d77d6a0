// RUN: attn-opt %s --split-input-file --attn-expand-shared-regions | FileCheck %s

// `denominator sum`: the denominator becomes a copy of the numerator.
// CHECK-LABEL: attn.normalizer @softmax1 params(t = 2.0) {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
// CHECK-NEXT:      %[[X:.*]] = arith.mulf %s, %t : f32
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[X]] : f32
// CHECK-NEXT:      attn.yield %[[E]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    denominator epsilon 1.0 {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
// CHECK-NEXT:      %[[X2:.*]] = arith.mulf %s, %t : f32
// CHECK-NEXT:      %[[E2:.*]] = math.exp %[[X2]] : f32
// CHECK-NEXT:      attn.yield %[[E2]] : f32
// CHECK-NEXT:    }
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

// A shared region: its ops open the numerator and the denominator, its values
// replace their trailing arguments, and it is gone.
// CHECK-LABEL: attn.normalizer @tanhmax {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:      %[[P:.*]] = math.exp %s : f32
// CHECK-NEXT:      %[[NS:.*]] = arith.negf %s : f32
// CHECK-NEXT:      %[[N:.*]] = math.exp %[[NS]] : f32
// CHECK-NEXT:      %[[G:.*]] = arith.subf %[[P]], %[[N]] : f32
// CHECK-NEXT:      attn.yield %[[G]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    denominator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:      %[[P2:.*]] = math.exp %s : f32
// CHECK-NEXT:      %[[NS2:.*]] = arith.negf %s : f32
// CHECK-NEXT:      %[[N2:.*]] = math.exp %[[NS2]] : f32
// CHECK-NEXT:      %[[H:.*]] = arith.addf %[[P2]], %[[N2]] : f32
// CHECK-NEXT:      attn.yield %[[H]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:  }
attn.normalizer @tanhmax {
  shared {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %pos = math.exp %s : f32
    %ns = arith.negf %s : f32
    %neg = math.exp %ns : f32
    attn.yield %pos, %neg : f32, f32
  }
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %pos: f32, %neg: f32):
    %g = arith.subf %pos, %neg : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %pos: f32, %neg: f32):
    %weight = arith.addf %pos, %neg : f32
    attn.yield %weight : f32
  }
}

// -----

// Both, a shared value that is a region argument, and a count denominator's op.
// CHECK-LABEL: attn.normalizer @both params(t = 1.0) {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
// CHECK-NEXT:      %[[E:.*]] = math.exp %s : f32
// CHECK-NEXT:      %[[G:.*]] = arith.mulf %[[E]], %t : f32
// CHECK-NEXT:      attn.yield %[[G]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    denominator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
// CHECK-NEXT:      %[[E2:.*]] = math.exp %s : f32
// CHECK-NEXT:      %[[G2:.*]] = arith.mulf %[[E2]], %t : f32
// CHECK-NEXT:      attn.yield %[[G2]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK-LABEL: attn.normalizer @counted {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0.0{{.*}} : f32
// CHECK-NEXT:      %[[R:.*]] = arith.maximumf %s, %[[Z]] : f32
// CHECK-NEXT:      attn.yield %[[R]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    denominator count
// CHECK-NEXT:  }
attn.normalizer @both params(t = 1.0) {
  shared {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %e = math.exp %s : f32
    attn.yield %e, %t : f32, f32
  }
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32, %e: f32, %t2: f32):
    %g = arith.mulf %e, %t2 : f32
    attn.yield %g : f32
  }
  denominator sum
}
attn.normalizer @counted {
  shared {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    attn.yield %zero : f32
  }
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %zero: f32):
    %r = arith.maximumf %s, %zero : f32
    attn.yield %r : f32
  }
  denominator count
}

// -----

// The explicit form is left as it is.
// CHECK-LABEL: attn.normalizer @softmax {
// CHECK-NEXT:    numerator {
// CHECK:         denominator {
// CHECK:         attn.yield
// CHECK-NEXT:    }
// CHECK-NEXT:  }
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
