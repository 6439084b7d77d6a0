// RUN: attn-opt %s --split-input-file --verify-diagnostics
//
// Normalizers, scores, masks and kernels share the module's symbol table.

// expected-note @+1 {{see existing symbol definition here}}
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
// expected-error @+1 {{redefinition of symbol named 'softmax'}}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-note @+1 {{see existing symbol definition here}}
attn.score @x contract dot
// expected-error @+1 {{redefinition of symbol named 'x'}}
attn.mask @x {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %t = arith.constant true
  attn.yield %t : i1
}

// -----

attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-note @+1 {{see existing symbol definition here}}
attn.kernel @k normalizer(@n)
// expected-error @+1 {{redefinition of symbol named 'k'}}
attn.kernel @k normalizer(@n)

// -----

// expected-note @+1 {{see existing symbol definition here}}
func.func @clash() {
  return
}
// expected-error @+1 {{redefinition of symbol named 'clash'}}
attn.score @clash contract cosine
