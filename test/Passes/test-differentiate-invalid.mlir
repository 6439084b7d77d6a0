// RUN: attn-opt %s --attn-test-differentiate -verify-diagnostics

func.func @cube_root(%x: f32) -> f32 {
  // expected-error @+2 {{'math.cbrt' op has no derivative rule}}
  // expected-note @+1 {{differentiable rewrite: x^(1/3) is math.powf(x, 0.3333333) for x > 0; for any sign, copysign(powf(|x|, 1/3), x) as select(x < 0, -p, p)}}
  %r = math.cbrt %x : f32
  return %r : f32
}
