// LDN diffusion layer (the seed's "linear diffusion network"): a causal,
// position-only Gaussian kernel with learnable width σ and step Δt,
//   s_ij = −(i − j)² / (2σ²)      (the mod ignores q·k: dq = dk = 0)
//   w_ij = Δt · e^(s_ij),  j <= i,  C_i = 1.
// The layer itself is x_i + Σ_j w_ij x_j − (Σ_j w_ij) x_i; Σ_j w_ij comes from
// the same kernel with a column of ones appended to V (examples/models/ldn.py).
// s <= 0, so e^s never overflows: plain (quadratic) accumulation.
attn.score @diffusion contract dot params(sigma = 2.0) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sigma: f32):
  %d = arith.subi %i, %j : index
  %di = arith.index_cast %d : index to i64
  %df = arith.sitofp %di : i64 to f32
  %d2 = arith.mulf %df, %df : f32
  %two = arith.constant 2.0 : f32
  %s2 = arith.mulf %sigma, %sigma : f32
  %den = arith.mulf %two, %s2 : f32
  %ratio = arith.divf %d2, %den : f32
  %t = arith.negf %ratio : f32
  attn.yield %t : f32
}

attn.mask @causal {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}

attn.normalizer @diffusion_step params(dt = 0.1) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %dt: f32):
    %e = math.exp %s : f32
    %g = arith.mulf %dt, %e : f32
    attn.yield %g : f32
  }
  denominator constant 1.0
}

attn.kernel @ldn normalizer(@diffusion_step) score(@diffusion) mask(@causal)
