// RUN: attn-opt %s --attn-select-gpu-schedule="targets=sm_80,sm_86,sm_90 element-types=bf16,f32 head-dims=64,128,256" | FileCheck %s
// RUN: attn-opt %s --attn-select-gpu-schedule | FileCheck %s --check-prefix=DEFAULT
// RUN: attn-opt %s --attn-select-gpu-schedule="targets=sm_90 head-dims=16" | FileCheck %s --check-prefix=D16

// One Triton schedule per chip, storage type and head dim: 16-bit storage gets 128 × 64
// forward tiles up to d = 128 (eight warps beyond d = 64; three stages on Hopper, two
// on A100, 64 × 64 where sm_86's shared memory is smaller), f32 and d = 256 smaller ones.
attn.normalizer @softmax {
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
}
attn.kernel @k normalizer(@softmax) {algorithm = #attn<algorithm online>}

// CHECK: gpu_schedule = [
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_80", type = bf16, head_dim = 64, block_m = 128, block_n = 64, num_warps = 4, num_stages = 3, backward_block_m = 64, backward_block_n = 64, backward_num_warps = 4, backward_num_stages = 2>
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_80", type = bf16, head_dim = 128, block_m = 128, block_n = 64, num_warps = 8, num_stages = 2, backward_block_m = 64, backward_block_n = 64, backward_num_warps = 8, backward_num_stages = 2>
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_80", type = bf16, head_dim = 256, block_m = 64, block_n = 32, num_warps = 4, num_stages = 2, backward_block_m = 32, backward_block_n = 32, backward_num_warps = 4, backward_num_stages = 1>
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_80", type = f32, head_dim = 64, block_m = 64, block_n = 32, num_warps = 4, num_stages = 2, backward_block_m = 32, backward_block_n = 32, backward_num_warps = 4, backward_num_stages = 1>
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_86", type = bf16, head_dim = 128, block_m = 64, block_n = 64, num_warps = 4, num_stages = 2,
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 128, block_m = 128, block_n = 64, num_warps = 8, num_stages = 3,
// CHECK-SAME: #attn.gpu_schedule<chip = "sm_90", type = f32, head_dim = 256,

// Default: sm_80 and sm_90, bf16, d = 64.
// DEFAULT: gpu_schedule = [#attn.gpu_schedule<chip = "sm_80", type = bf16, head_dim = 64, {{[^>]*}}>, #attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 64, {{[^>]*}}>]}

// d = 16 (a 16-column tile: tl.dot's smallest K) gets the d <= 64 schedule.
// D16: gpu_schedule = [#attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 16, block_m = 128, block_n = 64, num_warps = 4, num_stages = 3, backward_block_m = 64, backward_block_n = 64, backward_num_warps = 4, backward_num_stages = 2>]}
