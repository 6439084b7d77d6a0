// RUN: attn-opt %s --split-input-file | FileCheck %s
// RUN: attn-opt %s --split-input-file > %t.1
// RUN: attn-opt %t.1 --split-input-file > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %s --split-input-file --mlir-print-op-generic | attn-opt --split-input-file > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %s --split-input-file --verify-roundtrip > /dev/null

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
attn.score @scaled contract scaled_dot scale 0.125
attn.mask @causal {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}

// Normalizer only: the default score q·k/sqrt(d), no mask.
// CHECK: attn.kernel @plain normalizer(@softmax){{$}}
attn.kernel @plain normalizer(@softmax)
// CHECK: attn.kernel @with_score normalizer(@softmax) score(@scaled){{$}}
attn.kernel @with_score normalizer(@softmax) score(@scaled)
// CHECK: attn.kernel @with_mask normalizer(@softmax) mask(@causal){{$}}
attn.kernel @with_mask normalizer(@softmax) mask(@causal)
// CHECK: attn.kernel @full normalizer(@softmax) score(@scaled) mask(@causal){{$}}
attn.kernel @full normalizer(@softmax) score(@scaled) mask(@causal)
// Several kernels may share one normalizer, and attributes survive.
// CHECK: attn.kernel @tagged normalizer(@softmax) mask(@causal) {note = "user"}{{$}}
attn.kernel @tagged normalizer(@softmax) mask(@causal) {note = "user"}

// -----

// A kernel may come before the ops it names. Score and normalizer params
// with different names combine.
// CHECK:       {{^//}} {{-+$}}
// CHECK-NEXT:  module {
// CHECK-NEXT:    attn.kernel @early normalizer(@sig) score(@biased) mask(@window){{$}}
// CHECK-NEXT:    attn.normalizer @sig params(bias = -4.0) {
// CHECK:         attn.score @biased contract dot params(slope = 1.0) mod {
// CHECK:         attn.mask @window {
attn.kernel @early normalizer(@sig) score(@biased) mask(@window)
attn.normalizer @sig params(bias = -4.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f32):
    %x = arith.addf %s, %bias : f32
    %t = math.tanh %x : f32
    attn.yield %t : f32
  }
  denominator constant 1.0
}
attn.score @biased contract dot params(slope = 1.0) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %slope: f32):
  %t = arith.mulf %s, %slope : f32
  attn.yield %t : f32
}
attn.mask @window {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi eq, %i, %j : index
  attn.yield %keep : i1
}

// -----

// A score without regions has no float type of its own and combines with a
// normalizer of any float type.
// CHECK: attn.kernel @f64_kernel normalizer(@f64_norm) score(@cos){{$}}
attn.normalizer @f64_norm {
  numerator {
  ^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f64
  }
  denominator count
}
attn.score @cos contract cosine
attn.kernel @f64_kernel normalizer(@f64_norm) score(@cos)

// -----

// Kernels in a nested module resolve symbols in that module.
// CHECK-LABEL: module @inner {
// CHECK:         attn.kernel @k normalizer(@n){{$}}
module @inner {
  attn.normalizer @n {
    numerator {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      attn.yield %s : f32
    }
    denominator count
  }
  attn.kernel @k normalizer(@n)
}

// -----

// Symbol names may use every character of an MLIR bare identifier ('$' and '.'
// too); quoted, they print bare (other names: names-invalid.mlir).
// CHECK-LABEL: attn.normalizer @_n.v2$x {
// CHECK:       attn.mask @m.1 {
// CHECK:       attn.kernel @k$1.b normalizer(@_n.v2$x) mask(@m.1){{$}}
attn.normalizer @"_n.v2$x" {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.mask @m.1 {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %t = arith.constant true
  attn.yield %t : i1
}
attn.kernel @"k$1.b" normalizer(@"_n.v2$x") mask(@m.1)
