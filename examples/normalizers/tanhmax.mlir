// TanhMax (Huang et al., bidirectional attention): weights in (-1, 1),
//   g(s) = e^s - e^-s,  C = Σ_j (e^s + e^-s),  s = q·k/sqrt(d); e^±s shared by both.
attn.normalizer @tanhmax {
  shared {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %pos = math.exp %s : f32
    %ns = arith.negf %s : f32
    %neg = math.exp %ns : f32
    attn.yield %pos, %neg : f32, f32
  }
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %pos: f32, %neg: f32):
    %g = arith.subf %pos, %neg : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %pos: f32, %neg: f32):
    %weight = arith.addf %pos, %neg : f32
    attn.yield %weight : f32
  }
}

attn.kernel @tanhmax_attention normalizer(@tanhmax)
