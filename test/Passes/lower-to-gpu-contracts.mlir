// RUN: attn-opt %s --split-input-file --attn-lower-to-gpu -verify-diagnostics

// The GPU lowering reads what the earlier passes wrote, and says which pass is
// missing when it is not there.
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no algorithm: the kernel is not classified; run attn-classify-normalizer first}}
attn.kernel @k normalizer(@relu) {gpu_schedule = [#attn.gpu_schedule<type = f32, head_dim = 64, variant = simt>]}

// -----

// expected-error @+1 {{no attn.kernel has a gpu_schedule; run attn-select-gpu-schedule first}}
module {
  attn.normalizer @relu {
    numerator {
    ^bb0(%s: f32):
      attn.yield %s : f32
    }
    denominator count
  }
  attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>}
}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no scalar functions; run attn-derive-backward first}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, gpu_schedule = [#attn.gpu_schedule<type = f32, head_dim = 64, variant = simt>]}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has a tensor_core schedule for f32 storage; tensor cores take f16 or bf16}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, gpu_schedule = [#attn.gpu_schedule<type = f32, head_dim = 64, variant = tensor_core>]}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has a GPU schedule for 'f64'; CUDA kernels exist for f16, bf16 and f32 storage}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, gpu_schedule = [#attn.gpu_schedule<type = f64, head_dim = 64, variant = simt>]}
