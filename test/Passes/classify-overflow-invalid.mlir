// RUN: attn-opt %s --split-input-file --attn-expand-shared-regions --attn-classify-normalizer -verify-diagnostics
// A region whose value can exceed its float type where |s| <= 1e4 is refused at the
// kernel, naming the op where the growth passes the type's largest number.

// s^10 reaches 1e40 > f32's 3.4e38: the fifth squaring of s·s... passes it.
attn.normalizer @tenth_power {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %two = arith.mulf %s, %s : f32
    %four = arith.mulf %two, %two : f32
    %eight = arith.mulf %four, %four : f32
    // expected-error @+2 {{'arith.mulf' op can exceed the largest 'f32' in the numerator of @tenth_power (kernel @k) where |s| <= 1e4 and params and table reads are within ±1e4: the kernel would return inf or NaN}}
    // expected-note @+1 {{bound the growth (tanh, a lower power, e^-|x|, e^min(x, c), a score mod <= 0), or write it as an exp factor e^x over a summed denominator, which the online algorithm rescales}}
    %ten = arith.mulf %eight, %two : f32
    attn.yield %ten : f32
  }
  denominator count
}
attn.kernel @k normalizer(@tenth_power)

// -----

// powf with a constant exponent is a polynomial, sized the same way.
attn.normalizer @power {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.constant 12.0 : f32
    // expected-error @+2 {{'math.powf' op can exceed the largest 'f32' in the numerator of @power}}
    // expected-note @+1 {{bound the growth}}
    %p = math.powf %s, %c : f32
    attn.yield %p : f32
  }
  denominator epsilon 1.0e-06 sum
}
attn.kernel @k normalizer(@power)

// -----

// Online: the exp factor is stabilised (in [0, 1]), but the factor-free part beside it
// is evaluated as written: s^10·e^s still overflows in f32.
attn.normalizer @weighted {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.constant 10.0 : f32
    // expected-error @+2 {{'math.powf' op can exceed the largest 'f32' in the numerator of @weighted}}
    // expected-note @+1 {{bound the growth}}
    %p = math.powf %s, %c : f32
    %e = math.exp %s : f32
    %g = arith.mulf %p, %e : f32
    attn.yield %g : f32
  }
  denominator epsilon 1.0e-06 sum
}
attn.kernel @k normalizer(@weighted)
