// Numbers the printer must write so that they read back the same: tiny, huge,
// negative zero, many digits, hexadecimal bit patterns (NaN inside a region).
attn.normalizer @n params(a = 1.0e-300, b = -0.0, c = 1.7976931348623157e+308, d = 0.1, e = 4.9e-324) {
  numerator {
  ^bb0(%s: f64, %a: f64, %b: f64, %c: f64, %d: f64, %e: f64):
    %q = arith.constant 0x7FF8000000000000 : f64
    %r = arith.constant 0.30000000000000004 : f64
    %x = arith.maximumf %s, %r : f64
    attn.yield %x : f64
  }
  denominator constant -2.5e-07
}
attn.score @w contract bilinear scale 0.125 weights(W: 4x4 = -0.5)
attn.score @v contract additive hidden 3 weights(W_q: 3x4 = identity, W_k: 3x4 = 1.0e+10, v: 3 = 1.5)
attn.kernel @k normalizer(@n) score(@w)
