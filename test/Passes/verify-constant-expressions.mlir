// RUN: attn-opt %s --split-input-file --attn-verify -verify-diagnostics

// A constant expression that evaluates to NaN or an infinity is refused as its literal
// is (the canonicalizer would fold it into the kernel), where it is computed.
attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %zero = arith.constant 0.0 : f32
    // expected-error @+1 {{'arith.divf' op evaluates to +infinity in the numerator region (its operands are constants); expected a finite number}}
    %inf = arith.divf %one, %zero : f32
    %g = arith.addf %s, %inf : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @k normalizer(@n)

// -----

// Folded through a chain of constants: 100 · 100 is finite, e^10000 is not (in f32).
attn.score @big contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %hundred = arith.constant 100.0 : f32
  %t = arith.mulf %hundred, %hundred : f32
  // expected-error @+1 {{'math.exp' op evaluates to +infinity in the mod region (its operands are constants)}}
  %e = math.exp %t : f32
  %r = arith.addf %s, %e : f32
  attn.yield %r : f32
}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @k normalizer(@softmax) score(@big)

// -----

attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    // expected-error @+1 {{'arith.divf' op evaluates to NaN in the numerator region}}
    %nan = arith.divf %zero, %zero : f32
    %g = arith.addf %s, %nan : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @k normalizer(@n)

// -----

// Compared with, a computed infinity is a bound, as a literal one: accepted. Finite
// constant expressions are accepted too.
attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %zero = arith.constant 0.0 : f32
    %inf = arith.divf %one, %zero : f32
    %below = arith.cmpf olt, %s, %inf : f32
    %two = arith.addf %one, %one : f32
    %e = math.exp %s : f32
    %g = arith.select %below, %e, %two : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @k normalizer(@n)
