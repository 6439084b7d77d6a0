// Prefix-LM (Raffel et al., UniLM): the first prefix[b] positions of batch entry b (the
// prompt, an int64 tensor input [B]) attend to each other bidirectionally, the rest
// causally: query i sees key j when j <= i or j < prefix[b].
attn.input @prefix : tensor<?xi64> dims(B)

attn.mask @prefix_lm {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %length = attn.read @prefix[%b] : i64
  %j64 = arith.index_cast %j : index to i64
  %in_prefix = arith.cmpi slt, %j64, %length : i64
  %causal = arith.cmpi ule, %j, %i : index
  %keep = arith.ori %in_prefix, %causal : i1
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

attn.kernel @prefix_lm_attention normalizer(@softmax) mask(@prefix_lm)
