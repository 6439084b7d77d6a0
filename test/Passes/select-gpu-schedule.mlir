// RUN: attn-opt %s --split-input-file --attn-select-gpu-schedule="head-dims=64" | FileCheck %s

// Tensor cores for bf16, and for f16 when the weights are bounded (online).
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
attn.kernel @k normalizer(@softmax) {algorithm = #attn<algorithm online>}

// CHECK: gpu_schedule = [#attn.gpu_schedule<type = f16, head_dim = 64, variant = tensor_core>, #attn.gpu_schedule<type = bf16, head_dim = 64, variant = tensor_core>, #attn.gpu_schedule<type = f32, head_dim = 64, variant = simt>]

// -----

// A plain normalizer's f16 weights could overflow: SIMT.
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>}

// CHECK: gpu_schedule = [#attn.gpu_schedule<type = f16, head_dim = 64, variant = simt>, #attn.gpu_schedule<type = bf16, head_dim = 64, variant = tensor_core>, #attn.gpu_schedule<type = f32, head_dim = 64, variant = simt>]
