// Luong et al.'s local-p attention in the paper's form: the softmax of q·k over the
// keys, multiplied afterwards by a gaussian window around the per-query centre p_i:
//   a_ij = softmax_j(q_i·k_j) · exp(-(j - p_i)² / (2σ²)),
// i.e. g = e^(s - (j - p_i)²/2σ²) and h = e^s: the window is in the numerator only
// (C_i = Σ_j e^s). The normalizer reads the key index j and the centre p [B, H, Nq]
// (a learnable tensor input: p_i = S·sigmoid(v_pᵀ tanh(W_p h_i)) comes from the model,
// its gradient back through the kernel); σ is a learnable param (Luong: D/2).
// luong_local.mlir is the variant with the window inside the normalisation.
attn.input @p learnable : tensor<?x?x?xf32> dims(B, H, Nq)

attn.score @dot contract dot

attn.normalizer @local_softmax params(sigma = 2.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sigma: f32):
    %p = attn.read @p[%b, %h, %i] : f32
    %j64 = arith.index_cast %j : index to i64
    %position = arith.sitofp %j64 : i64 to f32
    %offset = arith.subf %position, %p : f32
    %squared = arith.mulf %offset, %offset : f32
    %two = arith.constant 2.0 : f32
    %variance = arith.mulf %sigma, %sigma : f32
    %width = arith.mulf %two, %variance : f32
    %penalty = arith.divf %squared, %width : f32
    %x = arith.subf %s, %penalty : f32
    %g = math.exp %x : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sigma: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}

attn.kernel @luong_local_post_attention normalizer(@local_softmax) score(@dot)
