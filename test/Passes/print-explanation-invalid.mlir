// RUN: attn-opt %s --split-input-file --attn-print-explanation -verify-diagnostics

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no algorithm: the kernel is not classified; run attn-classify-normalizer first}}
attn.kernel @k normalizer(@softmax)

// -----

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no derived functions to explain; run attn-derive-backward first (attn-opt --attn-explain does)}}
attn.kernel @k normalizer(@softmax) {algorithm = #attn<algorithm plain>}
