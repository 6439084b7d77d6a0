// RUN: attn-opt %s --split-input-file --verify-diagnostics
//
// Every name ends up in the artifact's manifest, whitespace-separated tokens read by
// the runtime: symbols must be MLIR bare identifiers (which the printer writes
// unquoted) and params, weights and tensor inputs identifiers of letters, digits and
// '_' (also the keys of attn.Kernel.param_names and nn.ParameterDict). Quoted names
// with spaces, '=', newlines or non-ASCII bytes, and the empty symbol, are refused.

// expected-error @+1 {{'attn.normalizer' op symbol name "" cannot be written into the artifact's manifest; expected a letter or '_' followed by letters, digits, '_', '$' or '.'}}
attn.normalizer @"" {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op symbol name "two words" cannot be written}}
attn.normalizer @"two words" {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op symbol name "9lives" cannot be written}}
attn.normalizer @"9lives" {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.mask' op symbol name "a=b" cannot be written}}
attn.mask @"a=b" {
^bb0(%i: index, %j: index):
  %t = arith.constant true
  attn.yield %t : i1
}

// -----

// expected-error @+1 {{'attn.score' op symbol name "caf\C3\A9" cannot be written}}
attn.score @"café" contract dot

// -----

attn.normalizer @n {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op symbol name "line\0Abreak" cannot be written into the artifact's manifest}}
attn.kernel @"line\nbreak" normalizer(@n)

// -----

// expected-error @+1 {{'attn.normalizer' op param name "two words" is not an identifier; expected letters, digits and '_', not starting with a digit}}
attn.normalizer @n params("two words" = 1.0) {
  numerator {
  ^bb0(%s: f32, %p: f32):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op param name "a=b" is not an identifier; expected letters, digits and '_', not starting with a digit}}
attn.normalizer @n params("a=b" = 1.0) {
  numerator {
  ^bb0(%s: f32, %p: f32):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op param name "new\0Aline" is not an identifier; expected letters, digits and '_', not starting with a digit}}
attn.normalizer @n params("new\nline" = 1.0) {
  numerator {
  ^bb0(%s: f32, %p: f32):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op param name "caf\C3\A9" is not an identifier; expected letters, digits and '_', not starting with a digit}}
attn.normalizer @n params("café" = 1.0) {
  numerator {
  ^bb0(%s: f32, %p: f32):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op param name "" is not an identifier; expected letters, digits and '_', not starting with a digit}}
attn.normalizer @n params("" = 1.0) {
  numerator {
  ^bb0(%s: f32, %p: f32):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op param name "1st" is not an identifier; expected letters, digits and '_', not starting with a digit}}
attn.normalizer @n params("1st" = 1.0) {
  numerator {
  ^bb0(%s: f32, %p: f32):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op param name "a.b" is not an identifier; expected letters, digits and '_', not starting with a digit}}
attn.normalizer @n params("a.b" = 1.0) {
  numerator {
  ^bb0(%s: f32, %p: f32):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op param name "$a" is not an identifier; expected letters, digits and '_', not starting with a digit}}
attn.normalizer @n params("$a" = 1.0) {
  numerator {
  ^bb0(%s: f32, %p: f32):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.score' op param name "x y" is not an identifier}}
attn.score @s contract dot params("x y" = 1.0) mod {
^bb0(%s: f32, %i: index, %j: index, %p: f32):
  attn.yield %s : f32
}

// -----

// expected-error @+1 {{'attn.score' op weight name "W q" is not an identifier}}
attn.score @s contract bilinear weights("W q": 4x4 = identity)

// -----

// expected-error @+1 {{'attn.input' op input name "pos-bias" is not an identifier}}
attn.input @"pos-bias" : tensor<4xf32>
