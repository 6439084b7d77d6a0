// Luong et al. "concat" score: s = vᵀ tanh(W [q; k]) = vᵀ tanh(W_q q + W_k k),
// W = [W_q W_k] learnable [n x 2d], v learnable [n] (hidden n = 8, d = 16).
// W_q q and W_k k are computed once per call; every (i, j) then costs one
// n-length tanh-dot: O(N²·n), nothing N×N×n is stored.
attn.score @concat contract additive hidden 8 weights(W_q: 8x16 = identity, W_k: 8x16 = identity, v: 8 = 0.25)

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @luong_concat_attention normalizer(@softmax) score(@concat)
