// RUN: attn-opt %s --split-input-file --attn-emit-manifest -verify-diagnostics

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no algorithm: the kernel is not classified; run attn-classify-normalizer first}}
attn.kernel @k normalizer(@relu) {cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no CPU entry point attn_forward_f32; run attn-lower-to-loops first}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}

// -----

// expected-error @+1 {{the module already has a manifest (@attn_manifest); an artifact holds one}}
module {
  attn.normalizer @relu {
    numerator {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      attn.yield %s : f32
    }
    denominator count
  }
  attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}
  llvm.func @attn_manifest() -> !llvm.ptr
}
