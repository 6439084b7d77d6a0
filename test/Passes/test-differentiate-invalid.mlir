// RUN: attn-opt %s --attn-test-differentiate -verify-diagnostics

func.func @cube_root(%x: f32) -> f32 {
  // expected-error @+1 {{'math.cbrt' op has no derivative rule}}
  %r = math.cbrt %x : f32
  return %r : f32
}
