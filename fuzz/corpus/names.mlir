// Names as the manifest takes them: quoted symbols and params that are identifiers
// (printed bare), every character a symbol may hold.
attn.normalizer @"soft.max$2" params("t_0" = 0.5, T1 = 2.0) {
  numerator {
  ^bb0(%s: f32, %a: f32, %b: f32):
    %x = arith.mulf %s, %a : f32
    %e = math.exp %x : f32
    attn.yield %e : f32
  }
  denominator epsilon 1.0e-06 {
  ^bb0(%s: f32, %a: f32, %b: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
attn.mask @_m.1 {
^bb0(%i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}
attn.score @"s$" contract dot row_inputs(p) params(sigma = 2.0) mod {
^bb0(%s: f32, %i: index, %j: index, %p: f32, %sigma: f32):
  %t = arith.subf %s, %p : f32
  %u = arith.mulf %t, %sigma : f32
  attn.yield %u : f32
}
attn.kernel @"k.v1$" normalizer(@"soft.max$2") score(@"s$") mask(@_m.1)
