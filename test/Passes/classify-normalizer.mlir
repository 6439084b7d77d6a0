// RUN: attn-opt %s --split-input-file --attn-classify-normalizer | FileCheck %s

// Exp-homogeneous numerator and denominator: online, stabilised.
// CHECK-LABEL: attn.normalizer @softmax
// CHECK-SAME: algorithm = #attn<algorithm online>
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

// Two exp terms, each of degree 1 (TanhMax): online.
// CHECK-LABEL: attn.normalizer @tanhmax
// CHECK-SAME: algorithm = #attn<algorithm online>
attn.normalizer @tanhmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %g = arith.subf %p, %n : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %hx: index, %i: index, %j: index):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %h = arith.addf %p, %n : f32
    attn.yield %h : f32
  }
}

// -----

// A bounded factor 1/(1 + e^-s) keeps degree 1 (sigsoftmax): online.
// CHECK-LABEL: attn.normalizer @sigsoftmax
// CHECK-SAME: algorithm = #attn<algorithm online>
attn.normalizer @sigsoftmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %e = math.exp %s : f32
    %ns = arith.negf %s : f32
    %en = math.exp %ns : f32
    %den = arith.addf %one, %en : f32
    %sig = arith.divf %one, %den : f32
    %g = arith.mulf %e, %sig : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}

// -----

// No exp factor at all (expressive attention): plain accumulation.
// CHECK-LABEL: attn.normalizer @expressive
// CHECK-SAME: algorithm = #attn<algorithm plain>
attn.normalizer @expressive {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator epsilon 1.0e-6 {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
}

// -----

// A bounded sigmoid over a constant denominator: plain.
// CHECK-LABEL: attn.normalizer @sigmoid
// CHECK-SAME: algorithm = #attn<algorithm plain>
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

// Count denominators cannot be rescaled, so even e^s accumulates plainly.
// CHECK-LABEL: attn.normalizer @exp_count
// CHECK-SAME: algorithm = #attn<algorithm plain>
attn.normalizer @exp_count {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}

// -----

// The exp argument may be any exp-free function of s and params (MultiMax-like).
// CHECK-LABEL: attn.normalizer @modulated
// CHECK-SAME: algorithm = #attn<algorithm online>
attn.normalizer @modulated params(t = 2.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %s, %zero : f32
    %x = arith.mulf %r, %t : f32
    %e = math.exp %x : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %s, %zero : f32
    %x = arith.mulf %r, %t : f32
    %e = math.exp %x : f32
    attn.yield %e : f32
  }
}

// -----

// Row offsets follow their normalizer: e^(sink) is one exp factor (online), a positive
// constant is e^(log c) (online), and a plain normalizer's offset has no exp factor.
// CHECK-LABEL: attn.normalizer @sinks
// CHECK-SAME: algorithm = #attn<algorithm online>
attn.input @sink_logits : tensor<?xf32>
attn.normalizer @sinks {
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
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %sink = attn.read @sink_logits[%h] : f32
    %e = math.exp %sink : f32
    attn.yield %e : f32
  }
}
// CHECK-LABEL: attn.normalizer @one_more
// CHECK-SAME: algorithm = #attn<algorithm online>
attn.normalizer @one_more {
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
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  }
}
// CHECK-LABEL: attn.normalizer @plain_offset
// CHECK-SAME: algorithm = #attn<algorithm plain>
attn.normalizer @plain_offset params(t = 1.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    attn.yield %s : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: f32):
    attn.yield %s : f32
  }
  offset {
  ^bb0(%b: index, %h: index, %i: index, %t: f32):
    %tt = arith.mulf %t, %t : f32
    attn.yield %tt : f32
  }
}

// -----

// Softplus in its overflow-free form max(s, 0) + log1p(e^-|s|): e^-|s| is bounded
// (its argument is <= 0), so log1p of it has no exp factor: plain.
// CHECK-LABEL: attn.normalizer @softplus
// CHECK-SAME: algorithm = #attn<algorithm plain>
attn.normalizer @softplus {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %pos = arith.maximumf %s, %zero : f32
    %abs = math.absf %s : f32
    %neg = arith.negf %abs : f32
    %e = math.exp %neg : f32
    %l = math.log1p %e : f32
    %g = arith.addf %pos, %l : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %pos = arith.maximumf %s, %zero : f32
    %abs = math.absf %s : f32
    %neg = arith.negf %abs : f32
    %e = math.exp %neg : f32
    %l = math.log1p %e : f32
    %g = arith.addf %pos, %l : f32
    attn.yield %g : f32
  }
}

// -----

// A bounded e^-(s·s) alone on both sides: online (the shift guards the sum against
// underflow); 1 + e^-(s·s) over a count: plain.
// CHECK-LABEL: attn.normalizer @gaussian
// CHECK-SAME: algorithm = #attn<algorithm online>
// CHECK-LABEL: attn.normalizer @shifted_gaussian
// CHECK-SAME: algorithm = #attn<algorithm plain>
attn.normalizer @gaussian {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %sq = arith.mulf %s, %s : f32
    %neg = arith.negf %sq : f32
    %e = math.exp %neg : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %sq = arith.mulf %s, %s : f32
    %neg = arith.negf %sq : f32
    %e = math.exp %neg : f32
    attn.yield %e : f32
  }
}
attn.normalizer @shifted_gaussian {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %sq = arith.mulf %s, %s : f32
    %neg = arith.negf %sq : f32
    %e = math.exp %neg : f32
    %g = arith.addf %one, %e : f32
    attn.yield %g : f32
  }
  denominator count
}

// -----

// Next to an exp factor a bounded one is degree 0 in a product (e^s·e^-|s|) and
// degree 1 in a sum (e^s + e^min(s, 0)): online both.
// CHECK-LABEL: attn.normalizer @damped
// CHECK-SAME: algorithm = #attn<algorithm online>
attn.normalizer @damped {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    %abs = math.absf %s : f32
    %neg = arith.negf %abs : f32
    %d = math.exp %neg : f32
    %g = arith.mulf %e, %d : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %e = math.exp %s : f32
    %low = arith.minimumf %s, %zero : f32
    %d = math.exp %low : f32
    %sum = arith.addf %e, %d : f32
    attn.yield %sum : f32
  }
}
