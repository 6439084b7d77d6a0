// Linear attention with ReLU features: s = relu(q)·relu(k),
// w_ij = s_ij / (ε + Σ_j s_ij). A row whose features are all zero gets
// C = ε and O = 0. Kernelised (O(N·d²)).
attn.score @relu_feature contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %r = arith.maximumf %x, %zero : f32
  attn.yield %r : f32
}

attn.normalizer @linear {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator epsilon 1.0e-06 sum
}

attn.kernel @relu_kernel_attention normalizer(@linear) score(@relu_feature)
