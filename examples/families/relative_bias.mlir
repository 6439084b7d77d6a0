// Learned relative position bias (Shaw et al.; T5-style buckets): s = q·k/sqrt(d)
// + b[clip(j - i, -2, 2)], five learnable scalars, one per relative-offset bucket.
attn.score @relative_bias contract scaled_dot
    params(b_m2 = 0.0, b_m1 = 0.0, b_0 = 0.0, b_p1 = 0.0, b_p2 = 0.0) mod {
^bb0(%s: f32, %b: index, %h: index,
     %i: index, %j: index, %b_m2: f32, %b_m1: f32, %b_0: f32, %b_p1: f32, %b_p2: f32):
  %offset = arith.subi %j, %i : index
  %m1 = arith.constant -1 : index
  %zero = arith.constant 0 : index
  %p1 = arith.constant 1 : index
  %below = arith.cmpi slt, %offset, %m1 : index
  %is_m1 = arith.cmpi eq, %offset, %m1 : index
  %is_0 = arith.cmpi eq, %offset, %zero : index
  %is_p1 = arith.cmpi eq, %offset, %p1 : index
  %far = arith.select %below, %b_m2, %b_p2 : f32
  %near_p1 = arith.select %is_p1, %b_p1, %far : f32
  %near_0 = arith.select %is_0, %b_0, %near_p1 : f32
  %bias = arith.select %is_m1, %b_m1, %near_0 : f32
  %biased = arith.addf %s, %bias : f32
  attn.yield %biased : f32
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @relative_bias_attention normalizer(@softmax) score(@relative_bias)
