// α-entmax with a learnable α (Correia et al., 2019): w_ij = [(α - 1)(s_ij - τ_i)]_+^(1/(α - 1)),
// τ_i the threshold at which the row's weights sum to 1. α = 2 is sparsemax, α → 1
// softmax; α gets its gradient by implicit differentiation like the scores. The
// select keeps x <= 0 at exactly 0 for every α (and the derivative by α, which
// has log((α - 1)x), out of the keys below τ_i).
attn.normalizer @entmax_alpha params(alpha = 1.5) {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %alpha: f32):
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %am1 = arith.subf %alpha, %one : f32
    %base = arith.mulf %am1, %x : f32
    %exponent = arith.divf %one, %am1 : f32
    %power = math.powf %base, %exponent : f32
    %above = arith.cmpf ogt, %x, %zero : f32
    %g = arith.select %above, %power, %zero : f32
    attn.yield %g : f32
  }
  denominator threshold 1.0
}

attn.kernel @entmax_alpha_attention normalizer(@entmax_alpha)
