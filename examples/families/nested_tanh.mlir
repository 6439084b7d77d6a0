// A learnable projection before an elementwise feature map (nested attention's
// φ(x) = tanh(W x)): s = tanh(W q)·tanh(W k) with W [m x d] learnable (m = 32,
// d = 16), softmax over keys. W q and W k are computed once per call; the tiled
// kernels run on them (m = 32) and dW collects both sides' chain rule.
attn.score @nested contract dot weights(W: 32x16 = identity) feature {
^bb0(%x: f32):
  %t = math.tanh %x : f32
  attn.yield %t : f32
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @nested_tanh_attention normalizer(@softmax) score(@nested)
