// RUN: attn-opt %s --attn-select-gpu-schedule="targets=sm_90 element-types=bf16,f32 head-dims=64,128" | FileCheck %s

// A scan's kernels hold more [rows, keys] tiles than an online row's (reverse cumsums,
// e^S, w·dP): 16-bit storage gets 64 × 32 forward and 32 × 32 backward tiles (eight
// warps beyond d = 64), without spills on sm_90; f32 the default's.
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
    %a = math.absf %s : f32
    %d = arith.negf %a : f32
    attn.yield %d : f32
  }
}
attn.kernel @k normalizer(@stick_breaking) {algorithm = #attn<algorithm scan>}

// CHECK: gpu_schedule = [
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 64, block_m = 64, block_n = 32, num_warps = 4, num_stages = 2, backward_block_m = 32, backward_block_n = 32, backward_num_warps = 4, backward_num_stages = 2>
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 128, block_m = 64, block_n = 32, num_warps = 8, num_stages = 2, backward_block_m = 32, backward_block_n = 32, backward_num_warps = 8, backward_num_stages = 2>
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_90", type = f32, head_dim = 64, block_m = 64, block_n = 32, num_warps = 4, num_stages = 2, backward_block_m = 32, backward_block_n = 32, backward_num_warps = 4, backward_num_stages = 1>
