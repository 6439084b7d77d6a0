// RUN: attn-opt %s --split-input-file --attn-classify-normalizer -verify-diagnostics | FileCheck %s
// A kernel with a feature map that is not linear attention gets a remark naming
// the op that breaks the linear-time form, and keeps the quadratic (plain) form.

attn.score @relu_feature contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %r = arith.maximumf %x, %zero : f32
  attn.yield %r : f32
}
attn.normalizer @expnum {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // s = relu(q)·relu(k) >= 0, so e^-s is in (0, 1]: bounded, plain.
    %n = arith.negf %s : f32
    // expected-remark @+1 {{kernel @k keeps the quadratic form (not kernelised): the numerator is not linear in s: math.exp}}
    %e = math.exp %n : f32
    %t = arith.mulf %e, %s : f32
    attn.yield %t : f32
  }
  denominator constant 1.0
}
// CHECK: attn.kernel @k {{.*}}{algorithm = #attn<algorithm plain>}
attn.kernel @k normalizer(@expnum) score(@relu_feature)

// -----

attn.score @relu_feature contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %r = arith.maximumf %x, %zero : f32
  attn.yield %r : f32
}
attn.normalizer @affine {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %hx: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    // expected-remark @+1 {{the denominator is not linear in s: arith.addf}}
    %h = arith.addf %s, %one : f32
    attn.yield %h : f32
  }
}
attn.kernel @k normalizer(@affine) score(@relu_feature)

// -----

attn.score @relu_feature contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %r = arith.maximumf %x, %zero : f32
  attn.yield %r : f32
}
attn.normalizer @lin {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-remark @+1 {{mask @band is not causal (j <= i)}}
attn.mask @band {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %one = arith.constant 1 : index
  %ip1 = arith.addi %i, %one : index
  %keep = arith.cmpi ule, %j, %ip1 : index
  attn.yield %keep : i1
}
attn.kernel @k normalizer(@lin) score(@relu_feature) mask(@band)

// -----

// A squared score (expressive attention with a feature map) does not factor.
attn.score @squared contract dot feature {
^bb0(%x: f32):
  attn.yield %x : f32
} mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  // expected-remark @+1 {{the score mod does not factor into query and key terms (c·s, or s·cos(x) with x affine in i and j): arith.mulf}}
  %t = arith.mulf %s, %s : f32
  attn.yield %t : f32
}
attn.normalizer @lin {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k normalizer(@lin) score(@squared)

// -----

// A position term i·j does not split into a query and a key factor.
attn.score @quadratic_phase contract dot feature {
^bb0(%x: f32):
  attn.yield %x : f32
} mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  // expected-remark @+1 {{the score mod does not factor into query and key terms (c·s, or s·cos(x) with x affine in i and j): arith.muli}}
  %ij = arith.muli %i, %j : index
  %n = arith.index_cast %ij : index to i64
  %x = arith.sitofp %n : i64 to f32
  %c = math.cos %x : f32
  %t = arith.mulf %s, %c : f32
  attn.yield %t : f32
}
attn.normalizer @lin {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k normalizer(@lin) score(@quadratic_phase)

// -----

attn.score @biased contract dot params(bias = 0.5) feature {
^bb0(%x: f32):
  attn.yield %x : f32
} mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f32):
  // expected-remark @+1 {{the score mod uses a param}}
  %t = arith.mulf %s, %bias : f32
  attn.yield %t : f32
}
attn.normalizer @lin {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k normalizer(@lin) score(@biased)

// -----

attn.score @elu contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %r = arith.maximumf %x, %zero : f32
  attn.yield %r : f32
}
// expected-remark @+1 {{kernel @k keeps the quadratic form (not kernelised): the normalizer has a row offset region; the linear form takes a constant epsilon only}}
attn.normalizer @lin {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  }
}
attn.kernel @k normalizer(@lin) score(@elu)
