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
// expected-error @+1 {{'attn.kernel' op has no CPU forward entry point on 'f32' (a func.func with #attn.entry<role = forward, type = 'f32'>); run attn-lower-to-loops first}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}

// -----

// A function named like an entry point is not one: the manifest writer finds entry
// points by their #attn.entry, and here the backward has none.
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no CPU backward entry point on 'f32'}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}
func.func @any_name(%q: memref<?x?xf32>) attributes {attn.entry = #attn.entry<role = forward, type = f32, kernel = @k>} {
  return
}
func.func @attn_backward_f32(%q: memref<?x?xf32>) {
  return
}

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
