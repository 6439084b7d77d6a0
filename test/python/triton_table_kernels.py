"""Kernels that the Triton tests share (IR text): the interpreter cases run them against
float64 references, test_triton_aot.py compiles them."""

# Softmax over the score, for the kernels below that differ in their score and mask.
SOFTMAX = """
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
"""

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
""" + SOFTMAX + """attn.kernel @relative_table normalizer(@softmax) score(@relative)
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

# Every integer op Triton has no operator for (the emitter's helpers): a score mod adding
# 0.01·f(i, j), f summing each op's result, so a wrong one moves O and dq.
INTEGER_OPS = """
attn.score @integer_bias contract scaled_dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %ii = arith.index_cast %i : index to i32
  %jj = arith.index_cast %j : index to i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i32
  %c4 = arith.constant 4 : i32
  %c5 = arith.constant 5 : i32
  %c7 = arith.constant 7 : i32
  %n = arith.subi %ii, %jj : i32
  %floor = arith.floordivsi %n, %c3 : i32
  %ceil = arith.ceildivsi %n, %c4 : i32
  %i7 = arith.muli %ii, %c7 : i32
  %mixed = arith.addi %i7, %jj : i32
  %pop = math.ctpop %mixed : i32
  %j1 = arith.addi %jj, %c1 : i32
  %trailing = math.cttz %j1 : i32
  %i1 = arith.addi %ii, %c1 : i32
  %leading = math.ctlz %i1 : i32
  %i5 = arith.addi %ii, %c5 : i32
  %quotient = arith.divui %i5, %c3 : i32
  %j7 = arith.addi %jj, %c7 : i32
  %remainder = arith.remui %j7, %c5 : i32
  %ij = arith.muli %ii, %jj : i32
  %shifted = arith.shrui %ij, %c2 : i32
  %larger = arith.maxui %ii, %jj : i32
  %smaller = arith.minui %ii, %jj : i32
  %f0 = arith.addi %floor, %ceil : i32
  %f1 = arith.addi %f0, %pop : i32
  %f2 = arith.addi %f1, %trailing : i32
  %f3 = arith.addi %f2, %leading : i32
  %f4 = arith.addi %f3, %quotient : i32
  %f5 = arith.addi %f4, %remainder : i32
  %f6 = arith.addi %f5, %shifted : i32
  %f7 = arith.addi %f6, %larger : i32
  %f8 = arith.subi %f7, %smaller : i32
  %f = arith.sitofp %f8 : i32 to f32
  %hundredth = arith.constant 0.01 : f32
  %bias = arith.mulf %f, %hundredth : f32
  %t = arith.addf %s, %bias : f32
  attn.yield %t : f32
}
""" + SOFTMAX + """attn.kernel @integer_ops normalizer(@softmax) score(@integer_bias)
"""

# The bilinear contraction with a learnable W (Luong's general score), d = 16.
BILINEAR = """
attn.score @general contract bilinear scale 0.5 weights(W: 16x16 = identity)
""" + SOFTMAX + """attn.kernel @general_attention normalizer(@softmax) score(@general)
"""

# A feature map in the quadratic form: s = φ(q)·φ(k), φ(x) = tanh(x) + 1 (φ(0) = 1, so
# a padding column of the head dim would add to every score), under σ(s) summed with
# C = 1, which a shift of every score changes (softmax would not see it).
FEATURE_MAP = """
attn.score @shifted_tanh contract dot feature {
^bb0(%x: f32):
  %t = math.tanh %x : f32
  %one = arith.constant 1.0 : f32
  %phi = arith.addf %t, %one : f32
  attn.yield %phi : f32
}
attn.normalizer @sigmoid_sum {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %n = arith.negf %s : f32
    %e = math.exp %n : f32
    %d = arith.addf %one, %e : f32
    %g = arith.divf %one, %d : f32
    attn.yield %g : f32
  }
  denominator constant 1.0
}
attn.kernel @feature_attention normalizer(@sigmoid_sum) score(@shifted_tanh)
"""
