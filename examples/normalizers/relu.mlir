// ReLU attention: g(s) = max(s, 0), divided by the number of unmasked keys.
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}

attn.kernel @relu_attention normalizer(@relu)
