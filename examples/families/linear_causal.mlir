// Causal linear attention (Katharopoulos et al., "Transformers are RNNs"):
// s = φ(q)·φ(k), φ(x) = elu(x) + 1, w_ij = s_ij / (ε + Σ_{j<=i} s_ij).
// Kernelised: the compiler runs it in O(N·d²) with chunked prefix sums of
// Σ φ(k_j) v_jᵀ and Σ φ(k_j). (The non-causal kernel is examples/normalizers/linear.mlir.)
attn.score @elu_feature contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = math.exp %x : f32
  %neg = arith.cmpf olt, %x, %zero : f32
  %xp1 = arith.addf %x, %one : f32
  %phi = arith.select %neg, %e, %xp1 : f32
  attn.yield %phi : f32
}

attn.mask @causal {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}

attn.normalizer @linear {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator epsilon 1.0e-06 sum
}

attn.kernel @linear_causal normalizer(@linear) score(@elu_feature) mask(@causal)
