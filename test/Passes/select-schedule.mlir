// RUN: attn-opt %s --split-input-file --attn-select-schedule | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-select-schedule="element-types=f64 vector-bits=256" | FileCheck %s --check-prefix=AVX2

// Per element type a generic schedule and tiles for head dims 32, 64, 128: on
// 16 f32 lanes, 4 rows against 64 keys forward, 8 rows against 32 keys backward
// (f64: 4); f32's each beside a decode schedule (select-schedule-decode.mlir).
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

// CHECK: cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>, #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 16, rows = 4, forward_keys = 64, backward_keys = 32, backward_rows = 8>, #attn.cpu_schedule<type = f32, variant = decode, head_dim = 32, lanes = 16, rows = 16, forward_keys = 64>, #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 64, lanes = 16, rows = 4, forward_keys = 64, backward_keys = 32, backward_rows = 8>, #attn.cpu_schedule<type = f32, variant = decode, head_dim = 64, lanes = 16, rows = 16, forward_keys = 64>, #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 128, lanes = 16, rows = 4, forward_keys = 64, backward_keys = 32, backward_rows = 8>, #attn.cpu_schedule<type = f32, variant = decode, head_dim = 128, lanes = 16, rows = 16, forward_keys = 64>, #attn.cpu_schedule<type = f64, variant = generic>, #attn.cpu_schedule<type = f64, variant = tiled, head_dim = 32, lanes = 8, rows = 4, forward_keys = 32, backward_keys = 16, backward_rows = 4>, #attn.cpu_schedule<type = f64, variant = tiled, head_dim = 64, lanes = 8, rows = 4, forward_keys = 32, backward_keys = 16, backward_rows = 4>, #attn.cpu_schedule<type = f64, variant = tiled, head_dim = 128, lanes = 8, rows = 4, forward_keys = 32, backward_keys = 16, backward_rows = 4>]
// AVX2: cpu_schedule = [#attn.cpu_schedule<type = f64, variant = generic>, #attn.cpu_schedule<type = f64, variant = tiled, head_dim = 32, lanes = 4, rows = 2, forward_keys = 16, backward_keys = 8, backward_rows = 2>, #attn.cpu_schedule<type = f64, variant = tiled, head_dim = 64, lanes = 4, rows = 2, forward_keys = 16, backward_keys = 8, backward_rows = 2>, #attn.cpu_schedule<type = f64, variant = tiled, head_dim = 128, lanes = 4, rows = 2, forward_keys = 16, backward_keys = 8, backward_rows = 2>]

// -----

// A kernelised kernel runs the linear form, without tiles.
attn.normalizer @linear {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k normalizer(@linear) {algorithm = #attn<algorithm kernelised>}

// CHECK: cpu_schedule = [#attn.cpu_schedule<type = f32, variant = linear>, #attn.cpu_schedule<type = f64, variant = linear>]

// -----

// A schedule written on the kernel is kept; kernel= picks the kernel.
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @pinned normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}

// CHECK: attn.kernel @pinned normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}
