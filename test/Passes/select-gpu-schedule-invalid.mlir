// RUN: attn-opt %s --split-input-file --attn-select-gpu-schedule="head-dims=64,48" -verify-diagnostics
// RUN: not attn-opt %s --split-input-file --attn-select-gpu-schedule="element-types=f16,f64" 2>&1 | FileCheck %s --check-prefix=TYPE
// RUN: not attn-opt %s --split-input-file --attn-select-gpu-schedule="targets=sm_90,sm_75" 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not attn-opt %s --split-input-file --attn-select-gpu-schedule="targets=compute_90" 2>&1 | FileCheck %s --check-prefix=NAME

// TYPE: error: unsupported GPU element type 'f64'; expected f32, f16 or bf16
// TARGET: error: 'attn.kernel' op CUDA target 'sm_75' is not supported; expected sm_XY with XY >= 80 (sm_80, sm_90, ...)
// NAME: error: 'attn.kernel' op CUDA target 'compute_90' is not supported

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op head dim 48 is not supported on GPU; supported: 16, 32, 64, 96, 128, 256}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>}

// -----

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
