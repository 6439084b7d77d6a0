// RUN: attn-opt %s --split-input-file --attn-triton -verify-diagnostics -o /dev/null
// RUN: not attn-opt %s --split-input-file --attn-classify-normalizer --attn-emit-triton -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNDERIVED
//
// What the Triton emitter does not cover yet is refused by name.

// The kernelised (linear-time) form.
attn.score @elu_feature contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = math.exp %x : f32
  %neg = arith.cmpf olt, %x, %zero : f32
  %xp1 = arith.addf %x, %one : f32
  %phi = arith.select %neg, %e, %xp1 : f32
  attn.yield %phi : f32
}
attn.normalizer @linear {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator epsilon 1.0e-06 sum
}
// expected-error @+1 {{uses the kernelised (linear-time) form, which the Triton emitter does not cover yet}}
attn.kernel @linear_attention normalizer(@linear) score(@elu_feature)

// -----

// An op of two results (no single Triton expression).
attn.mask @sine_sign {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %i64 = arith.index_cast %i : index to i64
  %x = arith.sitofp %i64 : i64 to f32
  // expected-error @+1 {{'math.sincos' op is not supported by the Triton emitter yet}}
  %sin, %cos = math.sincos %x : f32
  %zero = arith.constant 0.0 : f32
  %keep = arith.cmpf oge, %sin, %zero : f32
  attn.yield %keep : i1
}
attn.normalizer @arctan {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.atan %s : f32
    attn.yield %e : f32
  }
  denominator constant 1.0
}
attn.kernel @k normalizer(@arctan) mask(@sine_sign)

// -----

// An integer width Triton does not have (and likewise a float type such as f8E4M3FN).
attn.mask @three_bits {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %i64 = arith.index_cast %i : index to i64
  // expected-error @+1 {{'arith.trunci' op computes in a type Triton does not have (it has i1, i8, i16, i32, i64, index, f16, bf16, f32 and f64)}}
  %low = arith.trunci %i64 : i64 to i3
  %back = arith.extsi %low : i3 to i32
  %zero = arith.constant 0 : i32
  %keep = arith.cmpi ne, %back, %zero : i32
  attn.yield %keep : i1
}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @k normalizer(@softmax) mask(@three_bits)

// UNDERIVED: error: 'attn.kernel' op has no scalar functions; run attn-derive-backward first

// -----

// A float type Triton does not compute in.
attn.mask @eighth_precision {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %i64 = arith.index_cast %i : index to i64
  // expected-error @+1 {{'arith.sitofp' op computes in a type Triton does not have (it has i1, i8, i16, i32, i64, index, f16, bf16, f32 and f64)}}
  %x = arith.sitofp %i64 : i64 to f8E4M3FN
  %wide = arith.extf %x : f8E4M3FN to f32
  %zero = arith.constant 0.0 : f32
  %keep = arith.cmpf oge, %wide, %zero : f32
  attn.yield %keep : i1
}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @k normalizer(@softmax) mask(@eighth_precision)
