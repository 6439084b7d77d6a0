// Cosine attention: s = scale · q·k / (|q|_ε |k|_ε), softmax over keys.
// |x|_ε = sqrt(x·x + ε²) with ε = 1e-6, so a zero q or k row scores 0 (no 0/0)
// and its gradient stays finite. scale = 1/τ sharpens the bounded cosine.
attn.score @cosine contract cosine scale 5.0

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @cosine_attention normalizer(@softmax) score(@cosine)
