// Softplus-normalised attention: w_ij = softplus(s_ij) / Σ_j softplus(s_ij), with
// softplus(s) = log(1 + e^s) written in its overflow-free form max(s, 0) + log1p(e^-|s|).
// e^-|s| is in (0, 1] at any scale (its argument is <= 0), so the classifier reads it as
// bounded: numerator and denominator have no exp factor and accumulate as written
// (plain). Written as log(1 + e^s) it is rejected, with a note giving this form.
attn.normalizer @softplus {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %positive = arith.maximumf %s, %zero : f32
    %magnitude = math.absf %s : f32
    %minus = arith.negf %magnitude : f32
    %decay = math.exp %minus : f32
    %tail = math.log1p %decay : f32
    %g = arith.addf %positive, %tail : f32
    attn.yield %g : f32
  }
  denominator sum
}

attn.kernel @softplus_attention normalizer(@softplus)
