// RUN: attn-opt %s --split-input-file --attn-derive-backward -verify-diagnostics

// math.cbrt is a valid region op but has no derivative rule yet.
attn.normalizer @cube_root {
  numerator {
  ^bb0(%s: f32):
    // expected-error @+1 {{'math.cbrt' op has no derivative rule}}
    %g = math.cbrt %s : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @k normalizer(@cube_root) {algorithm = #attn<algorithm plain>}

// -----

// The stabilisation depends on the algorithm, which only the classifier sets.
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no algorithm: the kernel is not classified; run attn-classify-normalizer first}}
attn.kernel @k normalizer(@relu)
