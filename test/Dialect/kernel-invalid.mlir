// RUN: attn-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{'attn.kernel' op normalizer @missing does not name any symbol}}
attn.kernel @k normalizer(@missing)

// -----

attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op score @missing does not name any symbol}}
attn.kernel @k normalizer(@n) score(@missing)

// -----

attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op mask @missing does not name any symbol}}
attn.kernel @k normalizer(@n) mask(@missing)

// -----

// Symbols in a nested module are not visible from outside it.
module @inner {
  attn.normalizer @hidden {
    numerator {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      attn.yield %s : f32
    }
    denominator count
  }
}
// expected-error @+1 {{'attn.kernel' op normalizer @hidden does not name any symbol}}
attn.kernel @k normalizer(@hidden)

// -----

attn.score @s contract dot
// expected-error @+1 {{'attn.kernel' op normalizer @s must name an 'attn.normalizer', but names a 'attn.score'}}
attn.kernel @k normalizer(@s)

// -----

attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op score @n must name an 'attn.score', but names a 'attn.normalizer'}}
attn.kernel @k normalizer(@n) score(@n)

// -----

attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.score @s contract dot
// expected-error @+1 {{'attn.kernel' op mask @s must name an 'attn.mask', but names a 'attn.score'}}
attn.kernel @k normalizer(@n) mask(@s)

// -----

func.func @f() {
  return
}
// expected-error @+1 {{'attn.kernel' op normalizer @f must name an 'attn.normalizer', but names a 'func.func'}}
attn.kernel @k normalizer(@f)

// -----

// A kernel cannot name another kernel.
attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k1 normalizer(@n)
// expected-error @+1 {{'attn.kernel' op mask @k1 must name an 'attn.mask', but names a 'attn.kernel'}}
attn.kernel @k2 normalizer(@n) mask(@k1)

// -----

// Score and normalizer compute in the same float type.
attn.normalizer @n32 {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.score @s64 contract dot mod {
^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index):
  attn.yield %s : f64
}
// expected-error @+1 {{'attn.kernel' op score @s64 computes in 'f64' but normalizer @n32 in 'f32'}}
attn.kernel @k normalizer(@n32) score(@s64)

// -----

// The score's type comes from its feature region when it has no mod region.
attn.normalizer @n32 {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.score @phi16 contract dot feature {
^bb0(%x: f16):
  attn.yield %x : f16
}
// expected-error @+1 {{'attn.kernel' op score @phi16 computes in 'f16' but normalizer @n32 in 'f32'}}
attn.kernel @k normalizer(@n32) score(@phi16)

// -----

// The kernel's params are the normalizer's followed by the score's: the
// names must not clash.
attn.normalizer @n params(bias = 0.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f32):
    attn.yield %s : f32
  }
  denominator constant 1.0
}
attn.score @s contract dot params(scale2 = 1.0, bias = 1.0) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %scale2: f32, %bias: f32):
  attn.yield %s : f32
}
// expected-error @+1 {{'attn.kernel' op param 'bias' is declared by both score @s and normalizer @n}}
attn.kernel @k normalizer(@n) score(@s)

// -----

// The normalizer is required.
// expected-error @+1 {{expected 'normalizer'}}
attn.kernel @k score(@s)

// -----

// Score and mask come in this order.
attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.score @s contract dot
attn.mask @m {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %t = arith.constant true
  attn.yield %t : i1
}
// expected-error @+1 {{custom op 'score' is unknown}}
attn.kernel @k normalizer(@n) mask(@m) score(@s)

// -----

attn.normalizer @n params(W = 1.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %W: f32):
    attn.yield %s : f32
  }
  denominator constant 1.0
}
attn.score @general contract bilinear weights(W: 4x4 = identity)
// expected-error @+1 {{'attn.kernel' op param 'W' is declared by both score @general and normalizer @n}}
attn.kernel @k normalizer(@n) score(@general)
