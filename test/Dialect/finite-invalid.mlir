// RUN: attn-opt %s --split-input-file --verify-diagnostics
//
// Numbers of the IR that reach the manifest or the kernels as constants must be
// finite: NaN or infinite initial values, denominator constants, epsilons and scales
// are refused (the manifest could not hold them, the kernels would compute NaN).
// The parser reads NaN and infinity as hexadecimal bit patterns only.

// expected-error @+1 {{'attn.normalizer' op the initial value of param 'a' is NaN; expected a finite number}}
attn.normalizer @n params(a = 0x7FF8000000000000) {
  numerator {
  ^bb0(%s: f32, %a: f32):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op the initial value of param 'a' is +infinity; expected a finite number}}
attn.normalizer @n params(a = 0x7FF0000000000000) {
  numerator {
  ^bb0(%s: f32, %a: f32):
    attn.yield %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op the constant denominator is NaN; expected a finite number}}
attn.normalizer @n {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator constant 0x7FF8000000000000
}

// -----

// expected-error @+1 {{'attn.normalizer' op epsilon is -infinity; expected a finite number}}
attn.normalizer @n {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator epsilon 0xFFF0000000000000 {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
}

// -----

// expected-error @+1 {{'attn.normalizer' op epsilon is NaN; expected a finite number}}
attn.normalizer @n {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator epsilon 0x7FF8000000000000 {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
}

// -----

// expected-error @+1 {{'attn.score' op 'scale' is NaN; expected a finite number}}
attn.score @s contract scaled_dot scale 0x7FF8000000000000

// -----

// expected-error @+1 {{'attn.score' op the initial value of param 'b' is NaN; expected a finite number}}
attn.score @s contract dot params(b = 0x7FF8000000000000) mod {
^bb0(%s: f32, %i: index, %j: index, %b: f32):
  attn.yield %s : f32
}

// -----

// expected-error @+1 {{'attn.score' op the initial value of weight 'W' is +infinity; expected a finite number}}
attn.score @s contract bilinear weights(W: 4x4 = 0x7FF0000000000000)

// -----

// A NaN constant inside a region is refused where it is written; an infinite one
// may only be compared with (below).
attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'arith.constant' op is NaN in the numerator region; expected a number (a NaN constant makes every weight and gradient it reaches NaN)}}
    %nan = arith.constant 0x7FC00000 : f32
    %g = arith.addf %s, %nan : f32
    attn.yield %g : f32
  }
  denominator count
}

// -----

attn.score @biased contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  // expected-error @+1 {{'arith.constant' op is NaN in the mod region; expected a number}}
  %nan = arith.constant 0x7FF8000000000001 : f64
  %t = arith.truncf %nan : f64 to f32
  %r = arith.addf %s, %t : f32
  attn.yield %r : f32
}

// -----

// An infinite constant the region computes with (here the offset β = +inf: every
// row's weights would be ∞/∞) is refused where it is written.
attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    // expected-error @+1 {{'arith.constant' op is +infinity in the offset region and used by 'attn.yield'; expected a finite number (an infinite constant may only be compared with)}}
    %inf = arith.constant 0x7F800000 : f32
    attn.yield %inf : f32
  }
}

// -----

attn.score @masked contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %later = arith.cmpi ugt, %j, %i : index
  // expected-error @+1 {{'arith.constant' op is -infinity in the mod region and used by 'arith.select'; expected a finite number}}
  %ninf = arith.constant 0xFF800000 : f32
  %r = arith.select %later, %ninf, %s : f32
  attn.yield %r : f32
}

// -----

attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'arith.constant' op is +infinity in the numerator region and used by 'arith.addf'}}
    %inf = arith.constant 0x7F800000 : f32
    %g = arith.addf %s, %inf : f32
    attn.yield %g : f32
  }
  denominator count
}

// -----

// Compared with, an infinity is a bound: accepted (an additive mask's -inf test).
attn.input @bias : tensor<?x?xf32>
attn.mask @finite_bias {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %x = attn.read @bias[%i, %j] : f32
  %ninf = arith.constant 0xFF800000 : f32
  %keep = arith.cmpf une, %x, %ninf : f32
  attn.yield %keep : i1
}
