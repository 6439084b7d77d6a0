// Luong et al. local-p attention: the score is penalised by a gaussian window
// around a per-query centre p_i, given at the call as the tensor input p
// [B, H, Nq] (Luong predicts p_i = S·sigmoid(v_pᵀ tanh(W_p h_i)) in the model; its
// gradient comes back through the kernel):
//   s_ij = q_i·k_j - (j - p_i)² / (2σ²),   σ learnable (Luong: D/2).
// The weights are softmax_j(s_ij) = e^(q·k)·exp(-(j-p_i)²/2σ²) / C_i with
// C_i = Σ_j of the same product: the window is inside the normalisation.
attn.input @p learnable : tensor<?x?x?xf32> dims(B, H, Nq)

attn.score @local_p contract dot params(sigma = 2.0) mod {
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
  %windowed = arith.subf %s, %penalty : f32
  attn.yield %windowed : f32
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @luong_local_attention normalizer(@softmax) score(@local_p)
