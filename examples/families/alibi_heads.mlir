// ALiBi (Press et al.) as in the paper: one kernel for every head, each head h with its
// own fixed slope m_h, passed at the call as the tensor input slopes [H]:
//   s = q·k/sqrt(d) - m_h·(i - j),   keys j <= i (causal attn.mask).
// The paper's geometric slopes for H heads (H a power of two) are m_h = 2^(-8(h+1)/H);
// attn.alibi_slopes(H) in Python computes them (for other H, the paper's interleaving).
attn.input @slopes : tensor<?xf32> dims(H)

attn.score @alibi contract scaled_dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %slope = attn.read @slopes[%h] : f32
  %delta = arith.subi %i, %j : index
  %delta64 = arith.index_cast %delta : index to i64
  %distance = arith.sitofp %delta64 : i64 to f32
  %penalty = arith.mulf %slope, %distance : f32
  %biased = arith.subf %s, %penalty : f32
  attn.yield %biased : f32
}

attn.mask @causal {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @alibi_heads_attention normalizer(@softmax) score(@alibi) mask(@causal)
