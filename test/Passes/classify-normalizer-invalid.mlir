// RUN: attn-opt %s --split-input-file --attn-classify-normalizer -verify-diagnostics

attn.normalizer @shifted_exp {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %e = math.exp %s : f32
    // expected-error @+1 {{'arith.addf' op in the numerator of @shifted_exp mixes exp-factor degrees}}
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
    // expected-error @+1 {{'math.exp' op in the denominator of @nested_exp mixes exp-factor degrees}}
    %ee = math.exp %e : f32
    attn.yield %ee : f32
  }
}

// -----

attn.normalizer @squared_exp {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    // expected-error @+1 {{'arith.mulf' op in the numerator of @squared_exp mixes exp-factor degrees}}
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
    // expected-error @+1 {{'math.log' op in the numerator of @log_of_exp mixes exp-factor degrees}}
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
    // expected-error @+1 {{'attn.yield' op yields a value without an exp factor while the numerator of @unbalanced has one in every term}}
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
    // expected-error @+1 {{'arith.cmpf' op in the numerator of @compare_exp mixes exp-factor degrees}}
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
    // expected-error @+1 {{'attn.yield' op yields a value without an exp factor in the offset of @softmax_plus_linear, an online normalizer: its offset must be one exp factor e^x or a positive constant, so that its exponent joins the running max}}
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
    // expected-error @+1 {{'attn.yield' op yields a value without an exp factor in the offset of @negative_constant, an online normalizer}}
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
    // expected-error @+1 {{'attn.yield' op yields an exp factor in the offset of @plain_with_exp, whose numerator and denominator have none: a plain normalizer does not stabilise, so its offset must not have one either}}
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
    // expected-error @+1 {{'arith.addf' op in the offset of @mixed_offset mixes exp-factor degrees (e.g. e^x + 1, e^(e^x)); a row offset is one exp factor or has none}}
    %x = arith.addf %e, %one : f32
    attn.yield %x : f32
  }
}
