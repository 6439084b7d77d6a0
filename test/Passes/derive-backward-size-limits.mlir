// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-derive-backward="inline-op-limit=10" | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-derive-backward="max-function-ops=40" -verify-diagnostics

// Functions larger than inline-op-limit are no_inline (the loops call them, so
// code grows with region size, not region size × call sites); small ones are
// left to the inliner. With the default limit nothing here is large.
// Past max-function-ops in all, the pass stops with a diagnostic.
attn.normalizer @tanhmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %g = arith.subf %p, %n : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %sum = arith.addf %p, %n : f32
    attn.yield %sum : f32
  }
}
// expected-error @+1 {{'attn.kernel' op needs 53 ops in its scalar functions and their derivatives, over the limit of 40 (docs/architecture.md, Compile time); shorten the regions, share subexpressions between them, or declare fewer params}}
attn.kernel @k normalizer(@tanhmax)

// Of 9 ops with the func: inlined.
// CHECK-LABEL: func.func private @k.num(
// CHECK-SAME: -> f32 {
// Of 12 and 13: called.
// CHECK-LABEL: func.func private @k.num.d.s(
// CHECK-SAME: -> f32 attributes {no_inline} {
// CHECK-LABEL: func.func private @k.stab(
// CHECK-SAME: -> f32 attributes {no_inline} {
