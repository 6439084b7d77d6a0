// Luong et al. "general" score: s = q·W·k with a learnable W [d x d] (here d = 32),
// initialised to the identity (so training starts from the dot score). Lowered as
// q' = q·W once per call, then the dot kernel; dW = Σ_i q_iᵀ dq'_i.
attn.score @general contract bilinear weights(W: 32x32 = identity)

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @luong_general_attention normalizer(@softmax) score(@general)
