// Luong et al. "dot" score: s = q·k (no scale), softmax over the source positions.
attn.score @dot contract dot

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @luong_dot_attention normalizer(@softmax) score(@dot)
