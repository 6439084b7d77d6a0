// ALiBi (Press et al.): s = q·k/sqrt(d) - slope·|i - j|, a linear distance penalty
// instead of position embeddings, here with a learnable slope (one per kernel;
// compile one kernel per head slope for the paper's fixed geometric slopes).
// Causal: the key positions j <= i are kept by the attn.mask.
attn.score @alibi contract scaled_dot params(slope = 0.25) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %slope: f32):
  %delta = arith.subi %i, %j : index
  %delta64 = arith.index_cast %delta : index to i64
  %distance = arith.sitofp %delta64 : i64 to f32
  %absolute = math.absf %distance : f32
  %penalty = arith.mulf %slope, %absolute : f32
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

attn.kernel @alibi_attention normalizer(@softmax) score(@alibi) mask(@causal)
