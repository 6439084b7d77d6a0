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

# The additive contraction over hidden n = 40: its tile pads to 64 columns, four chunks
# of the tanh tile's 16 (HIDDEN_CHUNK), the third part padding and the fourth all of it.
WIDE_ADDITIVE = """
attn.score @concat contract additive hidden 40 weights(W_q: 40x16 = identity, W_k: 40x16 = identity, v: 40 = 0.25)
""" + SOFTMAX + """attn.kernel @wide_additive_attention normalizer(@softmax) score(@concat)
"""

# A learnable projection before the feature map, s = φ(W q)·φ(W k)/sqrt(m), φ = tanh, with
# W [24, 12]: m = 24 and d = 12 both pad their tiles (32 and 16 columns); the default
# scale of scaled_dot is that of the projected rows, 1/sqrt(m).
PROJECTED_FEATURES = """
attn.score @projected_tanh contract scaled_dot weights(W: 24x12 = identity) feature {
^bb0(%x: f32):
  %t = math.tanh %x : f32
  attn.yield %t : f32
}
""" + SOFTMAX + """attn.kernel @projected_attention normalizer(@softmax) score(@projected_tanh)
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

# index arithmetic past 2^31 (absolute positions near 3e9 and their products, up to
# 9e18): 64-bit as the IR says; casts as the IR says: to i32 wraps, extui zero-extends,
# to i1 keeps the lowest bit, and extsi / sitofp of an i1 true give -1.
WIDE_POSITIONS = """
attn.score @wide_products contract scaled_dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %product = arith.muli %i, %j : index
  %c7 = arith.constant 7 : index
  %c3 = arith.constant 3 : index
  %residue = arith.remsi %product, %c7 : index
  %centred = arith.subi %residue, %c3 : index
  %wide = arith.index_cast %centred : index to i64
  %f = arith.sitofp %wide : i64 to f32
  %quarter = arith.constant 0.25 : f32
  %bias = arith.mulf %f, %quarter : f32
  %low = arith.index_cast %j : index to i32
  %unsigned = arith.extui %low : i32 to i64
  %c11 = arith.constant 11 : i64
  %c5 = arith.constant 5 : i64
  %u11 = arith.remsi %unsigned, %c11 : i64
  %u_centred = arith.subi %u11, %c5 : i64
  %uf = arith.sitofp %u_centred : i64 to f32
  %bit = arith.trunci %unsigned : i64 to i1
  %minus_bit = arith.extsi %bit : i1 to i64
  %mbf = arith.sitofp %minus_bit : i64 to f32
  %bf = arith.sitofp %bit : i1 to f32
  %bits = arith.addf %mbf, %bf : f32
  %casts = arith.addf %uf, %bits : f32
  %sixteenth = arith.constant 0.0625 : f32
  %cast_bias = arith.mulf %casts, %sixteenth : f32
  %b2 = arith.addf %bias, %cast_bias : f32
  %t = arith.addf %s, %b2 : f32
  attn.yield %t : f32
}
attn.mask @wide_sums {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %sum = arith.addi %i, %j : index
  %c5 = arith.constant 5 : index
  %c2 = arith.constant 2 : index
  %residue = arith.remsi %sum, %c5 : index
  %off_stride = arith.cmpi ne, %residue, %c2 : index
  %low = arith.index_cast %i : index to i32
  %c3 = arith.constant 3 : i32
  %c0 = arith.constant 0 : i32
  %low_residue = arith.remsi %low, %c3 : i32
  %low_kept = arith.cmpi ne, %low_residue, %c0 : i32
  %keep = arith.ori %off_stride, %low_kept : i1
  attn.yield %keep : i1
}
""" + SOFTMAX + """attn.kernel @wide_positions normalizer(@softmax) score(@wide_products) mask(@wide_sums)
"""

# The math ops with a prelude helper or an inline form: atan and powf of the score
# (differentiated), the others of the indices (x = (i - j)/10, y = (i + j)/20,
# q = (i - j)/4 with exact halves for the roundings).
MATH_OPS = """
attn.score @math_bias contract scaled_dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %d = arith.subi %i, %j : index
  %e = arith.addi %i, %j : index
  %d64 = arith.index_cast %d : index to i64
  %e64 = arith.index_cast %e : index to i64
  %df = arith.sitofp %d64 : i64 to f32
  %ef = arith.sitofp %e64 : i64 to f32
  %tenth = arith.constant 0.1 : f32
  %twentieth = arith.constant 0.05 : f32
  %quarter = arith.constant 0.25 : f32
  %fifth = arith.constant 0.2 : f32
  %one = arith.constant 1.0 : f32
  %cube = arith.constant 3.0 : f32
  %x = arith.mulf %df, %tenth : f32
  %y = arith.mulf %ef, %twentieth : f32
  %y1 = arith.addf %y, %one : f32
  %q = arith.mulf %df, %quarter : f32
  %xs = arith.mulf %x, %fifth : f32
  %at = math.atan %s : f32
  %es = arith.mulf %s, %fifth : f32
  %pw = math.powf %y1, %es : f32
  %sh = math.sinh %x : f32
  %ch = math.cosh %x : f32
  %tn = math.tan %xs : f32
  %cb = math.cbrt %x : f32
  %lg = math.log10 %y1 : f32
  %ec = math.erfc %x : f32
  %a2 = math.atan2 %x, %y : f32
  %as = math.asin %xs : f32
  %ac = math.acos %xs : f32
  %ash = math.asinh %x : f32
  %ach = math.acosh %y1 : f32
  %ath = math.atanh %xs : f32
  %re = math.roundeven %q : f32
  %ro = math.round %q : f32
  %tr = math.trunc %q : f32
  %cs = math.copysign %y, %x : f32
  %three = arith.constant 3 : i32
  %fp = math.fpowi %x, %three : f32, i32
  %pn = math.powf %x, %cube : f32
  %lx = math.log %x : f32
  %isnan = math.isnan %lx : f32
  %isinf = math.isinf %lx : f32
  %isfinite = math.isfinite %lx : f32
  %isnormal = math.isnormal %x : f32
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %four = arith.constant 4.0 : f32
  %eight = arith.constant 8.0 : f32
  %k1 = arith.select %isnan, %one, %zero : f32
  %k2 = arith.select %isinf, %two, %zero : f32
  %k3 = arith.select %isfinite, %four, %zero : f32
  %k4 = arith.select %isnormal, %eight, %zero : f32
  %u0 = arith.addf %sh, %ch : f32
  %u1 = arith.addf %u0, %tn : f32
  %u2 = arith.addf %u1, %cb : f32
  %u3 = arith.addf %u2, %lg : f32
  %u4 = arith.addf %u3, %ec : f32
  %u5 = arith.addf %u4, %a2 : f32
  %u6 = arith.addf %u5, %as : f32
  %u7 = arith.addf %u6, %ac : f32
  %u8 = arith.addf %u7, %ash : f32
  %u9 = arith.addf %u8, %ach : f32
  %u10 = arith.addf %u9, %ath : f32
  %u11 = arith.addf %u10, %re : f32
  %u12 = arith.addf %u11, %ro : f32
  %u13 = arith.addf %u12, %tr : f32
  %u14 = arith.addf %u13, %cs : f32
  %u15 = arith.addf %u14, %fp : f32
  %u16 = arith.addf %u15, %pn : f32
  %u17 = arith.addf %u16, %k1 : f32
  %u18 = arith.addf %u17, %k2 : f32
  %u19 = arith.addf %u18, %k3 : f32
  %u20 = arith.addf %u19, %k4 : f32
  %hundredth = arith.constant 0.01 : f32
  %index_terms = arith.mulf %u20, %hundredth : f32
  %t0 = arith.addf %at, %pw : f32
  %t = arith.addf %t0, %index_terms : f32
  attn.yield %t : f32
}
""" + SOFTMAX + """attn.kernel @math_ops normalizer(@softmax) score(@math_bias)
"""
