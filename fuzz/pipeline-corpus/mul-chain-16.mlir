attn.normalizer @n {
 numerator {
 ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %c = arith.constant 1.0001 : f32
  %a0 = arith.mulf %s, %c : f32
  %a1 = arith.mulf %a0, %c : f32
  %a2 = arith.mulf %a1, %c : f32
  %a3 = arith.mulf %a2, %c : f32
  %a4 = arith.mulf %a3, %c : f32
  %a5 = arith.mulf %a4, %c : f32
  %a6 = arith.mulf %a5, %c : f32
  %a7 = arith.mulf %a6, %c : f32
  %a8 = arith.mulf %a7, %c : f32
  %a9 = arith.mulf %a8, %c : f32
  %a10 = arith.mulf %a9, %c : f32
  %a11 = arith.mulf %a10, %c : f32
  %a12 = arith.mulf %a11, %c : f32
  %a13 = arith.mulf %a12, %c : f32
  %a14 = arith.mulf %a13, %c : f32
  %a15 = arith.mulf %a14, %c : f32
  %e = math.exp %a15 : f32
  attn.yield %e : f32
 }
 denominator sum
}
attn.kernel @k normalizer(@n)
