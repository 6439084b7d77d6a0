// Sigmoid attention: w_ij = sigmoid(s_ij + bias), no normalisation (C = 1).
// The bias is learnable; about -log(N) keeps early training close to softmax scale.
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

attn.kernel @sigmoid_attention normalizer(@sigmoid)
