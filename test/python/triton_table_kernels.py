"""Kernels reading tensor inputs that the Triton tests share (IR text): the interpreter
cases run them against float64 references, test_triton_aot.py compiles them."""

# A learnable sink logit per head (an offset region reading sinks [H]) and document ids
# doc [B, N] (int64) in the mask.
SINKS_DOCUMENTS = """
attn.input @sinks learnable : tensor<?xf32>
attn.input @doc : tensor<?x?xi64>
attn.mask @same_document {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %di = attn.read @doc[%b, %i] : i64
  %dj = attn.read @doc[%b, %j] : i64
  %keep = arith.cmpi eq, %di, %dj : i64
  attn.yield %keep : i1
}
attn.normalizer @softmax_sinks {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %sink = attn.read @sinks[%h] : f32
    %e = math.exp %sink : f32
    attn.yield %e : f32
  }
}
attn.kernel @sinks_documents normalizer(@softmax_sinks) mask(@same_document)
"""

# s + bias[h, j - i + 2], bias [H, 6] learnable: reads outside [0, 6) are clamped.
BIAS_TABLE = """
attn.input @bias learnable : tensor<?x6xf32>
attn.score @relative contract scaled_dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %two = arith.constant 2 : index
  %ij = arith.subi %j, %i : index
  %at = arith.addi %ij, %two : index
  %bias = attn.read @bias[%h, %at] : f32
  %biased = arith.addf %s, %bias : f32
  attn.yield %biased : f32
}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @relative_table normalizer(@softmax) score(@relative)
"""

# Both of the above in one kernel: a learnable sink per head, document ids in the mask and
# the learnable bias table in the score (the tables of every role in one artifact).
ALL_TABLES = """
attn.input @sinks learnable : tensor<?xf32>
attn.input @doc : tensor<?x?xi64>
attn.input @bias learnable : tensor<?x6xf32>
""" + SINKS_DOCUMENTS.split("attn.input @doc : tensor<?x?xi64>\n")[1].replace(
    "attn.kernel @sinks_documents normalizer(@softmax_sinks) mask(@same_document)",
    "attn.kernel @all_tables normalizer(@softmax_sinks) score(@relative) mask(@same_document)"
) + BIAS_TABLE.split("attn.normalizer @softmax {")[0].split(
    "attn.input @bias learnable : tensor<?x6xf32>\n")[1]
