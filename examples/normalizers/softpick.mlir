// Softpick (Zuhri et al., 2025), as the paper writes it:
//   w_ij = relu(e^s_ij − 1) / (ε + Σ_j |e^s_ij − 1|)
// Rectified (a key with s <= 0 gets weight exactly 0, so rows need not sum to 1 and
// no "attention sink" is forced). attn-classify-normalizer reads e^s − 1 as two exp
// factors, e^s − e^0, which max(·, 0) and |·| keep: online, stabilised by
// m = max(s, 0) per row, finite at any score. ε keeps C_i from 0 where every
// s_ij = 0 (without it, compilation stops: the denominator can vanish).
attn.normalizer @softpick {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %d = math.expm1 %s : f32
    %r = arith.maximumf %d, %zero : f32
    attn.yield %r : f32
  }
  denominator epsilon 1.0e-06 {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %e = math.exp %s : f32
    %d = arith.subf %e, %one : f32
    %a = math.absf %d : f32
    attn.yield %a : f32
  }
}

attn.kernel @softpick_attention normalizer(@softpick)
