// RUN: attn-opt %s --split-input-file | FileCheck %s
// Printing, re-parsing and printing again gives identical text.
// RUN: attn-opt %s --split-input-file > %t.1
// RUN: attn-opt %t.1 --split-input-file > %t.2
// RUN: diff %t.1 %t.2
// The generic form parses back to the same custom form.
// RUN: attn-opt %s --split-input-file --mlir-print-op-generic | attn-opt --split-input-file > %t.g
// RUN: diff %t.1 %t.g
// Generic and bytecode round-trips inside attn-opt.
// RUN: attn-opt %s --split-input-file --verify-roundtrip > /dev/null

// Summed denominator (a region).
// CHECK-LABEL: attn.normalizer @softmax {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:      %[[E:.*]] = math.exp %s : f32
// CHECK-NEXT:      attn.yield %[[E]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    denominator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:      %[[H:.*]] = math.exp %s : f32
// CHECK-NEXT:      attn.yield %[[H]] : f32
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

// -----

// Constant denominator, with one learnable param.
// CHECK-LABEL: attn.normalizer @sigmoid params(bias = -4.0) {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f32):
// CHECK:           arith.addf %s, %bias : f32
// CHECK:         }
// CHECK-NEXT:    denominator constant 1.0
// CHECK-NEXT:  }
attn.normalizer @sigmoid params(bias = -4.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f32):
    %one = arith.constant 1.0 : f32
    %x = arith.addf %s, %bias : f32
    %nx = arith.negf %x : f32
    %e = math.exp %nx : f32
    %den = arith.addf %one, %e : f32
    %g = arith.divf %one, %den : f32
    attn.yield %g : f32
  }
  denominator constant 1.0
}

// -----

// A constant other than 1, and a negative one.
// CHECK-LABEL: attn.normalizer @half
// CHECK:         denominator constant 2.0
attn.normalizer @half {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator constant 2.0
}

// -----

// CHECK-LABEL: attn.normalizer @negated
// CHECK:         denominator constant -0.5
attn.normalizer @negated {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator constant -0.5
}

// -----

// Count denominator.
// CHECK-LABEL: attn.normalizer @relu {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[G:.*]] = arith.maximumf %s, %[[Z]] : f32
// CHECK-NEXT:      attn.yield %[[G]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    denominator count
// CHECK-NEXT:  }
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}

// -----

// Summed denominator with epsilon.
// CHECK-LABEL: attn.normalizer @linear {
// CHECK:         denominator epsilon 0.001 {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:      attn.yield %s : f32
// CHECK-NEXT:    }
attn.normalizer @linear {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator epsilon 0.001 {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
}

// -----

// Several params; the denominator region takes them as well. Region
// arguments print under the param names. A quoted name prints bare (names are
// identifiers: names-invalid.mlir).
// CHECK-LABEL: attn.normalizer @scaled params(a = 1.0, b = -0.25, c_d = 3.0) {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %a: f32, %b_0: f32, %c_d: f32):
// CHECK:         denominator {
// CHECK-NEXT:    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %a: f32, %b_0: f32, %c_d: f32):
attn.normalizer @scaled params(a = 1.0, b = -0.25, "c_d" = 3.0) {
  numerator {
  ^bb0(%s: f32, %bx: index, %h: index, %i: index, %j: index, %a: f32, %b: f32, %cd: f32):
    %x = arith.mulf %s, %a : f32
    %y = arith.addf %x, %b : f32
    %z = arith.mulf %y, %cd : f32
    %e = math.exp %z : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %bx: index, %h: index, %i: index, %j: index, %a: f32, %b: f32, %cd: f32):
    %x = arith.mulf %s, %a : f32
    %y = arith.addf %x, %b : f32
    %z = arith.mulf %y, %cd : f32
    %e = math.exp %z : f32
    attn.yield %e : f32
  }
}

// -----

// Other float types: f64 and bf16.
// CHECK-LABEL: attn.normalizer @wide params(t = 2.0) {
// CHECK-NEXT:    numerator {
// CHECK-NEXT:    ^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index, %t: f64):
// CHECK:         denominator count
attn.normalizer @wide params(t = 2.0) {
  numerator {
  ^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index, %t: f64):
    %x = arith.mulf %s, %t : f64
    attn.yield %x : f64
  }
  denominator count
}

// -----

// CHECK-LABEL: attn.normalizer @half_precision {
// CHECK:         ^bb0(%s: bf16, %b: index, %h: index, %i: index, %j: index):
// CHECK:         ^bb0(%s: bf16, %b: index, %h: index, %i: index, %j: index):
attn.normalizer @half_precision {
  numerator {
  ^bb0(%s: bf16, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : bf16
    attn.yield %e : bf16
  }
  denominator {
  ^bb0(%s: bf16, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : bf16
    attn.yield %e : bf16
  }
}

// -----

// arith.select is the way to write a conditional; integer and index
// intermediates are fine as long as everything is scalar.
// CHECK-LABEL: attn.normalizer @piecewise
// CHECK:         arith.cmpf ogt, %s, %{{.*}} : f32
// CHECK:         arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK:         arith.fptosi %s : f32 to i32
// CHECK:         arith.sitofp %{{.*}} : i32 to f32
attn.normalizer @piecewise {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %pos = arith.cmpf ogt, %s, %zero : f32
    %e = math.exp %s : f32
    %t = math.tanh %s : f32
    %g = arith.select %pos, %e, %t : f32
    %n = arith.fptosi %s : f32 to i32
    %f = arith.sitofp %n : i32 to f32
    %r = arith.addf %g, %f : f32
    attn.yield %r : f32
  }
  denominator count
}

// -----

// The attribute the classifier attaches, and user attributes, survive under
// `attributes`.
// CHECK-LABEL: attn.normalizer @classified attributes {algorithm = #attn<algorithm online>} {
// CHECK-LABEL: attn.normalizer @tagged params(p = 1.0) attributes {note = "user"} {
// CHECK:         denominator constant 1.0
attn.normalizer @classified attributes {algorithm = #attn<algorithm online>} {
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
attn.normalizer @tagged params(p = 1.0) attributes {note = "user"} {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %p: f32):
    attn.yield %p : f32
  }
  denominator constant 1.0
}

// -----

// A row offset region after a summed denominator: C_i = β(b, h, i) + Σ_j h; its
// arguments print as %b, %h, %i and the params.
// CHECK-LABEL: attn.normalizer @sinks params(t = 1.0) {
// CHECK:         offset {
// CHECK-NEXT:    ^bb0(%b: index, %h: index, %i: index, %t: f32):
// CHECK:           attn.yield %{{.*}} : f32
attn.normalizer @sinks params(t = 1.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  offset {
  ^bb0(%b: index, %h: index, %i: index, %t: f32):
    %e = math.exp %t : f32
    attn.yield %e : f32
  }
}
