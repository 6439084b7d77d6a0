// Sparsemax (Martins & Astudillo, 2016): w_ij = max(s_ij - τ_i, 0) with τ_i the
// threshold at which the row's weights sum to 1: the Euclidean projection of the
// scores onto the simplex, exactly 0 for keys below τ_i. `denominator threshold
// 1.0` declares the constraint Σ_j g(s_ij - τ_i) = 1 (docs/normalizer-classes.md).
attn.normalizer @sparsemax {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %x, %zero : f32
    attn.yield %g : f32
  }
  denominator threshold 1.0
}

attn.kernel @sparsemax_attention normalizer(@sparsemax)
