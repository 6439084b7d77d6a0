// Bahdanau et al. additive attention: e_ij = vᵀ tanh(W_q s_i + W_k h_j) over the
// encoder states h_j, softmax over j. Learnable W_q, W_k [n x d] and v [n]
// (hidden n = 32, d = 32). Cost O(Nq·Nk·n) after the O((Nq + Nk)·n·d) projections.
attn.score @additive contract additive hidden 32 weights(W_q: 32x32 = identity, W_k: 32x32 = identity, v: 32 = 0.125)

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @bahdanau_attention normalizer(@softmax) score(@additive)
