// RUN: attn-opt %s --split-input-file --attn-verify -verify-diagnostics

// A module to compile holds at least one attn.kernel.
// expected-error @+1 {{no attn.kernel to compile: add one, e.g. 'attn.kernel @k normalizer(@softmax)'}}
module {
  attn.normalizer @relu {
    numerator {
    ^bb0(%s: f32):
      attn.yield %s : f32
    }
    denominator count
  }
}

// -----

// One kernel: nothing to say.
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k normalizer(@relu)
