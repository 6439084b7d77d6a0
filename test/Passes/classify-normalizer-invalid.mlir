// RUN: attn-opt %s --split-input-file --attn-classify-normalizer -verify-diagnostics

attn.normalizer @shifted_exp {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %e = math.exp %s : f32
    // expected-error @+2 {{'arith.addf' op in the numerator of @shifted_exp mixes exp-factor degrees}}
    // expected-note @+1 {{stable rewrite: e^x + c cannot be rescaled by a running max: a constant added to the denominator's sum is `epsilon c` (C_i = c + Σ_j h), and the sigmoid e^x / (1 + e^x) is bounded written as 1 / (1 + e^(-x))}}
    %g = arith.addf %e, %one : f32
    attn.yield %g : f32
  }
  denominator count
}

// -----

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

attn.normalizer @squared_exp {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    // expected-error @+2 {{'arith.mulf' op in the numerator of @squared_exp mixes exp-factor degrees}}
    // expected-note @+1 {{stable rewrite: e^a·e^b is e^(a + b): write one math.exp of the sum}}
    %g = arith.mulf %e, %e : f32
    attn.yield %g : f32
  }
  denominator count
}

// -----

attn.normalizer @log_of_exp {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    // expected-error @+2 {{'math.log' op in the numerator of @log_of_exp mixes exp-factor degrees}}
    // expected-note @+1 {{stable rewrite: log(e^x) is x: use x itself}}
    %g = math.log %e : f32
    attn.yield %g : f32
  }
  denominator count
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

attn.normalizer @mixed_offset {
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
    %e = math.exp %one : f32
    // expected-error @+2 {{'arith.addf' op in the offset of @mixed_offset mixes exp-factor degrees (e.g. e^x + 1, e^(e^x)); a row offset is one exp factor or has none}}
    // expected-note @+1 {{stable rewrite: write β as one exp factor e^y: c + e^x is e^y with y = log(c + e^x) = max(x, log c) + log1p(e^(-|x - log c|)), which is bounded and accepted}}
    %x = arith.addf %e, %one : f32
    attn.yield %x : f32
  }
}

// -----

// Softplus as log(1 + e^s) overflows for large s: the note gives the bounded form.
attn.normalizer @naive_softplus {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %e = math.exp %s : f32
    // expected-error @+2 {{'arith.addf' op in the numerator of @naive_softplus mixes exp-factor degrees}}
    // expected-note @+1 {{stable rewrite: log(1 + e^x) is softplus, which overflows for large x as written: write max(x, 0) + log1p(e^(-|x|)) (arith.maximumf, math.absf, arith.negf, math.exp, math.log1p), which is bounded and accepted}}
    %t = arith.addf %one, %e : f32
    %g = math.log %t : f32
    attn.yield %g : f32
  }
  denominator count
}

// -----

attn.normalizer @log1p_softplus {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    // expected-error @+2 {{'math.log1p' op in the numerator of @log1p_softplus mixes exp-factor degrees}}
    // expected-note @+1 {{stable rewrite: log(1 + e^x) is softplus}}
    %g = math.log1p %e : f32
    attn.yield %g : f32
  }
  denominator count
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
