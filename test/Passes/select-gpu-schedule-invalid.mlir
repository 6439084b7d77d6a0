// RUN: attn-opt %s --split-input-file --attn-select-gpu-schedule="head-dims=64,48" -verify-diagnostics
// RUN: not attn-opt %s --split-input-file --attn-select-gpu-schedule="element-types=f16,f64" 2>&1 | FileCheck %s --check-prefix=TYPE

// TYPE: error: unsupported GPU element type 'f64'; expected f32, f16 or bf16

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op head dim 48 is not supported on GPU; supported: 32, 64, 128}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>}

// -----

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
