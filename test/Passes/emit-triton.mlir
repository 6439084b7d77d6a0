// RUN: attn-opt %s --split-input-file --attn-triton -o /dev/null | FileCheck %s
// RUN: attn-compile %examples/normalizers/multimax.mlir --emit=triton -o %t.py
// RUN: FileCheck %s --check-prefix=COMPILE < %t.py
// RUN: not attn-compile %examples/normalizers/linear.mlir --emit=triton -o %t.linear.py 2>&1 | FileCheck %s --check-prefix=REFUSED
// RUN: attn-compile %examples/normalizers/stick_breaking_left_over.mlir --emit=triton -o %t.scan.py
// RUN: FileCheck %s --check-prefix=SCAN < %t.scan.py
// RUN: attn-compile %examples/normalizers/stick_breaking.mlir --emit=triton -o %t.scan-decode.py
// RUN: FileCheck %s --check-prefix=SCAN-DECODE < %t.scan-decode.py
// RUN: attn-compile %examples/normalizers/entmax_alpha.mlir --emit=triton -o %t.implicit.py
// RUN: FileCheck %s --check-prefix=IMPLICIT < %t.implicit.py
//
// attn-opt --attn-triton: the kernel as a Python module of Triton kernels, its
// scalar functions as @triton.jit functions inside the compiler's templates.

// attn-compile --emit=triton writes the same module.
// COMPILE: KERNEL = "multimax_attention"
// COMPILE: PARAM_NAMES = ("tb1", "td1", "b1", "d1", "tb2", "td2", "b2", "d2", )
// COMPILE: BACKWARD_PLAN = dict(rows_first=False, tile_states=())
// COMPILE: def numerator_d_tb1(s, m, b, h, i, j, p_tb1, p_td1, p_b1, p_d1, p_tb2, p_td2, p_b2, p_d2):
// COMPILE: def attn_bwd_dq(
// REFUSED: error: 'attn.kernel' op uses the kernelised (linear-time) form, which the Triton emitter does not cover yet

// A scan (stick-breaking with its left-over): key tiles from the last to the first, S per
// row; each tile a chunk from S = 0 (its pairs' S by a reverse cumsum) combined into the
// row's state (RowEquations' scanPair, scanCombine, scanLeftOver); no decode split (its
// merge has no V for r_i·v_i); the backward's dq kernel computes D from the row's sums and
// stores S and B per key tile for the dk/dv kernel.
// SCAN: ALGORITHM = "scan"
// SCAN: DECODE = dict(max_rows=0, programs_per_sm=2)
// SCAN: BACKWARD_PLAN = dict(rows_first=True, tile_states=("TileLogSurvival", "TileSuffix"))
// SCAN-LABEL: def attn_fwd(
// SCAN: S_i = tl.zeros([BLOCK_M], tl.float32)
// SCAN: key_tiles = (key_stop - 0 + BLOCK_N - 1) // BLOCK_N
// SCAN-NEXT: for back in range(0, key_tiles):
// SCAN-NEXT: start_n = 0 + (key_tiles - 1 - back) * BLOCK_N
// SCAN: d = tl.where(keep, denominator(s, 0.0, b, h, i, j), 0.0)
// SCAN-NEXT: survival = tl.exp2((tl.cumsum(d, 1, reverse=True) - d) * LOG2E)
// SCAN-NEXT: w = tl.where(keep, numerator(s, 0.0, b, h, i, j), 0.0) * survival
// SCAN-NEXT: farther_factor = tl.exp2(S_i * LOG2E)
// SCAN-NEXT: acc = acc + farther_factor[:, None] * tl.dot(w.to(v.dtype), v, input_precision=DOT_PRECISION)
// SCAN-NEXT: S_i = S_i + tl.sum(d, 1)
// SCAN: own = pos_m - key_start
// SCAN: acc = acc + tl.exp2(S_i * LOG2E)[:, None] * v_own.to(tl.float32)
// SCAN: tl.store(RowMax + bh * NQ + offs_m, S_i, mask=row_in)
// SCAN-NEXT: tl.store(RowSum + bh * NQ + offs_m, tl.full([BLOCK_M], 1.0, tl.float32), mask=row_in)
// Only the kernels the launchers run: no decode split (attn_fwd_merge has no V for the
// left-over) and no attn_bwd_preprocess (attn_bwd_dq finds D first).
// SCAN-NOT: def attn_fwd_split(
// SCAN-NOT: def attn_fwd_merge(
// SCAN-NOT: def attn_bwd_preprocess(
// SCAN-LABEL: def attn_bwd_dkdv(
// SCAN: Q, K, V, DOut, DK, DV, RowMax, RowSum, Delta, Params, KeyLengths, QueryStarts, DParamsKeys, TileLogSurvival, TileSuffix,
// SCAN: S_i = tl.load(TileLogSurvival + states, mask=row_in, other=0.0)
// SCAN-NEXT: B_i = tl.load(TileSuffix + states, mask=row_in, other=0.0)
// SCAN: survival = tl.exp2((S_i[:, None] + (tl.cumsum(d, 1, reverse=True) - d)) * LOG2E)
// SCAN: scaled_dp = dp * survival
// SCAN-NEXT: suffix_delta = B_i[:, None] + (tl.cumsum(w_dp, 1, reverse=True) - w_dp) + w * dp - delta[:, None]
// SCAN-NEXT: ds = tl.where(keep, numerator_ds(s, shift, b, h, i, j) * scaled_dp - denominator_ds(s, shift, b, h, i, j) * suffix_delta, 0.0)
// SCAN: dv += tl.exp2(own_s * LOG2E)[:, None] * do_own.to(tl.float32)
// SCAN-LABEL: def attn_bwd_dq(
// SCAN: B_i = B_i + tl.sum(w_dp, 1)
// SCAN: delta = B_i
// SCAN: delta += tl.exp2(S_i * LOG2E) * tl.sum(do.to(tl.float32) * v_own.to(tl.float32), 1)
// SCAN-NEXT: tl.store(Delta + bh * NQ + offs_m, delta, mask=row_in)
// SCAN: tl.store(TileLogSurvival + states, S_i, mask=row_in)
// SCAN-NEXT: tl.store(TileSuffix + states, B_i, mask=row_in)

// A scan without a left-over decodes: attn_fwd_merge folds the chunks' states in key
// order, a farther chunk's accumulator scaled by the nearer one's survival.
// SCAN-DECODE: DECODE = dict(max_rows=16, programs_per_sm=2)
// SCAN-DECODE: BACKWARD_PLAN = dict(rows_first=True, tile_states=("TileLogSurvival", "TileSuffix"))
// SCAN-DECODE-LABEL: def attn_fwd_split(
// SCAN-DECODE-LABEL: def attn_fwd_merge(
// SCAN-DECODE: farther_factor = tl.exp2(part_s * LOG2E)
// SCAN-DECODE-NEXT: acc = tl.load(PartAcc + part[:, None] * HEAD_DIM_V + offs_dv[None, :], mask=acc_in, other=0.0) + farther_factor[:, None] * acc
// SCAN-DECODE-NEXT: S_i = part_s + S_i
// SCAN-DECODE-NOT: def attn_bwd_preprocess(
// SCAN-DECODE: def attn_bwd_dkdv(

// An implicit normalizer (α-entmax): attn_fwd brackets τ_i and runs RowEquations' Newton
// steps, each trial a pass over the key tiles, then O = Σ g(s − τ)·v; no decode split and
// no preprocess: attn_bwd_dq finds r_i = Σ g'·dP / Σ g' first, and both backward kernels
// take the pairs above τ_i at x = s − τ_i with dP − r_i at C = 1.
// IMPLICIT: ALGORITHM = "implicit"
// IMPLICIT: DECODE = dict(max_rows=0, programs_per_sm=2)
// IMPLICIT: BACKWARD_PLAN = dict(rows_first=True, tile_states=())
// IMPLICIT: THRESHOLD_BRACKET_DOUBLINGS = tl.constexpr(64)
// IMPLICIT-NEXT: THRESHOLD_STEPS = tl.constexpr(52)
// IMPLICIT-LABEL: def attn_fwd(
// IMPLICIT: m_i = tl.maximum(m_i, tl.max(tl.where(keep, s, float("-inf")), 1))
// IMPLICIT: while (tl.max((any_key & ~found).to(tl.int32)) > 0) & (doubling < THRESHOLD_BRACKET_DOUBLINGS):
// IMPLICIT-NEXT: tau = m_i - width
// IMPLICIT: sum_w = sum_w + tl.sum(tl.where(above, numerator(x, 0.0, b, h, i, j, p_alpha), 0.0), 1)
// IMPLICIT: found = sum_w >= 1.0
// IMPLICIT: lo = tl.where(found, m_i - width, float("nan"))
// IMPLICIT: lo_slope = lo_slope + tl.sum(tl.where(above, numerator_ds(x, 0.0, b, h, i, j, p_alpha), 0.0), 1)
// IMPLICIT: while (tl.max((any_key & ~converged).to(tl.int32)) > 0) & (newton_step < THRESHOLD_STEPS):
// IMPLICIT-NEXT: newton = lo + (lo_w - 1.0) / lo_slope
// IMPLICIT-NEXT: tau = tl.where((newton > lo) & (newton < hi) & ~hi_moved, newton, 0.5 * (lo + hi))
// IMPLICIT: reached = tau_w >= 1.0
// IMPLICIT: converged_next = ~((tau > lo) & (tau < hi)) | (tau_w == 1.0)
// IMPLICIT: lo = tl.where(converged, lo, lo_next)
// IMPLICIT: tau = lo
// IMPLICIT: acc = acc + tl.dot(w.to(v.dtype), v, input_precision=DOT_PRECISION)
// IMPLICIT: tl.store(RowMax + bh * NQ + offs_m, tl.where(any_key, tau, 0.0), mask=row_in)
// IMPLICIT-NEXT: tl.store(RowSum + bh * NQ + offs_m, tl.where(any_key, total, 0.0), mask=row_in)
// IMPLICIT-NOT: def attn_fwd_split(
// IMPLICIT-NOT: def attn_fwd_merge(
// IMPLICIT-NOT: def attn_bwd_preprocess(
// IMPLICIT-LABEL: def attn_bwd_dkdv(
// IMPLICIT: inv_c = tl.where(live, 1.0, 0.0)[:, None]
// IMPLICIT: s = s - row_max[:, None]
// IMPLICIT-NEXT: keep = keep & (s > 0.0)
// IMPLICIT: dp = dp - delta[:, None]
// IMPLICIT: d_p_alpha += tl.sum(tl.where(keep, numerator_d_alpha(s, shift, b, h, i, j, p_alpha) * dp * inv_c, 0.0), 0)
// IMPLICIT-LABEL: def attn_bwd_dq(
// IMPLICIT: slope = tl.where(keep, numerator_ds(s, 0.0, b, h, i, j, p_alpha), 0.0)
// IMPLICIT-NEXT: slope_dp = slope_dp + tl.sum(slope * dp, 1)
// IMPLICIT-NEXT: slopes = slopes + tl.sum(slope, 1)
// IMPLICIT: delta = tl.where(slopes > 0.0, slope_dp / tl.where(slopes > 0.0, slopes, 1.0), 0.0)
// IMPLICIT-NEXT: tl.store(Delta + bh * NQ + offs_m, delta, mask=row_in)
// IMPLICIT: dp = dp - delta[:, None]

// Softmax: online; the running max rescales by exp2 with log2 e folded, and the
// numerator is stabilised as e^(s - m).
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @softmax_attention normalizer(@softmax)

// CHECK: KERNEL = "softmax_attention"
// CHECK-NEXT: ALGORITHM = "online"
// CHECK-NEXT: PARAM_NAMES = ()
// CHECK: def score_scale(head_dim):
// CHECK: return 1.0 / math.sqrt(head_dim)
// CHECK: @triton.jit
// CHECK-NEXT: def stabilizer(s, b, h, i, j):
// CHECK-NEXT: return s
// CHECK: def numerator(s, m, b, h, i, j):
// CHECK-NEXT: t0 = (s - m)
// CHECK-NEXT: t1 = tl.exp(t0)
// CHECK-NEXT: return t1
// CHECK: def numerator_ds(s, m, b, h, i, j):
// CHECK: def denominator_ds(s, m, b, h, i, j):
// CHECK: def attn_fwd(
// CHECK: q_start = tl.load(QueryStarts + b).to(tl.int64)
// CHECK-NEXT: key_start = tl.load(KeyStarts + b).to(tl.int64)
// CHECK: causal_shift = tl.minimum(tl.maximum(q_start - key_start, -2147483647), 2147483647).to(tl.int32)
// CHECK: pos_m = offs_m + q_start
// CHECK-NEXT: i = pos_m[:, None]
// CHECK: key_stop = tl.minimum(kv_end, tl.maximum((start_m + 1) * BLOCK_M + q_start - key_start, 0)).to(tl.int32)
// CHECK: m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
// Without a mask function the whole tiles before the key length and the block's first
// query (causal) come first, with no keep and no row predicate in the loads.
// CHECK: full_stop = kv_end // BLOCK_N * BLOCK_N
// CHECK-NEXT: if IS_CAUSAL:
// CHECK-NEXT: full_stop = tl.minimum(full_stop, tl.maximum(start_m * BLOCK_M + q_start - key_start + 1, 0) // BLOCK_N * BLOCK_N).to(tl.int32)
// CHECK-NEXT: for start_n in range(0, full_stop, BLOCK_N):
// CHECK-NEXT: offs_n = start_n + tl.arange(0, BLOCK_N)
// CHECK-NEXT: j = (offs_n + key_start)[None, :]
// CHECK-NEXT: k = tl.load({{.*}}, mask=(offs_d[None, :] < HEAD_DIM), other=0.0)
// CHECK-NEXT: v = tl.load({{.*}}, mask=(offs_dv[None, :] < HEAD_DIM_V), other=0.0)
// CHECK-NEXT: raw = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale
// CHECK-NEXT: s = raw
// CHECK-NEXT: m_new = tl.maximum(m_i, tl.max(stabilizer(s, b, h, i, j), 1))
// CHECK-NEXT: alpha = tl.where(m_new == float("-inf"), 1.0, tl.exp2((m_i - m_new) * LOG2E))
// CHECK-NEXT: shift = m_new[:, None]
// CHECK-NEXT: g = numerator(s, shift, b, h, i, j)
// CHECK-NEXT: m_i = m_new
// CHECK-NEXT: l_i = l_i * alpha + tl.sum(denominator(s, shift, b, h, i, j), 1)
// CHECK-NEXT: count = count + BLOCK_N
// CHECK-NEXT: acc = acc * alpha[:, None] + tl.dot(g.to(v.dtype), v, input_precision=DOT_PRECISION)
// CHECK-NEXT: for start_n in range(full_stop, key_stop, BLOCK_N):
// CHECK-NEXT: offs_n = start_n + tl.arange(0, BLOCK_N)
// CHECK-NEXT: j = (offs_n + key_start)[None, :]
// CHECK-NEXT: k = tl.load({{.*}}, mask=(offs_n[:, None] < kv_end) & (offs_d[None, :] < HEAD_DIM), other=0.0)
// CHECK: raw = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale
// CHECK-NEXT: s = raw
// CHECK-NEXT: keep = row_in[:, None] & (offs_n[None, :] < kv_end)
// CHECK-NEXT: if IS_CAUSAL:
// CHECK-NEXT: keep = keep & (offs_n[None, :] - offs_m[:, None] <= causal_shift)
// CHECK-NEXT: m_new = tl.maximum(m_i, tl.max(tl.where(keep, stabilizer(s, b, h, i, j), float("-inf")), 1))
// The row algorithm's tile fold (RowEquations.h): a row without a key so far keeps
// m = -inf and alpha = 1.
// CHECK-NEXT: alpha = tl.where(m_new == float("-inf"), 1.0, tl.exp2((m_i - m_new) * LOG2E))
// CHECK-NEXT: shift = m_new[:, None]
// CHECK-NEXT: g = tl.where(keep, numerator(s, shift, b, h, i, j), 0.0)
// CHECK-NEXT: m_i = m_new
// CHECK-NEXT: l_i = l_i * alpha + tl.sum(tl.where(keep, denominator(s, shift, b, h, i, j), 0.0), 1)
// CHECK-NEXT: count = count + tl.sum(keep.to(tl.float32), 1)
// CHECK-NEXT: acc = acc * alpha[:, None] + tl.dot(g.to(v.dtype), v, input_precision=DOT_PRECISION)
// CHECK-NEXT: c = l_i
// CHECK-NEXT: any_key = count > 0.0
// CHECK-NEXT: out_scale = tl.where(any_key, 1.0 / tl.where(any_key, c, 1.0), 0.0)
// CHECK: tl.store(RowMax + bh * NQ + offs_m, tl.where(any_key, m_i, 0.0), mask=row_in)
// The decode forward: the GQA group's heads packed into the rows, one key chunk per
// program, partial row states out; the merge combines them by the online rule.
// CHECK: def attn_fwd_split(
// CHECK: H, H_KV, NQ, NK, HEAD_DIM, HEAD_DIM_V, scale, KeyStarts, KEYS_PER_SPLIT,
// CHECK: split = tl.program_id(2)
// CHECK: heads = h_kv * group + tl.where(row_in, offs_p // NQ, 0)
// CHECK-NEXT: offs_m = offs_p % NQ
// CHECK-NEXT: h = heads[:, None]
// CHECK: q = tl.load(Q + b * stride_qb + heads[:, None] * stride_qh + offs_m[:, None] * stride_qm
// CHECK: key_first = split * KEYS_PER_SPLIT
// CHECK-NEXT: key_last = tl.minimum(key_stop, key_first + KEYS_PER_SPLIT)
// CHECK: m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
// CHECK: for start_n in range(key_first, key_last, BLOCK_N):
// CHECK: acc = acc * alpha[:, None] + tl.dot(g.to(v.dtype), v, input_precision=DOT_PRECISION)
// CHECK: part = (split * tl.num_programs(1) * group + b * H + heads) * NQ + offs_m
// CHECK-NEXT: tl.store(PartMax + part, m_i, mask=row_in)
// CHECK-NEXT: tl.store(PartSum + part, l_i, mask=row_in)
// CHECK-NEXT: tl.store(PartCount + part, count, mask=row_in)
// CHECK-NEXT: tl.store(PartAcc + part[:, None] * HEAD_DIM_V + offs_dv[None, :], acc,
// CHECK: def attn_fwd_merge(
// CHECK: for split in range(0, SPLITS):
// CHECK-NEXT: part = split * chunk_rows + rows
// CHECK-NEXT: part_max = tl.load(PartMax + part, mask=row_in, other=float("-inf"))
// CHECK-NEXT: part_sum = tl.load(PartSum + part, mask=row_in, other=0.0)
// CHECK-NEXT: part_count = tl.load(PartCount + part, mask=row_in, other=0.0)
// CHECK-NEXT: m_new = tl.maximum(m_i, part_max)
// CHECK-NEXT: alpha = tl.where(m_new == float("-inf"), 1.0, tl.exp2((m_i - m_new) * LOG2E))
// CHECK-NEXT: alpha_part = tl.where(m_new == float("-inf"), 1.0, tl.exp2((part_max - m_new) * LOG2E))
// CHECK-NEXT: m_i = m_new
// CHECK-NEXT: l_i = l_i * alpha + part_sum * alpha_part
// CHECK-NEXT: count = count + part_count
// CHECK-NEXT: acc = acc * alpha[:, None] + tl.load(PartAcc + part[:, None] * HEAD_DIM_V + offs_dv[None, :], mask=acc_in, other=0.0) * alpha_part[:, None]
// CHECK: c = l_i
// CHECK: tl.store(RowSum + bh * NQ + offs_m, tl.where(any_key, c, 0.0), mask=row_in)
// CHECK: def attn_bwd_preprocess(
// CHECK: delta = tl.sum(o * do, 1)
// dQ's key tiles before full_stop pair every row with every key (as the forward's, but
// none in a block with rows past NQ): no keep, no tl.where. dK/dV keeps one masked loop
// over the query blocks (a second one for the whole blocks spilled, ptxas).
// CHECK: def attn_bwd_dkdv(
// CHECK-NOT: full_from
// CHECK: for start_m in range(first_m, NQ, BLOCK_M):
// CHECK: live = row_sum != 0.0
// CHECK-NEXT: inv_c = tl.where(live, 1.0 / tl.where(live, row_sum, 1.0), 0.0)
// CHECK-NEXT: inv_c = inv_c[:, None]
// CHECK: keep = live[:, None] & (offs_n[None, :] < kv_end)
// CHECK: ds = tl.where(keep, (numerator_ds(s, shift, b, h, i, j) * dp - denominator_ds(s, shift, b, h, i, j) * delta[:, None]) * inv_c, 0.0)
// CHECK-NEXT: draw = ds
// CHECK: dv += tl.dot(tl.trans(w).to(do.dtype), do, input_precision=DOT_PRECISION)
// CHECK-NOT: for start_m
// CHECK: key_in = offs_n < NK
// CHECK: def attn_bwd_dq(
// CHECK: full_stop = kv_end // BLOCK_N * BLOCK_N
// CHECK-NEXT: if (start_m + 1) * BLOCK_M > NQ:
// CHECK-NEXT: full_stop = 0
// CHECK-NEXT: if IS_CAUSAL:
// CHECK-NEXT: full_stop = tl.minimum(full_stop, tl.maximum(start_m * BLOCK_M + q_start - key_start + 1, 0) // BLOCK_N * BLOCK_N).to(tl.int32)
// CHECK-NEXT: for start_n in range(0, full_stop, BLOCK_N):
// CHECK-NEXT: offs_n = start_n + tl.arange(0, BLOCK_N)
// CHECK-NEXT: j = (offs_n + key_start)[None, :]
// CHECK-NEXT: k = tl.load({{.*}}, mask=(offs_d[None, :] < HEAD_DIM), other=0.0)
// CHECK-NEXT: v = tl.load({{.*}}, mask=(offs_dv[None, :] < HEAD_DIM_V), other=0.0)
// CHECK-NEXT: raw = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale
// CHECK-NEXT: s = raw
// CHECK-NEXT: shift = row_max[:, None]
// CHECK-NEXT: dp = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)
// CHECK-NEXT: ds = (numerator_ds(s, shift, b, h, i, j) * dp - denominator_ds(s, shift, b, h, i, j) * delta[:, None]) * inv_c
// CHECK-NEXT: draw = ds
// CHECK-NEXT: dq += tl.dot(draw.to(k.dtype), k, input_precision=DOT_PRECISION)
// CHECK-NEXT: for start_n in range(full_stop, key_stop, BLOCK_N):
// CHECK: keep = live[:, None] & (offs_n[None, :] < kv_end)
// CHECK: ds = tl.where(keep, (numerator_ds(s, shift, b, h, i, j) * dp - denominator_ds(s, shift, b, h, i, j) * delta[:, None]) * inv_c, 0.0)
// CHECK-NEXT: draw = ds
// CHECK-NEXT: dq += tl.dot(draw.to(k.dtype), k, input_precision=DOT_PRECISION)

// -----

// TanhMax: the stabiliser is max(s, -s) = |s|; g and h both shifted.
attn.normalizer @tanhmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %g = arith.subf %p, %n : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %w = arith.addf %p, %n : f32
    attn.yield %w : f32
  }
}
attn.kernel @tanhmax_attention normalizer(@tanhmax)

// CHECK: KERNEL = "tanhmax_attention"
// CHECK: def stabilizer(s, b, h, i, j):
// CHECK-NEXT: t0 = (-s)
// CHECK-NEXT: t1 = tl.maximum(s, t0, propagate_nan=tl.PropagateNan.ALL)
// CHECK: def numerator(s, m, b, h, i, j):
// CHECK-NEXT: t0 = (s - m)
// CHECK-NEXT: t1 = tl.exp(t0)
// CHECK-NEXT: t2 = (-s)
// CHECK-NEXT: t3 = (t2 - m)
// CHECK-NEXT: t4 = tl.exp(t3)
// CHECK-NEXT: t5 = (t1 - t4)
// CHECK: def denominator(s, m, b, h, i, j):

// -----

// A plain normalizer with a param over a constant denominator: no running max,
// C = 1, and dθ reduced per program into its own slot.
attn.normalizer @sigmoid params(bias = -4.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f32):
    %one = arith.constant 1.0 : f32
    %x = arith.addf %s, %bias : f32
    %nx = arith.negf %x : f32
    %e = math.exp %nx : f32
    %den = arith.addf %one, %e : f32
    %g = arith.divf %one, %den : f32
    attn.yield %g : f32
  }
  denominator constant 1.0
}
attn.kernel @sigmoid_attention normalizer(@sigmoid)

// CHECK: ALGORITHM = "plain"
// CHECK-NEXT: PARAM_NAMES = ("bias", )
// CHECK-NEXT: PARAM_INITS = (-4.0, )
// CHECK: def numerator(s, m, b, h, i, j, p_bias):
// CHECK-NEXT: t0 = (s + p_bias)
// CHECK: def numerator_d_bias(s, m, b, h, i, j, p_bias):
// CHECK: def attn_fwd(
// CHECK-NOT: m_i = 
// CHECK: p_bias = tl.load(Params + 0)
// CHECK: shift = 0.0
// CHECK-NEXT: g = numerator(s, shift, b, h, i, j, p_bias)
// CHECK-NEXT: count = count + BLOCK_N
// CHECK-NEXT: acc = acc + tl.dot(
// CHECK: shift = 0.0
// CHECK-NEXT: g = tl.where(keep, numerator(s, shift, b, h, i, j, p_bias), 0.0)
// CHECK-NEXT: count = count + tl.sum(keep.to(tl.float32), 1)
// CHECK-NEXT: acc = acc + tl.dot(
// CHECK: c = 1.0
// CHECK: tl.store(RowMax + bh * NQ + offs_m, 0.0, mask=row_in)
// CHECK: def attn_bwd_dkdv(
// CHECK: d_p_bias = tl.zeros([BLOCK_N], tl.float32)
// CHECK: ds = tl.where(keep, numerator_ds(s, shift, b, h, i, j, p_bias) * dp * inv_c, 0.0)
// CHECK: d_p_bias += tl.sum(tl.where(keep, numerator_d_bias(s, shift, b, h, i, j, p_bias) * dp * inv_c, 0.0), 0)
// CHECK: slot = (bhk * tl.num_programs(0) + start_n) * 1
// CHECK-NEXT: tl.store(DParamsKeys + slot + 0, tl.sum(d_p_bias, 0))

// -----

// A mask over the indices: unsigned compares on uint64 (the indices are index: 64-bit), and-ed into keep.
attn.mask @window {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %width = arith.constant 3 : index
  %j_reach = arith.addi %j, %width : index
  %i_reach = arith.addi %i, %width : index
  %after_start = arith.cmpi uge, %j_reach, %i : index
  %before_end = arith.cmpi uge, %i_reach, %j : index
  %keep = arith.andi %after_start, %before_end : i1
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
attn.kernel @sliding_window_attention normalizer(@softmax) mask(@window)

// CHECK: def mask(b, h, i, j):
// CHECK-NEXT: i = tl.cast(i, tl.int64)
// CHECK-NEXT: j = tl.cast(j, tl.int64)
// CHECK-NEXT: t0 = (j + 3)
// CHECK-NEXT: t1 = (i + 3)
// CHECK-NEXT: t2 = (tl.cast(t0, tl.uint64, bitcast=True) >= tl.cast(i, tl.uint64, bitcast=True))
// CHECK-NEXT: t3 = (tl.cast(t1, tl.uint64, bitcast=True) >= tl.cast(j, tl.uint64, bitcast=True))
// CHECK-NEXT: t4 = (t2 & t3)
// CHECK-NEXT: return t4
// CHECK: def attn_fwd(
// CHECK: keep = keep & mask(b, h, i, j)
// CHECK: def attn_bwd_dkdv(
// CHECK: keep = keep & mask(b, h, i, j)
// CHECK: def attn_bwd_dq(
// CHECK: keep = keep & mask(b, h, i, j)

// -----

// A score param (ALiBi from the indices): the mod and its derivatives by the raw
// score and the param; dθ += ds·∂mod/∂θ. A fixed scale is a constant.
attn.score @alibi contract scaled_dot scale 0.25 params(slope = 0.25) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %slope: f32):
  %delta = arith.subi %i, %j : index
  %delta64 = arith.index_cast %delta : index to i64
  %distance = arith.sitofp %delta64 : i64 to f32
  %absolute = math.absf %distance : f32
  %penalty = arith.mulf %slope, %absolute : f32
  %biased = arith.subf %s, %penalty : f32
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
attn.kernel @alibi_attention normalizer(@softmax) score(@alibi)

// CHECK: PARAM_NAMES = ("slope", )
// CHECK: def score_scale(head_dim):
// CHECK-NEXT: """The factor of the contraction q·k."""
// CHECK-NEXT: return 0.25
// CHECK: def score_mod(raw, b, h, i, j, p_slope):
// CHECK-NEXT: i = tl.cast(i, tl.int64)
// CHECK-NEXT: j = tl.cast(j, tl.int64)
// CHECK-NEXT: t0 = (i - j)
// CHECK-NEXT: t1 = tl.cast(t0, tl.float32)
// CHECK-NEXT: t2 = tl.abs(t1)
// CHECK: def score_mod_draw(raw, b, h, i, j, p_slope):
// CHECK-NEXT: return 1.0
// CHECK: def score_mod_d_slope(raw, b, h, i, j, p_slope):
// CHECK: s = score_mod(raw, b, h, i, j, p_slope)
// CHECK: def attn_bwd_dkdv(
// CHECK: draw = tl.where(keep, ds * score_mod_draw(raw, b, h, i, j, p_slope), 0.0)
// CHECK: d_p_slope += tl.sum(tl.where(keep, ds * score_mod_d_slope(raw, b, h, i, j, p_slope), 0.0), 0)
// CHECK: def attn_bwd_dq(
// CHECK: for start_n in range(0, full_stop, BLOCK_N):
// CHECK: draw = ds * score_mod_draw(raw, b, h, i, j, p_slope)
// CHECK: for start_n in range(full_stop, key_stop, BLOCK_N):
// CHECK: draw = tl.where(keep, ds * score_mod_draw(raw, b, h, i, j, p_slope), 0.0)

// -----

// Tensor inputs: each table is a pointer, its extents and its strides; reads clamp
// every index to [0, extent); a learnable table's read gets its derivative and its
// row-major position, and attn_bwd_dkdv scatters the pairs' gradients into the
// program's own slots.
attn.input @doc : tensor<?x?xi64>
attn.input @bias learnable : tensor<?x4xf32>
attn.mask @same_document {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %di = attn.read @doc[%b, %i] : i64
  %dj = attn.read @doc[%b, %j] : i64
  %keep = arith.cmpi eq, %di, %dj : i64
  attn.yield %keep : i1
}
attn.score @biased contract scaled_dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %ij = arith.subi %j, %i : index
  %bias = attn.read @bias[%h, %ij] : f32
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
attn.kernel @tables normalizer(@softmax) score(@biased) mask(@same_document)

// CHECK: INPUTS = (("doc", "t_doc", "i64", (-1, -1,), False), ("bias", "t_bias", "fp32", (-1, 4,), True), )
// CHECK: def mask(b, h, i, j, t_doc, t_doc_n0, t_doc_n1, t_doc_s0, t_doc_s1, t_bias, t_bias_n0, t_bias_n1, t_bias_s0, t_bias_s1):
// CHECK-NEXT: b = tl.cast(b, tl.int64)
// CHECK-NEXT: i = tl.cast(i, tl.int64)
// CHECK-NEXT: j = tl.cast(j, tl.int64)
// CHECK-NEXT: tl.load(t_doc + tl.cast(tl.minimum(tl.maximum(b, 0), t_doc_n0 - 1), tl.int32) * t_doc_s0 + tl.cast(tl.minimum(tl.maximum(i, 0), t_doc_n1 - 1), tl.int32) * t_doc_s1).to(tl.int64)
// CHECK: def score_mod_at_t_bias_0(raw, b, h, i, j,
// CHECK-NEXT: h = tl.cast(h, tl.int64)
// CHECK-NEXT: i = tl.cast(i, tl.int64)
// CHECK-NEXT: j = tl.cast(j, tl.int64)
// CHECK-NEXT: = (j - i)
// CHECK-NEXT: = ((tl.cast(tl.minimum(tl.maximum(h, 0), t_bias_n0 - 1), tl.int32)) * t_bias_n1 + tl.cast(tl.minimum(tl.maximum(t0, 0), t_bias_n1 - 1), tl.int32))
// CHECK: def attn_bwd_dkdv(
// CHECK: t_doc, t_doc_n0, t_doc_n1, t_doc_s0, t_doc_s1, t_bias, t_bias_n0, t_bias_n1, t_bias_s0, t_bias_s1, dt_bias,
// CHECK: position = score_mod_at_t_bias_0(raw, b, h, i, j, {{.*}}) + tl.zeros([BLOCK_M, BLOCK_N], tl.int32)
// CHECK-NEXT: value = tl.where(keep, ds * score_mod_d_t_bias_0(raw, b, h, i, j, {{.*}}), 0.0)
// CHECK-NEXT: first = tl.min(tl.where(keep, position, 2147483647))
// CHECK-NEXT: last = tl.max(tl.where(keep, position, -1))
// CHECK-NEXT: for element in range(first, last + 1):
// CHECK-NEXT: tl.atomic_add(dt_bias + (bhk * tl.num_programs(0) + start_n) * (t_bias_n0 * t_bias_n1) + element, tl.sum(tl.where(position == element, value, 0.0)))

// -----

// Block sparsity: an `indices` mask (a sliding window) is classified per tile by
// tile_class, the interval arithmetic of attn-analyze-block-sparsity over the tile's
// rows and keys; the forward, dK/dV and dQ loops skip the tiles it keeps no pair
// of and evaluate the mask only on the tiles it does not keep whole.
attn.mask @window {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %w = arith.constant 3 : index
  %jw = arith.addi %j, %w : index
  %iw = arith.addi %i, %w : index
  %after = arith.cmpi sge, %jw, %i : index
  %before = arith.cmpi sge, %iw, %j : index
  %keep = arith.andi %after, %before : i1
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
attn.kernel @window_attention normalizer(@softmax) mask(@window)

// CHECK: KERNEL = "window_attention"
// CHECK: def tile_class(b, h, row_lo, row_hi, key_lo, key_hi):
// CHECK: return [[ANY:t[0-9]+]], [[ALL:t[0-9]+]]
// CHECK: def attn_fwd(
// CHECK: for start_n in range(0, key_stop, BLOCK_N):
// CHECK: any_kept, all_kept = tile_class(b, h, start_m * BLOCK_M + q_start, start_m * BLOCK_M + q_start + BLOCK_M - 1, start_n + key_start, start_n + key_start + BLOCK_N - 1)
// CHECK-NEXT: if any_kept:
// CHECK-NEXT: k = tl.load(
// CHECK: if not all_kept:
// CHECK-NEXT: keep = keep & mask(b, h, i, j)
// CHECK: def attn_bwd_dkdv(
// CHECK: first_m = tl.minimum(tl.maximum(start_n * BLOCK_N + key_start - q_start, 0) // BLOCK_M * BLOCK_M, NQ).to(tl.int32)
// CHECK: for start_m in range(first_m, NQ, BLOCK_M):
// CHECK-NEXT: # Block sparsity
// CHECK-NEXT: any_kept, all_kept = tile_class(b, h, start_m + q_start, start_m + q_start + BLOCK_M - 1, start_n * BLOCK_N + key_start, start_n * BLOCK_N + key_start + BLOCK_N - 1)
// CHECK-NEXT: if any_kept:
// CHECK: if not all_kept:
// CHECK-NEXT: keep = keep & mask(b, h, i, j)
// CHECK: def attn_bwd_dq(
// CHECK: any_kept, all_kept = tile_class(b, h, start_m * BLOCK_M + q_start, start_m * BLOCK_M + q_start + BLOCK_M - 1, start_n + key_start, start_n + key_start + BLOCK_N - 1)
// CHECK-NEXT: if any_kept:
// CHECK: if not all_kept:
// CHECK-NEXT: keep = keep & mask(b, h, i, j)

// -----

// Integer ops without a Triton operator call the module's helpers: math.ctlz counts
// the zeros of its operand's width (T5's buckets take it of an i64), floordivsi
// rounds toward -inf, and the unsigned ops work on the bits.
attn.score @buckets contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %n = arith.subi %i, %j : index
  %n64 = arith.index_cast %n : index to i64
  %zeros = math.ctlz %n64 : i64
  %three = arith.constant 3 : i64
  %floor = arith.floordivsi %zeros, %three : i64
  %half = arith.shrui %floor, %three : i64
  %f = arith.sitofp %half : i64 to f32
  %t = arith.addf %s, %f : f32
  attn.yield %t : f32
}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @bucket_attention normalizer(@softmax) score(@buckets)

// CHECK: KERNEL = "bucket_attention"
// CHECK: def ctlz_(x, WIDTH: tl.constexpr):
// CHECK: def floordiv_(x, y):
// CHECK: def score_mod(raw, b, h, i, j):
// CHECK-NEXT: i = tl.cast(i, tl.int64)
// CHECK-NEXT: j = tl.cast(j, tl.int64)
// CHECK-NEXT: t0 = (i - j)
// CHECK-NEXT: t1 = tl.cast(ctlz_(t0, 64), tl.int64)
// CHECK-NEXT: t2 = floordiv_(t1, 3)
// CHECK-NEXT: t3 = tl.cast((tl.cast(t2, tl.uint64, bitcast=True) >> 3), tl.int64, bitcast=True)

// -----

// The cosine contraction: q and k contract as unit rows (ε² = 1e-12 under the square
// root), dq and dk go back through the norms, and the score's scale is the factor.
attn.score @cosine contract cosine scale 5.0
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @cosine_attention normalizer(@softmax) score(@cosine)

// CHECK: KERNEL = "cosine_attention"
// CHECK: def score_scale(head_dim):
// CHECK-NEXT: """The factor of the contraction q·k."""
// CHECK-NEXT: return 5.0
// CHECK: def unit_rows(x):
// CHECK: inverse_norm = 1.0 / tl.sqrt(tl.sum(rows * rows, 1) + 9.9999999999999998e-13)
// CHECK: def through_unit_rows(x, d_unit):
// CHECK: return (d_unit - unit * along[:, None]) * inverse_norm[:, None]
// CHECK: def attn_fwd(
// CHECK: q = unit_rows(q_rows)
// CHECK: k = unit_rows(k_rows)
// CHECK: def attn_bwd_dkdv(
// CHECK: k = unit_rows(k_rows)
// CHECK: q = unit_rows(q_rows)
// CHECK: through_unit_rows(k_rows, dk * scale).to(DK.dtype.element_ty)
// CHECK: def attn_bwd_dq(
// CHECK: through_unit_rows(q_rows, dq * scale).to(DQ.dtype.element_ty)

// -----

// The bilinear contraction: W [d, d] follows the params in Params (WEIGHTS says
// where); q' = q·W as q is loaded, dq = dq'·Wᵀ, and the dQ programs write dW = Σ qᵀ·dq'
// into their row slots, whose stride counts the weight's elements.
attn.score @general contract bilinear weights(W: 16x16 = identity)
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @general_attention normalizer(@softmax) score(@general)

// CHECK: KERNEL = "general_attention"
// CHECK: PARAM_NAMES = ()
// CHECK: WEIGHTS = (("W", (16, 16,), 0, "identity"), )
// CHECK: def attn_fwd(
// CHECK: weight = tl.load(Params + 0 + offs_d[:, None] * HEAD_DIM + offs_d[None, :], mask=(offs_d[:, None] < HEAD_DIM) & (offs_d[None, :] < HEAD_DIM), other=0.0)
// CHECK-NEXT: q_rows = tl.load(Q
// CHECK-NEXT: q = tl.dot(q_rows, weight.to(q_rows.dtype), input_precision=DOT_PRECISION).to(q_rows.dtype)
// CHECK: def attn_bwd_dkdv(
// CHECK: weight = tl.load(Params
// CHECK: q = tl.dot(q_rows, weight.to(q_rows.dtype)
// CHECK: (dk * scale).to(DK.dtype.element_ty)
// CHECK: def attn_bwd_dq(
// CHECK-NEXT: Q, K, V, DOut, DQ, RowMax, RowSum, Delta, Params, KeyLengths, QueryStarts, DParamsRows,
// CHECK: tl.dot(dq * scale, tl.trans(weight), input_precision=DOT_PRECISION).to(DQ.dtype.element_ty)
// CHECK: dw = tl.dot(tl.trans(q_rows.to(tl.float32)), dq * scale, input_precision=DOT_PRECISION)
// CHECK-NEXT: slot = (bh * tl.num_programs(0) + start_m) * 256
// CHECK-NEXT: tl.store(DParamsRows + slot + 0 + offs_d[:, None] * HEAD_DIM + offs_d[None, :], dw,

// -----

// The additive contraction: s = Σ_n v_n·tanh(a_in + c_jn) with a = q·W_qᵀ and
// c = k·W_kᵀ (n = 8 columns in a tile of 16), over [BLOCK_M, BLOCK_N, HIDDEN_CHUNK]
// tiles, one chunk of hidden columns at a time, each projected where it is used, with
// 16 x 16 tiles in every schedule; the backward recomputes the chunks' tanh tiles and
// adds their gradients into per-chunk accumulators; dq and dk through the weights,
// dW_q into the dQ programs' slots, dW_k and dv into the dK programs'.
attn.score @concat contract additive hidden 8 weights(W_q: 8x16 = identity, W_k: 8x16 = identity, v: 8 = 0.25)
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @concat_attention normalizer(@softmax) score(@concat)

// CHECK: KERNEL = "concat_attention"
// CHECK: WEIGHTS = (("W_q", (8, 16,), 0, "identity"), ("W_k", (8, 16,), 128, "identity"), ("v", (8,), 256, 0.25), )
// CHECK: ("sm_90", "bf16", 64): dict(forward=(16, 16, 4, 1), backward=(16, 16, 4, 1), decode=(16, 16, 4, 1)),
// CHECK: DEFAULT_SCHEDULE = dict(forward=(16, 16, 4, 1), backward=(16, 16, 4, 1), decode=(16, 16, 4, 1))
// CHECK: HIDDEN = tl.constexpr(8)
// CHECK-NEXT: BLOCK_HIDDEN = tl.constexpr(16)
// CHECK: HIDDEN_CHUNK = tl.constexpr(16)
// CHECK-NEXT: HIDDEN_CHUNKS = tl.constexpr(1)
// CHECK: def score_scale(head_dim):
// CHECK-NEXT: """
// CHECK-NEXT: return 1.0
// CHECK: def tanh_(x):
// CHECK: def projection_weight(W, HEAD_DIM, BLOCK_D: tl.constexpr):
// CHECK: return tl.load(W + rows * HEAD_DIM + cols, mask=(rows < HIDDEN) & (cols < HEAD_DIM), other=0.0)
// CHECK: def hidden_chunk(rows, W, first, HEAD_DIM, BLOCK_D: tl.constexpr, DOT_PRECISION: tl.constexpr):
// CHECK: w = tl.load(W + hidden * HEAD_DIM + cols, mask=(hidden < HIDDEN) & (cols < HEAD_DIM), other=0.0)
// CHECK-NEXT: return tl.dot(rows, tl.trans(w).to(rows.dtype), input_precision=DOT_PRECISION)
// CHECK: def additive_chunk(q_rows, k_rows, WQ, WK, WV, first, HEAD_DIM, BLOCK_D: tl.constexpr,
// CHECK: return tanh_(a[:, None, :] + c[None, :, :]), tl.load(WV + hidden, mask=hidden < HIDDEN, other=0.0)
// CHECK: def additive_scores(
// CHECK: for first in range(0, BLOCK_HIDDEN, HIDDEN_CHUNK):
// CHECK: raw += tl.sum(tanh_tile * weight_v[None, None, :], 2)
// CHECK: def into_chunk(acc, part, first):
// CHECK: chunk = tl.arange(0, HIDDEN_CHUNKS) == first // HIDDEN_CHUNK
// CHECK-NEXT: return acc + tl.where(chunk[None, :, None], part[:, None, :], 0.0)
// CHECK: def attn_fwd(
// CHECK-NOT: weight_q
// CHECK: raw = additive_scores(q_rows, k_rows, Params + 0, Params + 128, Params + 256, HEAD_DIM, BLOCK_D, DOT_PRECISION) * scale
// CHECK: def attn_fwd_split(
// CHECK: raw = additive_scores(q_rows, k_rows, Params + 0, Params + 128, Params + 256, HEAD_DIM, BLOCK_D, DOT_PRECISION) * scale
// CHECK: def attn_bwd_dkdv(
// CHECK: dk = tl.zeros([BLOCK_N, HIDDEN_CHUNKS, HIDDEN_CHUNK], tl.float32)
// CHECK-NEXT: d_weight_v = tl.zeros([1, HIDDEN_CHUNKS, HIDDEN_CHUNK], tl.float32)
// CHECK: for first in range(0, BLOCK_HIDDEN, HIDDEN_CHUNK):
// CHECK-NEXT: tanh_tile, weight_v = additive_chunk(q_rows, k_rows, Params + 0, Params + 128, Params + 256, first, HEAD_DIM, BLOCK_D, DOT_PRECISION)
// CHECK-NEXT: dk = into_chunk(dk, tl.sum(draw[:, :, None] * weight_v[None, None, :] * (1.0 - tanh_tile * tanh_tile), 0), first)
// CHECK-NEXT: d_weight_v = into_chunk(d_weight_v, tl.sum(tl.sum(draw[:, :, None] * tanh_tile, 0), 0)[None, :], first)
// CHECK: dk = tl.reshape(dk, [BLOCK_N, BLOCK_HIDDEN])
// CHECK-NEXT: d_weight_v = tl.reshape(d_weight_v, [BLOCK_HIDDEN])
// CHECK: d_k_proj = dk * scale
// CHECK: tl.store(DParamsKeys + (bhk * tl.num_programs(0) + start_n) * 264 + 128 + offs_hidden[:, None] * HEAD_DIM + offs_d[None, :], tl.dot(tl.trans(d_k_proj), k_rows.to(tl.float32), input_precision=DOT_PRECISION),
// CHECK-NEXT: tl.store(DParamsKeys + (bhk * tl.num_programs(0) + start_n) * 264 + 256 + offs_hidden, d_weight_v * scale, mask=offs_hidden < HIDDEN)
// CHECK-NEXT: tl.store(DK {{.*}} tl.dot(d_k_proj, projection_weight(Params + 128, HEAD_DIM, BLOCK_D), input_precision=DOT_PRECISION).to(DK.dtype.element_ty)
// CHECK: def attn_bwd_dq(
// CHECK-NEXT: Q, K, V, DOut, DQ, RowMax, RowSum, Delta, Params, KeyLengths, QueryStarts, DParamsRows,
// CHECK: dq = tl.zeros([BLOCK_M, HIDDEN_CHUNKS, HIDDEN_CHUNK], tl.float32)
// CHECK: for first in range(0, BLOCK_HIDDEN, HIDDEN_CHUNK):
// CHECK-NEXT: tanh_tile, weight_v = additive_chunk(q_rows, k_rows, Params + 0, Params + 128, Params + 256, first, HEAD_DIM, BLOCK_D, DOT_PRECISION)
// CHECK-NEXT: dq = into_chunk(dq, tl.sum(draw[:, :, None] * weight_v[None, None, :] * (1.0 - tanh_tile * tanh_tile), 1), first)
// CHECK-NEXT: for start_n in range(full_stop, key_stop, BLOCK_N):
// CHECK: dq = into_chunk(dq, tl.sum(draw[:, :, None] * weight_v[None, None, :] * (1.0 - tanh_tile * tanh_tile), 1), first)
// CHECK-NEXT: dq = tl.reshape(dq, [BLOCK_M, BLOCK_HIDDEN])
// CHECK: d_q_proj = dq * scale
// CHECK: tl.store(DParamsRows + (bh * tl.num_programs(0) + start_m) * 264 + 0 + offs_hidden[:, None] * HEAD_DIM + offs_d[None, :], tl.dot(tl.trans(d_q_proj), q_rows.to(tl.float32), input_precision=DOT_PRECISION),
// CHECK-NEXT: tl.store(DQ {{.*}} tl.dot(d_q_proj, projection_weight(Params + 0, HEAD_DIM, BLOCK_D), input_precision=DOT_PRECISION).to(DQ.dtype.element_ty)

// -----

// A learnable projection before the feature map, s = φ(W q)·φ(W k) with W [24, 16]:
// φ of the projection's m = 24 columns (of a tile of 32) as the rows are loaded (W
// loaded where it is used), the scale 1/sqrt(m), dq and dk chained through φ' and W,
// dW from both sides' programs; 32 x 32 backward tiles.
attn.score @nested contract scaled_dot weights(W: 24x16 = identity) feature {
^bb0(%x: f32):
  %t = math.tanh %x : f32
  attn.yield %t : f32
}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @nested_attention normalizer(@softmax) score(@nested)

// CHECK: KERNEL = "nested_attention"
// CHECK: WEIGHTS = (("W", (24, 16,), 0, "identity"), )
// CHECK: ("sm_90", "bf16", 64): dict(forward=(128, 64, 4, 3), backward=(32, 32, 4, 2),
// CHECK: DEFAULT_SCHEDULE = dict(forward=(64, 64, 4, 2), backward=(32, 32, 4, 2),
// CHECK: HIDDEN = tl.constexpr(24)
// CHECK-NEXT: BLOCK_HIDDEN = tl.constexpr(32)
// CHECK: def score_scale(head_dim):
// CHECK-NEXT: """
// CHECK-NEXT: return 0.20412414523193154
// CHECK: def attn_fwd(
// CHECK: q_proj = tl.dot(q_rows, tl.trans(projection_weight(Params + 0, HEAD_DIM, BLOCK_D)).to(q_rows.dtype), input_precision=DOT_PRECISION)
// CHECK: q = tl.where(offs_hidden[None, :] < HIDDEN, feature(q_proj), 0.0).to(q_rows.dtype)
// CHECK: k = tl.where(offs_hidden[None, :] < HIDDEN, feature(k_proj), 0.0).to(k_rows.dtype)
// CHECK: raw = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale
// CHECK: def attn_bwd_dkdv(
// CHECK: dk = tl.zeros([BLOCK_N, BLOCK_HIDDEN], tl.float32)
// CHECK: d_k_proj = feature_dx(k_proj) * (dk * scale)
// CHECK: tl.store(DParamsKeys + (bhk * tl.num_programs(0) + start_n) * 384 + 0 + offs_hidden[:, None] * HEAD_DIM + offs_d[None, :], tl.dot(tl.trans(d_k_proj), k_rows.to(tl.float32)
// CHECK: tl.dot(d_k_proj, projection_weight(Params + 0, HEAD_DIM, BLOCK_D), input_precision=DOT_PRECISION).to(DK.dtype.element_ty)
// CHECK: def attn_bwd_dq(
// CHECK-NEXT: Q, K, V, DOut, DQ, RowMax, RowSum, Delta, Params, KeyLengths, QueryStarts, DParamsRows,
// CHECK: d_q_proj = feature_dx(q_proj) * (dq * scale)
// CHECK: tl.store(DParamsRows + (bh * tl.num_programs(0) + start_m) * 384 + 0 + offs_hidden[:, None] * HEAD_DIM + offs_d[None, :], tl.dot(tl.trans(d_q_proj), q_rows.to(tl.float32)
// CHECK: tl.dot(d_q_proj, projection_weight(Params + 0, HEAD_DIM, BLOCK_D), input_precision=DOT_PRECISION).to(DQ.dtype.element_ty)

// -----

// A feature map in the quadratic form: φ and φ' as functions of the element, φ of
// the head dim's columns of each tile as loaded, and dq, dk chained through φ'.
attn.score @feature_softmax contract dot feature {
^bb0(%x: f32):
  %t = math.tanh %x : f32
  attn.yield %t : f32
}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @feature_attention normalizer(@softmax) score(@feature_softmax)

// CHECK: KERNEL = "feature_attention"
// CHECK: def feature(x):
// CHECK-NEXT: t0 = tanh_(x)
// CHECK-NEXT: return t0
// CHECK: def feature_dx(x):
// CHECK: def attn_fwd(
// CHECK: q = tl.where(offs_d[None, :] < HEAD_DIM, feature(q_rows.to(tl.float32)), 0.0).to(q_rows.dtype)
// CHECK: k = tl.where(offs_d[None, :] < HEAD_DIM, feature(k_rows.to(tl.float32)), 0.0).to(k_rows.dtype)
// CHECK: def attn_bwd_dkdv(
// CHECK: (feature_dx(k_rows.to(tl.float32)) * dk * scale).to(DK.dtype.element_ty)
// CHECK: def attn_bwd_dq(
// CHECK: (feature_dx(q_rows.to(tl.float32)) * dq * scale).to(DQ.dtype.element_ty)

// -----

// A denominator's ε (softmax1: C = 1 + Σ e^s): attn_fwd_split leaves it out (its max
// starts at -inf); attn_fwd_merge starts the max at log ε and adds ε once.
attn.normalizer @softmax1 {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator epsilon 1.0 sum
}
attn.kernel @softmax1_attention normalizer(@softmax1)

// CHECK: KERNEL = "softmax1_attention"
// CHECK: def attn_fwd(
// CHECK: m_i = tl.zeros([BLOCK_M], tl.float32)
// CHECK: c = l_i + 1.0 * tl.exp2(-m_i * LOG2E)
// CHECK: def attn_fwd_split(
// CHECK: m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
// CHECK-NOT: tl.exp2(-m_i * LOG2E)
// CHECK: def attn_fwd_merge(
// CHECK: m_i = tl.zeros([BLOCK_M], tl.float32)
// CHECK: c = l_i + 1.0 * tl.exp2(-m_i * LOG2E)
// CHECK: def attn_bwd_preprocess(
