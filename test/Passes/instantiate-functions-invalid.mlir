// RUN: attn-opt %s --split-input-file --attn-instantiate-functions -verify-diagnostics

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no scalar functions; run attn-derive-backward first}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f64, variant = generic>]}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no 'f32' scalar functions of its own to instantiate from}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, functions = [#attn.functions<type = f64, numerator = @g, numerator_ds = @g>], cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}
func.func private @g(%s: f64, %m: f64) -> f64 {
  return %s : f64
}
