// RUN: attn-opt %s --split-input-file --attn-classify-normalizer -verify-diagnostics


attn.normalizer @nested_exp {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    // expected-error @+2 {{'math.exp' op in the denominator of @nested_exp mixes exp-factor degrees}}
    // expected-note @+1 {{stable rewrite: e^(e^x) grows doubly exponentially, beyond any rescaling: bound the inner exponent first, e.g. e^(tanh(x)) or e^(e^(-|x|))}}
    %ee = math.exp %e : f32
    attn.yield %ee : f32
  }
}

// -----

// e^s over Σ s: the denominator has no exp factor to rescale with the numerator.
attn.normalizer @unbalanced {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+2 {{'attn.yield' op yields a value without an exp factor while the numerator of @unbalanced has one in every term}}
    // expected-note @+1 {{stable rewrite: give both an exp factor (h = e^s, softmax-like) or neither (g = s, linear-like); a weight over a constant or a count (`denominator constant 1.0`, `denominator count`) may have one in g alone}}
    attn.yield %s : f32
  }
}

// -----

// A comparison against e^s depends on its scale, which the stabiliser changes.
attn.normalizer @compare_exp {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %zero = arith.constant 0.0 : f32
    %e = math.exp %s : f32
    // expected-error @+2 {{'arith.cmpf' op in the numerator of @compare_exp mixes exp-factor degrees}}
    // expected-note @+1 {{stable rewrite: compare the exponents instead: e^a < e^b is a < b}}
    %big = arith.cmpf ogt, %e, %one : f32
    %g = arith.select %big, %e, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}

// -----

attn.normalizer @softmax_plus_linear {
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
    %i64 = arith.index_cast %i : index to i64
    %x = arith.sitofp %i64 : i64 to f32
    // expected-error @+2 {{'attn.yield' op yields a value without an exp factor in the offset of @softmax_plus_linear, an online normalizer: its offset must be one exp factor e^x or a positive constant, so that its exponent joins the running max}}
    // expected-note @+1 {{stable rewrite: a positive β is e^(log β): yield math.exp of its logarithm (sinks: β = e^(sinks[h]) reads the logits, not their exp)}}
    attn.yield %x : f32
  }
}

// -----

attn.normalizer @negative_constant {
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
    %c = arith.constant -1.0 : f32
    // expected-error @+2 {{'attn.yield' op yields a value without an exp factor in the offset of @negative_constant, an online normalizer}}
    // expected-note @+1 {{stable rewrite: a positive β is e^(log β)}}
    attn.yield %c : f32
  }
}

// -----

attn.normalizer @plain_with_exp {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %one = arith.constant 1.0 : f32
    %e = math.exp %one : f32
    // expected-error @+2 {{'attn.yield' op yields an exp factor in the offset of @plain_with_exp, whose numerator and denominator have none: a plain normalizer does not stabilise, so its offset must not have one either}}
    // expected-note @+1 {{stable rewrite: a constant e^c is that number (`epsilon` with its value); otherwise give the numerator and denominator exp factors too}}
    attn.yield %e : f32
  }
}

// -----

// tanh as a quotient of exp sums; and dividing by a bounded e^-|s| (= e^|s|) is
// not bounded.
attn.normalizer @tanh_ratio {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    %ns = arith.negf %s : f32
    %en = math.exp %ns : f32
    %num = arith.subf %e, %en : f32
    %den = arith.addf %e, %en : f32
    // expected-error @+2 {{'arith.divf' op in the numerator of @tanh_ratio mixes exp-factor degrees}}
    // expected-note @+1 {{stable rewrite: a quotient of exp factors is scale-dependent: tanh(x) = (e^x - e^-x) / (e^x + e^-x) is math.tanh, a ratio e^a / e^b is e^(a - b), and a / (c + e^x) with a constant c > 0 is bounded and accepted}}
    %g = arith.divf %num, %den : f32
    attn.yield %g : f32
  }
  denominator count
}

// -----

attn.normalizer @over_bounded {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %abs = math.absf %s : f32
    %neg = arith.negf %abs : f32
    %d = math.exp %neg : f32
    // expected-error @+2 {{'arith.divf' op in the numerator of @over_bounded mixes exp-factor degrees}}
    // expected-note @+1 {{stable rewrite: a quotient of exp factors is scale-dependent}}
    %g = arith.divf %one, %d : f32
    attn.yield %g : f32
  }
  denominator count
}

// -----

// The short forms are read only after attn-expand-shared-regions has written them out.
// expected-error @+1 {{'attn.normalizer' op is written with `denominator sum`, which this pass does not read; run attn-expand-shared-regions first}}
attn.normalizer @short {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

// -----

// A sum of an exp factor and a value that is not a constant cannot be rescaled.
attn.normalizer @exp_plus_param params(p = 1.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %p: f32):
    %e = math.exp %s : f32
    // expected-error @+2 {{'arith.addf' op in the numerator of @exp_plus_param mixes exp-factor degrees}}
    // expected-note @+1 {{stable rewrite: e^x + y with a y that is not a constant cannot be rescaled by a running max (a constant c is accepted: it is ±e^(log|c|))}}
    %g = arith.addf %e, %p : f32
    attn.yield %g : f32
  }
  denominator count
}

// -----

// A negative constant base with a variable exponent is NaN for non-integer powers.
attn.normalizer @negative_base {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.constant -2.0 : f32
    // expected-error @+1 {{'math.powf' op has the constant base -2.000000e+00 and a variable exponent, which is NaN for non-integer exponents and cannot be stabilised; write e^(x·log c) with a base c > 0 (math.exp), or select the sign yourself}}
    %g = math.powf %c, %s : f32
    attn.yield %g : f32
  }
  denominator count
}

// -----

// A variable integer power grows exponentially in its exponent.
attn.normalizer @variable_integer_power {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %n = arith.index_cast %j : index to i32
    // expected-error @+1 {{'math.fpowi' op raises to a variable integer power, which grows exponentially in the exponent and cannot be stabilised; write a constant exponent, or e^(n·log|x|) with math.exp}}
    %g = math.fpowi %s, %n : f32, i32
    attn.yield %g : f32
  }
  denominator count
}

// -----

// An exp factor over a count: accumulated as written, it overflows; known at the
// kernel, whose score decides whether e^s is bounded.
attn.normalizer @exp_count {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+2 {{'math.exp' op can exceed the largest 'f32' in the numerator of @exp_count (kernel @k) where |s| <= 1e4 and params and table reads are within ±1e4: the kernel would return inf or NaN}}
    // expected-note @+1 {{bound the growth (tanh, a lower power, e^-|x|, e^min(x, c), a score mod <= 0), or write it as an exp factor e^x over a summed denominator, which the online algorithm rescales}}
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}
attn.kernel @k normalizer(@exp_count)
