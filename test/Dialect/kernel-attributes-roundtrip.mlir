// RUN: attn-opt %s > %t.1
// RUN: attn-opt %t.1 > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %s --mlir-print-op-generic | attn-opt > %t.g
// RUN: diff %t.1 %t.g
// RUN: FileCheck %s < %t.1

// The attributes the passes hand each other print and parse back.
attn.normalizer @relu params(b = 0.5) {
  numerator {
  ^bb0(%s: f32, %bx: index, %h: index, %i: index, %j: index, %b: f32):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>,
  functions = [#attn.functions<type = f32, numerator = @g, numerator_ds = @g, numerator_dp = [@g]>,
               #attn.functions<type = f32, lanes = 8, numerator = @g, numerator_ds = @g>],
  cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>,
                  #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 2, forward_keys = 16, backward_keys = 8, backward_rows = 2>,
                  #attn.cpu_schedule<type = f32, variant = decode, head_dim = 32, lanes = 8, rows = 16, forward_keys = 32>],
  gpu_schedule = [#attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 64, block_m = 128, block_n = 64, num_warps = 4, num_stages = 3, backward_block_m = 64, backward_block_n = 64, backward_num_warps = 4, backward_num_stages = 2>]}
func.func private @g(%s: f32, %m: f32, %b: f32) -> f32 {
  return %s : f32
}

// CHECK: attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>, #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 2, forward_keys = 16, backward_keys = 8, backward_rows = 2>, #attn.cpu_schedule<type = f32, variant = decode, head_dim = 32, lanes = 8, rows = 16, forward_keys = 32>], functions = [#attn.functions<type = f32, numerator = @g, numerator_ds = @g, numerator_dp = [@g]>, #attn.functions<type = f32, lanes = 8, numerator = @g, numerator_ds = @g>], gpu_schedule = [#attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 64, block_m = 128, block_n = 64, num_warps = 4, num_stages = 3, backward_block_m = 64, backward_block_n = 64, backward_num_warps = 4, backward_num_stages = 2>]}
