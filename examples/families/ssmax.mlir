// Scalable-Softmax (SSMax, Nakanishi 2025): the softmax of s_ij · (scale[h] · log n_i),
// n_i the number of keys query i attends to (causal: i + 1), so that attention stays
// peaked as the context grows instead of flattening like softmax's 1/n. scale [H] is a
// learnable per-head table; attn.MultiheadAttention creates it as a parameter
// initialised to 0.43 (a scale of 0 would start as uniform attention).
attn.input @scale learnable = 0.43 : tensor<?xf32> dims(H)

attn.mask @causal {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}

attn.score @scalable contract scaled_dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %scale = attn.read @scale[%h] : f32
  %i64 = arith.index_cast %i : index to i64
  %position = arith.sitofp %i64 : i64 to f32
  %one = arith.constant 1.0 : f32
  %keys = arith.addf %position, %one : f32
  %log_keys = math.log %keys : f32
  %factor = arith.mulf %scale, %log_keys : f32
  %scaled = arith.mulf %s, %factor : f32
  attn.yield %scaled : f32
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @ssmax_attention normalizer(@softmax) score(@scalable) mask(@causal)
