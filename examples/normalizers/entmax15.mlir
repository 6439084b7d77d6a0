// 1.5-entmax (Peters et al., 2019): w_ij = (max(s_ij - τ_i, 0) / 2)^2, α-entmax's
// g(x) = [(α - 1)·x]_+^(1/(α - 1)) at α = 1.5, with τ_i the threshold at which the
// row's weights sum to 1: sparse like sparsemax, smooth like softmax near the top.
attn.normalizer @entmax15 {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %half = arith.constant 0.5 : f32
    %above = arith.maximumf %x, %zero : f32
    %t = arith.mulf %above, %half : f32
    %g = arith.mulf %t, %t : f32
    attn.yield %g : f32
  }
  denominator threshold 1.0
}

attn.kernel @entmax15_attention normalizer(@entmax15)
