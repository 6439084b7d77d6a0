// RUN: attn-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{a tiled schedule needs a head_dim that is a positive multiple of lanes, got head_dim 36 and lanes 8}}
#bad = #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 36, lanes = 8, rows = 2, forward_keys = 16, backward_keys = 8, backward_rows = 2>

// -----

// expected-error @+1 {{a tiled schedule needs lanes that are a power of two, got 6}}
#bad = #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 12, lanes = 6, rows = 2, forward_keys = 12, backward_keys = 6, backward_rows = 2>

// -----

// expected-error @+1 {{a tiled schedule needs rows >= 1, got 0}}
#bad = #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 0, forward_keys = 16, backward_keys = 8, backward_rows = 2>

// -----

// expected-error @+1 {{forward_keys must be a positive multiple of lanes (8), got 12}}
#bad = #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 2, forward_keys = 12, backward_keys = 8, backward_rows = 2>

// -----

// expected-error @+1 {{a decode schedule needs lanes that are a power of two, got 12}}
#bad = #attn.cpu_schedule<type = f32, variant = decode, head_dim = 48, lanes = 12, rows = 16, forward_keys = 48>

// -----

// expected-error @+1 {{a decode schedule needs a head_dim that is a positive multiple of lanes, got head_dim 40 and lanes 16}}
#bad = #attn.cpu_schedule<type = f32, variant = decode, head_dim = 40, lanes = 16, rows = 16, forward_keys = 64>

// -----

// expected-error @+1 {{a decode schedule needs rows >= 1 (the most query rows of a call it serves), got 0}}
#bad = #attn.cpu_schedule<type = f32, variant = decode, head_dim = 64, lanes = 16, rows = 0, forward_keys = 64>

// -----

// expected-error @+1 {{forward_keys must be a positive multiple of lanes (16), got 40}}
#bad = #attn.cpu_schedule<type = f32, variant = decode, head_dim = 64, lanes = 16, rows = 16, forward_keys = 40>

// -----

// expected-error @+1 {{a decode schedule has no backward (the tiled schedule of its head dim serves it): expected no backward_keys or backward_rows}}
#bad = #attn.cpu_schedule<type = f32, variant = decode, head_dim = 64, lanes = 16, rows = 16, forward_keys = 64, backward_rows = 4>

// -----

// expected-error @+1 {{a generic schedule takes no head_dim, lanes, rows or keys}}
#bad = #attn.cpu_schedule<type = f32, variant = generic, rows = 4>

// -----

// expected-error @+1 {{a CPU schedule is for a float element type, got 'i32'}}
#bad = #attn.cpu_schedule<type = i32, variant = generic>

// -----

// expected-error @+1 {{a GPU schedule is for storage type f16, bf16 or f32, got 'f64'}}
#bad = #attn.gpu_schedule<chip = "sm_90", type = f64, head_dim = 64, block_m = 128, block_n = 64, num_warps = 4, num_stages = 3, backward_block_m = 64, backward_block_n = 64, backward_num_warps = 4, backward_num_stages = 2>

// -----

// expected-error @+1 {{head_dim must be positive, got 0}}
#bad = #attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 0, block_m = 128, block_n = 64, num_warps = 4, num_stages = 3, backward_block_m = 64, backward_block_n = 64, backward_num_warps = 4, backward_num_stages = 2>

// -----

// expected-error @+1 {{chip must be sm_XY with XY >= 80 (the Triton kernels' tensor cores), got 'sm_75'}}
#bad = #attn.gpu_schedule<chip = "sm_75", type = bf16, head_dim = 64, block_m = 128, block_n = 64, num_warps = 4, num_stages = 3, backward_block_m = 64, backward_block_n = 64, backward_num_warps = 4, backward_num_stages = 2>

// -----

// expected-error @+1 {{backward_block_n must be a power of two from 16 to 256 (a tl.dot operand), got 48}}
#bad = #attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 64, block_m = 128, block_n = 64, num_warps = 4, num_stages = 3, backward_block_m = 64, backward_block_n = 48, backward_num_warps = 4, backward_num_stages = 2>

// -----

// expected-error @+1 {{num_warps must be a power of two from 1 to 16, got 3}}
#bad = #attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 64, block_m = 128, block_n = 64, num_warps = 3, num_stages = 3, backward_block_m = 64, backward_block_n = 64, backward_num_warps = 4, backward_num_stages = 2>

// -----

// expected-error @+1 {{backward_num_stages must be from 1 to 8, got 0}}
#bad = #attn.gpu_schedule<chip = "sm_90", type = bf16, head_dim = 64, block_m = 128, block_n = 64, num_warps = 4, num_stages = 3, backward_block_m = 64, backward_block_n = 64, backward_num_warps = 4, backward_num_stages = 0>

// -----

// expected-error @+1 {{functions are instantiated at a float type, got 'index'}}
#bad = #attn.functions<type = index, numerator = @g, numerator_ds = @g>

// -----

// expected-error @+1 {{lanes must be 0 (scalars) or a vector width, got -1}}
#bad = #attn.functions<type = f32, lanes = -1, numerator = @g, numerator_ds = @g>

// -----

// expected-error @+1 {{derivative lists hold function symbols, got [1]}}
#bad = #attn.functions<type = f32, numerator = @g, numerator_ds = @g, score_dp = [1]>

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op functions name @missing, which is not a function of the module}}
attn.kernel @k normalizer(@relu) {functions = [#attn.functions<type = f32, numerator = @missing, numerator_ds = @missing>]}

// -----

// expected-error @+1 {{a tiled schedule needs backward_rows >= 1, got 0}}
#bad = #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 2, forward_keys = 16, backward_keys = 8>
