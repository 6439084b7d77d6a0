// RUN: attn-opt %s --split-input-file --attn-select-schedule -verify-diagnostics
// RUN: not attn-opt %s --split-input-file --attn-select-schedule="kernel=c" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not attn-opt %s --split-input-file --attn-select-schedule="element-types=f16" 2>&1 | FileCheck %s --check-prefix=TYPE
// RUN: not attn-opt %s --split-input-file --attn-select-schedule="vector-bits=128" 2>&1 | FileCheck %s --check-prefix=BITS

// MISSING: error: no attn.kernel named 'c'
// TYPE: error: unsupported element type 'f16'; expected f32 or f64
// BITS: error: vector-bits must be 256 or 512, got 128

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

// -----

// expected-error @+1 {{an artifact holds one kernel; this module has 2: choose one with kernel=<name>}}
module {
  attn.normalizer @relu {
    numerator {
    ^bb0(%s: f32):
      %zero = arith.constant 0.0 : f32
      %g = arith.maximumf %s, %zero : f32
      attn.yield %g : f32
    }
    denominator count
  }
  // expected-note @+1 {{candidate @a}}
  attn.kernel @a normalizer(@relu) {algorithm = #attn<algorithm plain>}
  // expected-note @+1 {{candidate @b}}
  attn.kernel @b normalizer(@relu) {algorithm = #attn<algorithm plain>}
}
