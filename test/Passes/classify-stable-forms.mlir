// RUN: attn-opt %s --split-input-file --attn-expand-shared-regions --attn-classify-normalizer | FileCheck %s
// attn-classify-normalizer rewrites every exponential to math.exp (then the online
// algorithm shifts it) and records each rule applied in `rewrites`.

// Base-2 softmax: exp2(s) = e^(s·ln 2).
// CHECK-LABEL: attn.normalizer @base2
// CHECK-SAME: algorithm = #attn<algorithm online>
// CHECK-SAME: rewrites = ["exp2(x) = e^(x*ln 2)"]
// ln 2 is math.log of 2.0, evaluated at the type the kernel is instantiated at.
// CHECK: %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK: %[[LN2:.*]] = math.log %[[TWO]] : f32
// CHECK: %[[X:.*]] = arith.mulf %s, %[[LN2]] : f32
// CHECK: %[[E:.*]] = math.exp %[[X]] : f32
// CHECK: attn.yield %[[E]] : f32
// CHECK-NOT: math.exp2
attn.normalizer @base2 {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp2 %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

// -----

// 2.0 ** s: powf with a constant base c > 0 is e^(s·ln c).
// CHECK-LABEL: attn.normalizer @power_of_two
// CHECK-SAME: algorithm = #attn<algorithm online>
// CHECK-SAME: rewrites = ["powf(c, x) = e^(x*ln c)"]
// CHECK-NOT: math.powf
attn.normalizer @power_of_two {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %two = arith.constant 2.0 : f32
    %e = math.powf %two, %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

// -----

// A power with a constant exponent stays a polynomial: plain.
// CHECK-LABEL: attn.normalizer @square
// CHECK-SAME: algorithm = #attn<algorithm plain>
// CHECK-NOT: rewrites
// CHECK: math.powf
attn.normalizer @square {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %two = arith.constant 2.0 : f32
    %e = math.powf %s, %two : f32
    attn.yield %e : f32
  }
  denominator epsilon 1.0e-06 sum
}

// -----

// Softpick as its paper writes it: relu(e^s - 1) / (ε + Σ |e^s - 1|). expm1 is
// e^s - e^0 and the 1 of e^s - 1 is e^0, one more exp factor: online, with
// max(·, 0) and |·| keeping the degree.
// CHECK-LABEL: attn.normalizer @softpick
// CHECK-SAME: algorithm = #attn<algorithm online>
// CHECK-SAME: rewrites = ["expm1(x) = e^x - e^0", "c beside an exp factor = +-e^(log|c|)"]
// CHECK: numerator
// CHECK: %[[E:.*]] = math.exp %s : f32
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[ONE:.*]] = math.exp %[[ZERO]] : f32
// CHECK: %[[D:.*]] = arith.subf %[[E]], %[[ONE]] : f32
// CHECK: arith.maximumf %[[D]]
// CHECK: denominator
// CHECK: math.exp
// CHECK: math.absf
attn.normalizer @softpick {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %d = math.expm1 %s : f32
    %r = arith.maximumf %d, %zero : f32
    attn.yield %r : f32
  }
  denominator epsilon 1.0e-06 {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %e = math.exp %s : f32
    %d = arith.subf %e, %one : f32
    %a = math.absf %d : f32
    attn.yield %a : f32
  }
}

// -----

// expm1 of a value <= 0 is bounded in (-1, 0] and stays as written (exact near 0).
// CHECK-LABEL: attn.normalizer @bounded_expm1
// CHECK-SAME: algorithm = #attn<algorithm plain>
// CHECK: math.expm1
attn.normalizer @bounded_expm1 {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %a = math.absf %s : f32
    %n = arith.negf %a : f32
    %e = math.expm1 %n : f32
    attn.yield %e : f32
  }
  denominator count
}

// -----

// Softplus as everyone writes it is rewritten to its bounded form.
// CHECK-LABEL: attn.normalizer @softplus
// CHECK-SAME: algorithm = #attn<algorithm plain>
// CHECK-SAME: rewrites = ["log1p(e^x) = softplus: max(x, 0) + log1p(e^-|x|)", "log(c + e^x) = softplus: max(y, 0) + log1p(e^-|y|) + log c, y = x - log c"]
// CHECK: numerator
// CHECK: %[[M:.*]] = arith.maximumf %s
// CHECK: %[[A:.*]] = math.absf %s
// CHECK: %[[N:.*]] = arith.negf %[[A]]
// CHECK: %[[E:.*]] = math.exp %[[N]]
// CHECK: %[[L:.*]] = math.log1p %[[E]]
// CHECK: arith.addf %[[M]], %[[L]]
// CHECK: denominator
// CHECK-NOT: math.log %
attn.normalizer @softplus {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    %l = math.log1p %e : f32
    attn.yield %l : f32
  }
  denominator epsilon 1.0e-06 {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %e = math.exp %s : f32
    %p = arith.addf %one, %e : f32
    %l = math.log %p : f32
    attn.yield %l : f32
  }
}

// -----

// Softplus written stably is left as it is: log1p(e^-|s|) has e^x in (0, 1].
// CHECK-LABEL: attn.normalizer @stable_softplus
// CHECK-NOT: rewrites
// CHECK: math.log1p
// CHECK-NOT: math.log1p
// CHECK: denominator constant
attn.normalizer @stable_softplus {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %pos = arith.maximumf %s, %zero : f32
    %abs = math.absf %s : f32
    %nabs = arith.negf %abs : f32
    %e = math.exp %nabs : f32
    %l = math.log1p %e : f32
    %softplus = arith.addf %pos, %l : f32
    attn.yield %softplus : f32
  }
  denominator constant 1.0
}

// -----

// sinh and cosh are two exp factors each; log(e^x) is x; e^a·e^b is e^(a + b).
// CHECK-LABEL: attn.normalizer @hyperbolic
// CHECK-SAME: algorithm = #attn<algorithm online>
// CHECK-SAME: "sinh(x) = (e^x - e^-x)*0.5"
// CHECK-SAME: "cosh(x) = (e^x + e^-x)*0.5"
// CHECK-NOT: math.sinh
// CHECK-NOT: math.cosh
attn.normalizer @hyperbolic {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %g = math.sinh %s : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %g = math.cosh %s : f32
    attn.yield %g : f32
  }
}

// -----

// CHECK-LABEL: attn.normalizer @products
// CHECK-SAME: algorithm = #attn<algorithm online>
// CHECK-SAME: rewrites = ["log(e^x) = x", "e^a*e^b = e^(a + b)"]
attn.normalizer @products {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    %l = math.log %e : f32
    %t = math.tanh %l : f32
    %f = math.exp %t : f32
    %g = arith.mulf %e, %f : f32
    attn.yield %g : f32
  }
  denominator sum
}

// -----

// A constant inside a bounded denominator stays a constant (the sigmoid is not a
// sum of exp factors): sigsoftmax keeps its form.
// CHECK-LABEL: attn.normalizer @sigsoftmax
// CHECK-SAME: algorithm = #attn<algorithm online>
// CHECK-NOT: rewrites
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: arith.addf %[[ONE]]
attn.normalizer @sigsoftmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %e = math.exp %s : f32
    %n = arith.negf %s : f32
    %en = math.exp %n : f32
    %d = arith.addf %one, %en : f32
    %sig = arith.divf %one, %d : f32
    %g = arith.mulf %e, %sig : f32
    attn.yield %g : f32
  }
  denominator sum
}
