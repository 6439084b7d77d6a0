// RUN: attn-opt %s --split-input-file | FileCheck %s
// RUN: attn-opt %s --split-input-file > %t.1
// RUN: attn-opt %t.1 --split-input-file > %t.2
// RUN: diff %t.1 %t.2
// RUN: attn-opt %s --split-input-file --mlir-print-op-generic | attn-opt --split-input-file > %t.g
// RUN: diff %t.1 %t.g
// RUN: attn-opt %s --split-input-file --verify-roundtrip > /dev/null

// Every contract kind, without regions.
// CHECK-LABEL: module {
// CHECK-NEXT:    attn.score @dot contract dot{{$}}
// CHECK-NEXT:    attn.score @scaled_default contract scaled_dot{{$}}
// CHECK-NEXT:    attn.score @scaled contract scaled_dot scale 0.125{{$}}
// CHECK-NEXT:    attn.score @bilinear contract bilinear weights(W: 64x64 = identity){{$}}
// CHECK-NEXT:    attn.score @additive contract additive hidden 64 weights(W_q: 64x32 = identity, W_k: 64x32 = 0.0, v: 64 = 1.5){{$}}
// CHECK-NEXT:    attn.score @cosine contract cosine{{$}}
// CHECK-NEXT:    attn.score @cosine_scaled contract cosine scale 5.0{{$}}
// CHECK-NEXT:    attn.score @bilinear_scaled contract bilinear scale 0.125 weights(my_W: 8x8 = -0.5){{$}}
// CHECK-NEXT:  }
attn.score @dot contract dot
attn.score @scaled_default contract scaled_dot
attn.score @scaled contract scaled_dot scale 0.125
attn.score @bilinear contract bilinear weights(W: 64x64 = identity)
attn.score @additive contract additive hidden 64 weights(W_q: 64x32 = identity, W_k: 64x32 = 0.0, v: 64 = 1.5)
attn.score @cosine contract cosine
attn.score @cosine_scaled contract cosine scale 5.0
attn.score @bilinear_scaled contract bilinear scale 0.125 weights("my_W" : 8x8 = -0.5)

// -----

// The contract kind may be written as a string.
// CHECK: attn.score @quoted contract scaled_dot scale 0.5{{$}}
attn.score @quoted contract "scaled_dot" scale 0.5

// -----

// A mod region: (s, i: index, j: index).
// CHECK-LABEL: attn.score @squared contract dot mod {
// CHECK-NEXT:  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK-NEXT:    %[[SQ:.*]] = arith.mulf %s, %s : f32
// CHECK-NEXT:    attn.yield %[[SQ]] : f32
// CHECK-NEXT:  }
attn.score @squared contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %sq = arith.mulf %s, %s : f32
  attn.yield %sq : f32
}

// -----

// A mod region with params (ALiBi-style bias slope·(j - i)); the params
// follow the indices and print under their names.
// CHECK-LABEL: attn.score @alibi contract scaled_dot scale 0.25 params(slope = -0.5, offset = 0.0) mod {
// CHECK-NEXT:  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %slope: f32, %offset: f32):
// CHECK-NEXT:    %[[II:.*]] = arith.index_cast %i : index to i64
// CHECK-NEXT:    %[[JI:.*]] = arith.index_cast %j : index to i64
// CHECK-NEXT:    %[[D:.*]] = arith.subi %[[JI]], %[[II]] : i64
// CHECK-NEXT:    %[[DF:.*]] = arith.sitofp %[[D]] : i64 to f32
// CHECK-NEXT:    %[[B:.*]] = arith.mulf %slope, %[[DF]] : f32
// CHECK-NEXT:    %[[B2:.*]] = arith.addf %[[B]], %offset : f32
// CHECK-NEXT:    %[[T:.*]] = arith.addf %s, %[[B2]] : f32
// CHECK-NEXT:    attn.yield %[[T]] : f32
// CHECK-NEXT:  }
attn.score @alibi contract scaled_dot scale 0.25 params(slope = -0.5, offset = 0.0) mod {
^bb0(%s: f32, %bx: index, %h: index, %i: index, %j: index, %slope: f32, %offset: f32):
  %ii = arith.index_cast %i : index to i64
  %ji = arith.index_cast %j : index to i64
  %d = arith.subi %ji, %ii : i64
  %df = arith.sitofp %d : i64 to f32
  %b = arith.mulf %slope, %df : f32
  %b2 = arith.addf %b, %offset : f32
  %t = arith.addf %s, %b2 : f32
  attn.yield %t : f32
}

// -----

// A feature region: φ(x) applied to every q and k entry.
// CHECK-LABEL: attn.score @relu_feature contract dot feature {
// CHECK-NEXT:  ^bb0(%x: f32):
// CHECK-NEXT:    %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[R:.*]] = arith.maximumf %x, %[[Z]] : f32
// CHECK-NEXT:    attn.yield %[[R]] : f32
// CHECK-NEXT:  }
attn.score @relu_feature contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %r = arith.maximumf %x, %zero : f32
  attn.yield %r : f32
}

// -----

// Feature and mod together (cosformer-like: φ(q)·φ(k)·cos-weighting by position),
// on scaled_dot with an explicit scale and a param.
// CHECK-LABEL: attn.score @cosformer contract scaled_dot scale 1.0 params(m = 1024.0) feature {
// CHECK-NEXT:  ^bb0(%x: f32):
// CHECK:         attn.yield %{{.*}} : f32
// CHECK-NEXT:  } mod {
// CHECK-NEXT:  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: f32):
// CHECK:         math.cos %{{.*}} : f32
// CHECK:         attn.yield %{{.*}} : f32
// CHECK-NEXT:  }
attn.score @cosformer contract scaled_dot scale 1.0 params(m = 1024.0) feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %r = arith.maximumf %x, %zero : f32
  attn.yield %r : f32
} mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: f32):
  %halfpi = arith.constant 1.57079632 : f32
  %ii = arith.index_cast %i : index to i64
  %ji = arith.index_cast %j : index to i64
  %d = arith.subi %ii, %ji : i64
  %df = arith.sitofp %d : i64 to f32
  %r = arith.divf %df, %m : f32
  %a = arith.mulf %halfpi, %r : f32
  %c = math.cos %a : f32
  %t = arith.mulf %s, %c : f32
  attn.yield %t : f32
}

// -----

// Additive and bilinear scores may carry a mod region too; cosine as well.
// CHECK-LABEL: attn.score @additive_mod contract additive hidden 32 weights(W_q: 32x4 = identity, W_k: 32x4 = identity, v: 32 = 1.0) mod {
// CHECK-NEXT:  ^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index):
// CHECK-LABEL: attn.score @bilinear_mod contract bilinear weights(W: 4x4 = identity) mod {
// CHECK-NEXT:  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
// CHECK-LABEL: attn.score @cosine_temperature contract cosine params(tau = 10.0) mod {
// CHECK-NEXT:  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %tau: f32):
attn.score @additive_mod contract additive hidden 32 weights(W_q: 32x4 = identity, W_k: 32x4 = identity, v: 32 = 1.0) mod {
^bb0(%s: f64, %b: index, %h: index, %i: index, %j: index):
  attn.yield %s : f64
}
attn.score @bilinear_mod contract bilinear weights(W: 4x4 = identity) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %t = math.tanh %s : f32
  attn.yield %t : f32
}
attn.score @cosine_temperature contract cosine params(tau = 10.0) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %tau: f32):
  %t = arith.mulf %s, %tau : f32
  attn.yield %t : f32
}

// -----

// A position-only score can ignore %s (LDN diffusion kernel).
// CHECK-LABEL: attn.score @diffusion contract dot params(sigma = 4.0) mod {
// CHECK:         arith.uitofp %{{.*}} : i64 to f32
// CHECK:         arith.negf %{{.*}} : f32
attn.score @diffusion contract dot params(sigma = 4.0) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sigma: f32):
  %ii = arith.index_cast %i : index to i64
  %ji = arith.index_cast %j : index to i64
  %d = arith.subi %ii, %ji : i64
  %df = arith.uitofp %d : i64 to f32
  %d2 = arith.mulf %df, %df : f32
  %two = arith.constant 2.0 : f32
  %s2 = arith.mulf %sigma, %sigma : f32
  %den = arith.mulf %two, %s2 : f32
  %q = arith.divf %d2, %den : f32
  %n = arith.negf %q : f32
  attn.yield %n : f32
}

// -----

// User attributes survive under `attributes`.
// CHECK: attn.score @tagged contract dot attributes {note = "user"}{{$}}
attn.score @tagged contract dot attributes {note = "user"}

// -----

// Tensor inputs: a mod reads them with attn.read, by symbol, one index per dim.
// CHECK: attn.input @p learnable : tensor<?x?x?xf32>
// CHECK: attn.input @slopes : tensor<8xf32>
// CHECK: attn.input @doc : tensor<?x?xi32>
// CHECK-LABEL: attn.score @local contract dot params(sigma = 2.0) mod {
// CHECK-NEXT:  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sigma: f32):
// CHECK-NEXT:    %0 = attn.read @p[%b, %h, %i] : f32
// CHECK-NEXT:    %1 = attn.read @slopes[%h] : f32
// CHECK-NEXT:    %2 = attn.read @doc[%b, %j] : i32
attn.input @p learnable : tensor<?x?x?xf32>
attn.input @slopes : tensor<8xf32>
attn.input @doc : tensor<?x?xi32>
attn.score @local contract dot params(sigma = 2.0) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sigma: f32):
  %p = attn.read @p[%b, %h, %i] : f32
  %slope = attn.read @slopes[%h] : f32
  %doc = attn.read @doc[%b, %j] : i32
  %t = arith.subf %s, %p : f32
  %u = arith.mulf %t, %slope : f32
  %d = arith.sitofp %doc : i32 to f32
  %v = arith.addf %u, %d : f32
  attn.yield %v : f32
}
