// RUN: attn-opt %s --split-input-file --attn-lower-to-loops -verify-diagnostics

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// A lowering refuses a kernel the classifier has not annotated.
// expected-error @+1 {{'attn.kernel' op has no algorithm: the kernel is not classified; run attn-classify-normalizer first}}
attn.kernel @k normalizer(@relu) {cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}

// -----

// expected-error @+1 {{no attn.kernel has a cpu_schedule; run attn-select-schedule first}}
module {
  attn.normalizer @relu {
    numerator {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      attn.yield %s : f32
    }
    denominator count
  }
  attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>}
}

// -----

// expected-error @+1 {{an artifact holds one kernel; 2 kernels have a cpu_schedule}}
module {
  attn.normalizer @relu {
    numerator {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      attn.yield %s : f32
    }
    denominator count
  }
  // expected-note @+1 {{@a}}
  attn.kernel @a normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}
  // expected-note @+1 {{@b}}
  attn.kernel @b normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}
}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no scalar functions; run attn-derive-backward first}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>]}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no f64 instance of its scalar functions; run attn-instantiate-functions first}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, functions = [#attn.functions<type = f32, numerator = @g, numerator_ds = @g>], cpu_schedule = [#attn.cpu_schedule<type = f64, variant = generic>]}
func.func private @g(%s: f32, %m: f32) -> f32 {
  return %s : f32
}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has no f32 x8 instance of its scalar functions; run attn-instantiate-functions first}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, functions = [#attn.functions<type = f32, numerator = @g, numerator_ds = @g>], cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>, #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 1, forward_keys = 8, backward_keys = 8, backward_rows = 2>]}
func.func private @g(%s: f32, %m: f32) -> f32 {
  return %s : f32
}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f16, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f16
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has a CPU schedule for 'f16'; CPU entry points exist for f32 and f64}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f16, variant = generic>]}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has a linear schedule but its algorithm is plain; the linear form needs a kernelised kernel}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = linear>]}

// -----

attn.normalizer @stick_breaking {
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
// expected-error @+1 {{'attn.kernel' op has a tiled schedule but a scan normalizer; a scan runs in the generic loops only}}
attn.kernel @k normalizer(@stick_breaking) {algorithm = #attn<algorithm scan>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>, #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 2, forward_keys = 16, backward_keys = 8, backward_rows = 2>]}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op needs one generic or linear schedule for 'f32' (for any head dim and stride), has 0}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 1, forward_keys = 8, backward_keys = 8, backward_rows = 2>]}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has two tiled schedules for head dim 32 at 'f32'}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>, #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 1, forward_keys = 8, backward_keys = 8, backward_rows = 2>, #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 2, forward_keys = 8, backward_keys = 8, backward_rows = 2>]}


// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// A decode schedule takes the forward's calls of few rows only: the tiled schedule
// of its head dim takes the rest, and the backward.
// expected-error @+1 {{'attn.kernel' op has a decode schedule for head dim 32 at 'f32' but no tiled schedule for it; calls of more rows and the backward need one}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>, #attn.cpu_schedule<type = f32, variant = decode, head_dim = 32, lanes = 8, rows = 16, forward_keys = 32>]}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
// expected-error @+1 {{'attn.kernel' op has two decode schedules for head dim 32 at 'f32'}}
attn.kernel @k normalizer(@relu) {algorithm = #attn<algorithm plain>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>, #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 1, forward_keys = 8, backward_keys = 8, backward_rows = 2>, #attn.cpu_schedule<type = f32, variant = decode, head_dim = 32, lanes = 8, rows = 16, forward_keys = 32>, #attn.cpu_schedule<type = f32, variant = decode, head_dim = 32, lanes = 8, rows = 4, forward_keys = 32>]}

// -----

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
attn.score @concat contract additive hidden 32 weights(W_q: 32x16 = identity, W_k: 32x16 = 0.5, v: 32 = 0.25)
// expected-error @+1 {{'attn.kernel' op has a decode schedule for head dim 32 but an additive score; the decode schedule reads dot-product scores only}}
attn.kernel @k normalizer(@softmax) score(@concat) {algorithm = #attn<algorithm online>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>, #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 32, lanes = 8, rows = 1, forward_keys = 8, backward_keys = 8, backward_rows = 2>, #attn.cpu_schedule<type = f32, variant = decode, head_dim = 32, lanes = 8, rows = 16, forward_keys = 32>]}

// -----

attn.normalizer @sparsemax {
  numerator {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %x, %zero : f32
    attn.yield %g : f32
  }
  denominator threshold 1.0
}
// An implicit normalizer solves τ_i over a row's keys first: no tiles for it.
// expected-error @+1 {{'attn.kernel' op has a tiled schedule but its algorithm is implicit; an implicit normalizer runs the generic schedule only}}
attn.kernel @k normalizer(@sparsemax) {algorithm = #attn<algorithm implicit>, cpu_schedule = [#attn.cpu_schedule<type = f32, variant = generic>, #attn.cpu_schedule<type = f32, variant = tiled, head_dim = 64, lanes = 16, rows = 2, forward_keys = 64, backward_keys = 32, backward_rows = 8>]}
