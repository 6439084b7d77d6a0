// RUN: attn-opt %s --split-input-file --attn-derive-backward -verify-diagnostics

// math.cbrt is a valid region op but has no derivative rule yet.
attn.normalizer @cube_root {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+2 {{'math.cbrt' op has no derivative rule}}
    // expected-note @+1 {{differentiable rewrite: x^(1/3) is math.powf(x, 0.3333333) for x > 0; for any sign, copysign(powf(|x|, 1/3), x) as select(x < 0, -p, p)}}
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
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no algorithm: the kernel is not classified; run attn-classify-normalizer first}}
attn.kernel @k normalizer(@relu)

// -----

// tan has no rule; the note writes it with ops that have one.
attn.normalizer @tangent {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+2 {{'math.tan' op has no derivative rule}}
    // expected-note @+1 {{differentiable rewrite: tan(x) is math.sin(x) / math.cos(x)}}
    %g = math.tan %s : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @k normalizer(@tangent) {algorithm = #attn<algorithm plain>}

// -----

// expected-error @+1 {{'attn.normalizer' op is written with a shared region, which this pass does not read; run attn-expand-shared-regions first}}
attn.normalizer @shared {
  shared {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    attn.yield %zero : f32
  }
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %zero: f32):
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @k normalizer(@shared) {algorithm = #attn<algorithm plain>}
