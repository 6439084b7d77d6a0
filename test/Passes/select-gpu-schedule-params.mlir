// RUN: attn-opt %s --split-input-file --attn-select-gpu-schedule="targets=sm_80,sm_90 element-types=bf16,f32 head-dims=64,128" | FileCheck %s

// Four learnable params: dK/dV sums a [rows, keys] gradient term per param in each
// tile, so 16-bit storage gets 32 × 64 backward tiles with eight warps on sm_90 and
// 32 × 32 with four on sm_80 (MultiMax's eight spilled 2.8–3.1 KB at 64 × 64); the
// forward and f32 keep the default's.
attn.normalizer @four_params params(a = 1.0, b0 = 0.0, c = 0.0, d = 0.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
       %a: f32, %b0: f32, %c: f32, %d: f32):
    %x = math.fma %a, %s, %b0 : f32
    %y = arith.addf %x, %c : f32
    %z = arith.addf %y, %d : f32
    %e = math.exp %z : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @k normalizer(@four_params) {algorithm = #attn<algorithm online>}

// CHECK: gpu_schedule = [
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_80", type = bf16, head_dim = 64, block_m = 128, block_n = 64, num_warps = 4, num_stages = 3, backward_block_m = 32, backward_block_n = 32, backward_num_warps = 4, backward_num_stages = 2>
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_80", type = bf16, head_dim = 128, block_m = 128, block_n = 64, num_warps = 8, num_stages = 2, backward_block_m = 32, backward_block_n = 32, backward_num_warps = 4, backward_num_stages = 2>
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_80", type = f32
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 64, block_m = 128, block_n = 64, num_warps = 4, num_stages = 3, backward_block_m = 32, backward_block_n = 64, backward_num_warps = 8, backward_num_stages = 2>
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 128, block_m = 128, block_n = 64, num_warps = 8, num_stages = 3, backward_block_m = 32, backward_block_n = 64, backward_num_warps = 8, backward_num_stages = 2>
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_90", type = f32, head_dim = 64, block_m = 64, block_n = 32, num_warps = 4, num_stages = 2, backward_block_m = 32, backward_block_n = 32, backward_num_warps = 4, backward_num_stages = 1>

// -----

// Three: the default's 64 × 64 backward tiles.
attn.normalizer @three_params params(a = 1.0, b0 = 0.0, c = 0.0) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %a: f32, %b0: f32, %c: f32):
    %x = math.fma %a, %s, %b0 : f32
    %y = arith.addf %x, %c : f32
    %e = math.exp %y : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @k normalizer(@three_params) {algorithm = #attn<algorithm online>}

// CHECK: gpu_schedule = [
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 64, block_m = 128, block_n = 64, num_warps = 4, num_stages = 3, backward_block_m = 64, backward_block_n = 64, backward_num_warps = 4, backward_num_stages = 2>
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 128, block_m = 128, block_n = 64, num_warps = 8, num_stages = 3, backward_block_m = 64, backward_block_n = 64, backward_num_warps = 8, backward_num_stages = 2>
