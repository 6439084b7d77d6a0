// RUN: attn-opt %s --split-input-file --attn-classify-normalizer -verify-diagnostics
//
// What a scan normalizer (`denominator log_survival`) cannot take: exp factors
// (nothing rescales a scan's weights) and a log-survival that can be > 0.

attn.normalizer @exp_numerator {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    // expected-error @+2 {{'attn.yield' op yields an exp factor in the numerator of @exp_numerator, a scan normalizer: nothing rescales a scan's weights, so e^s would overflow}}
    // expected-note @+1 {{stable rewrite: stick-breaking's numerator is σ(s) = 1 / (1 + e^-s) and its log-survival log(1 − σ(s)) = −softplus(s) = −max(s, 0) − log1p(e^-|s|)}}
    attn.yield %e : f32
  }
  denominator log_survival {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %a = math.absf %s : f32
    %d = arith.negf %a : f32
    attn.yield %d : f32
  }
}

// -----

attn.normalizer @exp_survival {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator log_survival {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    %d = arith.negf %e : f32
    // expected-error @+2 {{'attn.yield' op yields an exp factor in the log_survival of @exp_survival, a scan normalizer}}
    // expected-note @+1 {{stable rewrite}}
    attn.yield %d : f32
  }
}

// -----

attn.normalizer @mixed_survival {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator log_survival {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    // expected-error @+2 {{'arith.addf' op in the log_survival of @mixed_survival mixes exp-factor degrees}}
    // expected-note @+1 {{stable rewrite: e^x + y with a y that is not a constant}}
    %x = arith.addf %e, %s : f32
    attn.yield %x : f32
  }
}

// -----

// softplus without its sign: a survival above 1.
attn.normalizer @positive_survival {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator log_survival {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %pos = arith.maximumf %s, %zero : f32
    %abs = math.absf %s : f32
    %nabs = arith.negf %abs : f32
    %e = math.exp %nabs : f32
    %l = math.log1p %e : f32
    %softplus = arith.addf %pos, %l : f32
    // expected-error @+2 {{'attn.yield' op yields a log-survival of @positive_survival that is}}
    // expected-note @+1 {{stick-breaking's is log(1 − σ(s)) = −softplus(s) = −max(s, 0) − log1p(e^-|s|)}}
    attn.yield %softplus : f32
  }
}
attn.kernel @k normalizer(@positive_survival)
