// Sigsoftmax (Kanai et al.): g(s) = e^s·sigmoid(s), C = Σ_j e^s·sigmoid(s).
attn.normalizer @sigsoftmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %e = math.exp %s : f32
    %ns = arith.negf %s : f32
    %en = math.exp %ns : f32
    %den = arith.addf %one, %en : f32
    %sig = arith.divf %one, %den : f32
    %g = arith.mulf %e, %sig : f32
    attn.yield %g : f32
  }
  denominator sum
}

attn.kernel @sigsoftmax_attention normalizer(@sigsoftmax)
