// RUN: attn-opt %s --split-input-file --verify-diagnostics
//
// Regions hold side-effect-free scalar arith and math ops only. The first
// offending op is reported, naming the region and the op that owns it.

// A side-effecting op: memory allocation and a load.
attn.normalizer @loads {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c0 = arith.constant 0 : index
    // expected-error @+1 {{'memref.alloca' op has side effects, which are not allowed in the numerator region}}
    %m = memref.alloca() : memref<4xf32>
    %l = memref.load %m[%c0] : memref<4xf32>
    attn.yield %l : f32
  }
  denominator count
}

// -----

// A call, which may have any side effect.
func.func private @random() -> f32
attn.normalizer @calls {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %hx: index, %i: index, %j: index):
    // expected-error @+1 {{'func.call' op has side effects, which are not allowed in the denominator region}}
    %r = func.call @random() : () -> f32
    %h = arith.addf %s, %r : f32
    attn.yield %h : f32
  }
}

// -----

// Printing is a side effect too.
attn.score @prints contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  // expected-error @+1 {{'vector.print' op has side effects, which are not allowed in the mod region}}
  vector.print %s : f32
  attn.yield %s : f32
}

// -----

// Control flow: conditionals are written with arith.select.
attn.normalizer @branches {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %pos = arith.cmpf ogt, %s, %zero : f32
    // expected-error @+1 {{'scf.if' op is control flow, which is not allowed in the numerator region; use arith.select}}
    %g = scf.if %pos -> (f32) {
      %e = math.exp %s : f32
      scf.yield %e : f32
    } else {
      scf.yield %zero : f32
    }
    attn.yield %g : f32
  }
  denominator count
}

// -----

attn.mask @loops {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t = arith.constant true
  // expected-error @+1 {{'scf.for' op is control flow, which is not allowed in the mask region; use arith.select}}
  %r = scf.for %k = %c0 to %i step %c1 iter_args(%acc = %t) -> (i1) {
    scf.yield %acc : i1
  }
  attn.yield %r : i1
}

// -----

// Vector values, even produced by arith ops.
attn.normalizer @vectors {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'arith.constant' op uses 'vector<4xf32>' in the numerator region; only scalar values are allowed}}
    %v = arith.constant dense<1.0> : vector<4xf32>
    %w = arith.addf %v, %v : vector<4xf32>
    attn.yield %s : f32
  }
  denominator count
}

// -----

// The vector type is reported on operands as well as results.
attn.score @vector_feature contract dot feature {
^bb0(%x: f32):
  // expected-error @+1 {{'vector.broadcast' op is not allowed in the feature region of 'attn.score'}}
  %v = vector.broadcast %x : f32 to vector<8xf32>
  attn.yield %x : f32
}

// -----

attn.mask @tensor_mask {
^bb0(%b: index, %h: index, %i: index, %j: index):
  // expected-error @+1 {{'arith.constant' op uses 'tensor<2xi1>' in the mask region; only scalar values are allowed}}
  %t = arith.constant dense<true> : tensor<2xi1>
  %k = arith.constant true
  attn.yield %k : i1
}

// -----

attn.score @vector_math contract scaled_dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  // expected-error @+1 {{'arith.constant' op uses 'vector<2xf32>' in the mod region; only scalar values are allowed}}
  %v = arith.constant dense<[1.0, 2.0]> : vector<2xf32>
  %e = math.exp %v : vector<2xf32>
  attn.yield %s : f32
}

// -----

// Ops from other dialects that are pure scalar math are still refused.
attn.normalizer @index_dialect {
  numerator {
  ^bb0(%s: f32, %bx: index, %h: index, %i: index, %j: index):
    %a = arith.constant 1 : index
    // expected-error @+1 {{'index.add' op is not allowed in the numerator region of 'attn.normalizer'}}
    %b = index.add %a, %a
    attn.yield %s : f32
  }
  denominator count
}

// -----

// attn ops do not nest.
attn.normalizer @nested {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'attn.score' op is not allowed in the numerator region of 'attn.normalizer'}}
    attn.score @inner contract dot
    attn.yield %s : f32
  }
  denominator count
}

// -----

// Regions are isolated from above: values defined outside cannot be used.
%c = arith.constant 1.0 : f32
// expected-note @+1 {{required by region isolation constraints}}
attn.normalizer @captures {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'arith.addf' op using value defined outside the region}}
    %g = arith.addf %s, %c : f32
    attn.yield %g : f32
  }
  denominator count
}
