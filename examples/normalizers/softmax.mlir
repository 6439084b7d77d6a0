// Softmax attention (Vaswani et al.): g(s) = e^s, C = Σ_j e^s, s = q·k/sqrt(d).
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @softmax_attention normalizer(@softmax)
