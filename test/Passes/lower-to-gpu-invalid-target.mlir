// RUN: attn-opt %s --attn-classify-normalizer --attn-derive-backward --attn-select-gpu-schedule="head-dims=64" --attn-instantiate-functions --attn-lower-to-gpu="targets=sm_90,sm_75" -verify-diagnostics
// RUN: not attn-opt %s --attn-classify-normalizer --attn-derive-backward --attn-select-gpu-schedule="head-dims=64" --attn-instantiate-functions --attn-lower-to-gpu="targets=gfx90a" 2>&1 | FileCheck %s

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op CUDA target 'sm_75' is not supported; expected sm_XY with XY >= 80 (sm_80, sm_90, ...)}}
attn.kernel @k normalizer(@relu)
// CHECK: error: 'attn.kernel' op CUDA target 'gfx90a' is not supported; expected sm_XY with XY >= 80
