// RUN: attn-opt %s --split-input-file --attn-emit-manifest -verify-diagnostics

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no algorithm: the kernel is not classified; run attn-classify-normalizer first}}
attn.kernel @k normalizer(@relu) {cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no CPU entry point attn_forward_f32; run attn-lower-to-loops first}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has a gpu_schedule but the module has no gpu.module @attn_cuda; run attn-lower-to-gpu first}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>], gpu_schedule = [#attn.gpu_schedule<type = f32, head_dim = 64, variant = simt>]}
func.func @attn_forward_f32() {
  return
}
func.func @attn_backward_f32() {
  return
}

// -----

// expected-error @+1 {{the module already has a manifest (@attn_manifest); an artifact holds one}}
module {
  attn.normalizer @relu {
    numerator {
    ^bb0(%s: f32):
      attn.yield %s : f32
    }
    denominator count
  }
  attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}
  llvm.func @attn_manifest() -> !llvm.ptr
}
