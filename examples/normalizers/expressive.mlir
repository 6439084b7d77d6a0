// Expressive attention (Gros): s = (q·k)^2, w_ij = s_ij / (ε + Σ_j s_ij).
// Parallel and antiparallel q, k attend; orthogonal ones do not. ε keeps the
// denominator away from 0 when every q·k vanishes.
attn.score @squared_dot contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %sq = arith.mulf %s, %s : f32
  attn.yield %sq : f32
}

attn.normalizer @expressive {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator epsilon 1.0e-06 sum
}

attn.kernel @expressive_attention normalizer(@expressive) score(@squared_dot)
