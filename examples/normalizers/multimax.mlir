// MultiMax (Zhou et al., ICML 2024), second order: softmax of the modulated score
//   σ(s) = s + Σ_{n=1,2} (1 - tb_n)·max(b_n - s, 0)^n + (td_n - 1)·max(s - d_n, 0)^n
// tb_n / td_n are learnable inverse temperatures below b_n / above d_n; with
// tb = td = 1 training starts from plain softmax. Each term is one fma onto σ.
attn.normalizer @multimax params(tb1 = 1.0, td1 = 1.0, b1 = -1.0, d1 = 1.0,
                                 tb2 = 1.0, td2 = 1.0, b2 = -2.0, d2 = 2.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
       %tb1: f32, %td1: f32, %b1: f32, %d1: f32, %tb2: f32, %td2: f32, %b2: f32, %d2: f32):
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %below1 = arith.subf %b1, %s : f32
    %below1p = arith.maximumf %below1, %zero : f32
    %ktb1 = arith.subf %one, %tb1 : f32
    %m1 = math.fma %ktb1, %below1p, %s : f32
    %above1 = arith.subf %s, %d1 : f32
    %above1p = arith.maximumf %above1, %zero : f32
    %ktd1 = arith.subf %td1, %one : f32
    %m2 = math.fma %ktd1, %above1p, %m1 : f32
    %below2 = arith.subf %b2, %s : f32
    %below2p = arith.maximumf %below2, %zero : f32
    %below2sq = arith.mulf %below2p, %below2p : f32
    %ktb2 = arith.subf %one, %tb2 : f32
    %m3 = math.fma %ktb2, %below2sq, %m2 : f32
    %above2 = arith.subf %s, %d2 : f32
    %above2p = arith.maximumf %above2, %zero : f32
    %above2sq = arith.mulf %above2p, %above2p : f32
    %ktd2 = arith.subf %td2, %one : f32
    %sigma = math.fma %ktd2, %above2sq, %m3 : f32
    %e = math.exp %sigma : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @multimax_attention normalizer(@multimax)
