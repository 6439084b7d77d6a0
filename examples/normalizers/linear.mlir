// Linear attention (Katharopoulos et al.): s = φ(q)·φ(k) with φ(x) = elu(x) + 1,
// w_ij = s_ij / (ε + Σ_j s_ij). φ > 0 keeps every weight positive.
attn.score @elu_feature contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = math.exp %x : f32
  %neg = arith.cmpf olt, %x, %zero : f32
  %xp1 = arith.addf %x, %one : f32
  %phi = arith.select %neg, %e, %xp1 : f32
  attn.yield %phi : f32
}

attn.normalizer @linear {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator epsilon 1.0e-06 sum
}

attn.kernel @linear_attention normalizer(@linear) score(@elu_feature)
