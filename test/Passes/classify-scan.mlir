// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-select-schedule | FileCheck %s
//
// A `denominator log_survival` normalizer (stick-breaking) is a scan: its normalizer
// and kernel get algorithm scan (never kernelised, even where g is linear in s), and
// its kernel the generic CPU loops only (no tiled or decode schedule).

// CHECK-LABEL: attn.normalizer @stick_breaking
// CHECK-SAME: algorithm = #attn<algorithm scan>
// CHECK: attn.kernel @k normalizer(@stick_breaking)
// CHECK-SAME: algorithm = #attn<algorithm scan>
// CHECK-SAME: cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>, #attn.cpu_schedule<type = f64, variant = generic>]
attn.normalizer @stick_breaking {
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
  }
}
attn.kernel @k normalizer(@stick_breaking)

// -----

// g = s with a feature-map dot score would be kernelised with a summed denominator;
// under a log-survival it stays a scan. d = -|s| <= 0 for any s.
// CHECK-LABEL: attn.normalizer @linear_share
// CHECK-SAME: algorithm = #attn<algorithm scan>
// CHECK: attn.kernel @linear_k
// CHECK-SAME: algorithm = #attn<algorithm scan>
attn.score @positive contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %r = arith.maximumf %x, %zero : f32
  attn.yield %r : f32
}
attn.normalizer @linear_share {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator log_survival {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %a = math.absf %s : f32
    %d = arith.negf %a : f32
    attn.yield %d : f32
  }
}
attn.kernel @linear_k normalizer(@linear_share) score(@positive)
