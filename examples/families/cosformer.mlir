// cosFormer (Qin et al. 2022): ReLU features re-weighted by the distance,
//   s_ij = relu(q_i)·relu(k_j) · cos(π/2 · (i − j) / M),
//   w_ij = s_ij / (ε + Σ_j s_ij).
// M is a constant of the mod region: here M = 1024, i.e. π/(2M) = 1.5339808e-03.
// Write M >= the longest sequence so that every weight stays >= 0 (for
// |i − j| > M the cosine turns negative and C_i can reach 0).
// Kernelised: cos(a(i − j)) = cos(ai)cos(aj) + sin(ai)sin(aj), so the compiler
// runs it as linear attention with features [φ(q)cos, φ(q)sin] of width 2d.
attn.score @cos_reweighted contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %r = arith.maximumf %x, %zero : f32
  attn.yield %r : f32
} mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %d = arith.subi %i, %j : index
  %di = arith.index_cast %d : index to i64
  %df = arith.sitofp %di : i64 to f32
  %half_pi_over_m = arith.constant 1.5339808e-03 : f32
  %x = arith.mulf %df, %half_pi_over_m : f32
  %c = math.cos %x : f32
  %t = arith.mulf %s, %c : f32
  attn.yield %t : f32
}

attn.normalizer @linear {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator epsilon 1.0e-06 sum
}

attn.kernel @cosformer_attention normalizer(@linear) score(@cos_reweighted)
