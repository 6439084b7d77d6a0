// RUN: attn-opt %s --split-input-file --allow-unregistered-dialect --verify-diagnostics
//
// Ops of unregistered dialects are refused like any other non-arith/math op.

attn.normalizer @unregistered {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'foo.bar' op is not allowed in the numerator region of 'attn.normalizer': regions hold scalar arith and math ops and attn.read only}}
    %g = "foo.bar"(%s) : (f32) -> f32
    attn.yield %g : f32
  }
  denominator count
}

// -----

attn.mask @unregistered_mask {
^bb0(%b: index, %h: index, %i: index, %j: index):
  // expected-error @+1 {{'test.keep' op is not allowed in the mask region of 'attn.mask'}}
  %k = "test.keep"(%i, %j) : (index, index) -> i1
  attn.yield %k : i1
}
