// softmax1 (Miller, "Attention is off by one", 2023): C_i = 1 + Σ_j e^s, as if every row
// had one more key of score 0 and value 0, so a row can attend to (almost) nothing.
// The 1 is a constant row offset (`epsilon 1.0`): online, its exponent log 1 = 0 joins the
// running max, so C_i·e^-m = e^-m + Σ_j e^(s-m) stays in range for any scores.
attn.normalizer @softmax1 {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator epsilon 1.0 sum
}

attn.kernel @softmax1_attention normalizer(@softmax1)
