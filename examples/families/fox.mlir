// Forgetting Transformer (FoX, Lin et al. 2025): every head has a forget gate
// f_t = sigmoid(w_f·x_t + b_f) computed by the model, and the score of query i and key
// j <= i decays by the product of the gates in between:
//   s_ij = q_i·k_j/sqrt(d) + Σ_{l=j+1..i} log f_l = q_i·k_j/sqrt(d) + c_i − c_j,
// c = cumsum(log f) over the positions, a [B, H, N] table given at the call (self-
// attention: N = Nq = Nk). It is learnable: its gradient flows back into the gate.
attn.input @c learnable : tensor<?x?x?xf32> dims(B, H, Nq)

attn.mask @causal {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}

attn.score @forget contract scaled_dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %ci = attn.read @c[%b, %h, %i] : f32
  %cj = attn.read @c[%b, %h, %j] : f32
  %decay = arith.subf %ci, %cj : f32
  %decayed = arith.addf %s, %decay : f32
  attn.yield %decayed : f32
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @fox_attention normalizer(@softmax) score(@forget) mask(@causal)
