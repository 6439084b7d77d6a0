// RUN: attn-opt %s --split-input-file --attn-explain -o /dev/null | FileCheck %s
//
// attn-opt --attn-explain: the algorithm, the stabiliser, g, h or C, the offset, the
// mod and mask, and the derivatives, as formulas (shared subterms as t0, t1, ...).

// CHECK-LABEL: kernel @tanhmax_attention
// CHECK-NEXT:  algorithm      online (flash-style): every exp factor e^x is evaluated as e^(x - m)
// CHECK-NEXT:  stabiliser     max(max(max(s, t0), s), t0)
// CHECK-NEXT:                   where t0 = -s
// CHECK-NEXT:  g              exp(s - m) - exp(-s - m)
// CHECK-NEXT:  C_i            Σ_j h
// CHECK-NEXT:  h              exp(s - m) + exp(-s - m)
// CHECK-NEXT:  ∂g/∂s          exp(s - m) + exp(-s - m)
// CHECK-NEXT:  ∂h/∂s          exp(s - m) - exp(-s - m)
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
  ^bb0(%s: f32, %b: index, %hx: index, %i: index, %j: index):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %h = arith.addf %p, %n : f32
    attn.yield %h : f32
  }
}
attn.kernel @tanhmax_attention normalizer(@tanhmax)

// -----

// A learnable param: its derivative; a constant denominator.
// CHECK-LABEL: kernel @sigmoid_attention
// CHECK-NEXT:  algorithm      plain: g and C are accumulated as written
// CHECK-NEXT:  params θ       bias
// CHECK-NEXT:  g              1 / (exp(-(s + bias)) + 1)
// CHECK-NEXT:  C_i            1
// CHECK-NEXT:  ∂g/∂s          t0·(1 - t0)
// CHECK-NEXT:                   where t0 = 1 / (exp(-(s + bias)) + 1)
// CHECK-NEXT:  ∂g/∂bias       t0·(1 - t0)
attn.normalizer @sigmoid params(bias = -4.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bias: f32):
    %one = arith.constant 1.0 : f32
    %x = arith.addf %s, %bias : f32
    %nx = arith.negf %x : f32
    %e = math.exp %nx : f32
    %d = arith.addf %one, %e : f32
    %g = arith.divf %one, %d : f32
    attn.yield %g : f32
  }
  denominator constant 1.0
}
attn.kernel @sigmoid_attention normalizer(@sigmoid)

// -----

// A tensor input read by the offset, a mask, a mod with a param.
// CHECK-LABEL: kernel @sinks_attention
// CHECK-NEXT:  algorithm      online
// CHECK-NEXT:  params θ       sigma
// CHECK-NEXT:  tensor inputs  sinks
// CHECK-NEXT:  score mod      s·sigma
// CHECK-NEXT:  mask (keep)    j <= i and j + 16 > i
// CHECK-NEXT:  stabiliser     s
// CHECK-NEXT:  g              exp(s - m)
// CHECK-NEXT:  C_i            β + Σ_j h
// CHECK-NEXT:  h              exp(s - m)
// CHECK-NEXT:  β              exp(sinks[h] - m)
// CHECK-NEXT:  ∂g/∂s          exp(s - m)
// CHECK-NEXT:  ∂h/∂s          exp(s - m)
// CHECK-NEXT:  ∂mod/∂s        sigma
// CHECK-NEXT:  ∂mod/∂sigma    s
attn.input @sinks learnable : tensor<?xf32>
attn.score @scaled contract dot params(sigma = 0.5) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sigma: f32):
  %x = arith.mulf %s, %sigma : f32
  attn.yield %x : f32
}
attn.mask @window {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %w = arith.constant 16 : index
  %causal = arith.cmpi ule, %j, %i : index
  %jw = arith.addi %j, %w : index
  %near = arith.cmpi ugt, %jw, %i : index
  %keep = arith.andi %causal, %near : i1
  attn.yield %keep : i1
}
attn.normalizer @softmax_sinks {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %sink = attn.read @sinks[%h] : f32
    %e = math.exp %sink : f32
    attn.yield %e : f32
  }
}
attn.kernel @sinks_attention normalizer(@softmax_sinks) score(@scaled) mask(@window)

// -----

// An implicit normalizer: g at s - τ_i, and the constraint that fixes τ_i.
// CHECK-LABEL: kernel @sparsemax_attention
// CHECK-NEXT:  algorithm      implicit: w_ij = g(s_ij - τ_i), τ_i found per row on Σ_j g(s_ij - τ_i) = c by Newton steps kept inside a bisection bracket; backward by implicit differentiation (g and ∂g below take s_ij - τ_i as s)
// CHECK-NEXT:  g              max(s, 0)
// CHECK-NEXT:  C_i            1, with τ_i such that Σ_j g(s_ij - τ_i) = 1
// CHECK-NEXT:  ∂g/∂s          (s > 0 ? 1 : 0)
attn.normalizer @sparsemax {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %x, %zero : f32
    attn.yield %g : f32
  }
  denominator threshold 1.0
}
attn.kernel @sparsemax_attention normalizer(@sparsemax)

// -----

// A scan: no denominator, the log-survival d in h's place, the left-over added.
// CHECK-LABEL: kernel @survival_attention
// CHECK-NEXT:  algorithm      scan (stick-breaking): each row's keys are visited from the last to the first, w_ij = g(s_ij)·exp(S), S the sum of the log-survivals d of the kept keys after j; the backward scans them in the same order
// CHECK:       C_i            1 (a scan; h is the log-survival d, the left-over r_i·v_i added)
attn.normalizer @survival {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %ns = arith.negf %s : f32
    %e = math.exp %ns : f32
    %den = arith.addf %one, %e : f32
    %sigma = arith.divf %one, %den : f32
    attn.yield %sigma : f32
  }
  denominator log_survival {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %pos = arith.maximumf %s, %zero : f32
    %abs = math.absf %s : f32
    %nabs = arith.negf %abs : f32
    %e = math.exp %nabs : f32
    %l = math.log1p %e : f32
    %softplus = arith.addf %pos, %l : f32
    %d = arith.negf %softplus : f32
    attn.yield %d : f32
  } left_over current
}
attn.kernel @survival_attention normalizer(@survival)
