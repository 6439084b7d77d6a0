// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-derive-backward --attn-select-schedule="element-types=f32,f64" --attn-instantiate-functions --attn-lower-to-loops --attn-emit-manifest --attn-erase-declarations | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-derive-backward --attn-select-schedule="element-types=f32" --attn-instantiate-functions --attn-lower-to-loops --attn-emit-manifest --attn-erase-declarations --inline --symbol-dce --canonicalize --cse | FileCheck %s --check-prefix=INLINED

// Online softmax: one entry point per direction and element type with the C
// interface, the attn ops gone, f64 copies of the scalar functions, and the
// manifest as an LLVM global.
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
attn.kernel @k normalizer(@softmax)

// CHECK-NOT: attn.normalizer
// CHECK-NOT: attn.kernel
// CHECK-DAG: func.func private @k.num.f64(%{{.*}}: f64, %{{.*}}: f64) -> f64
// CHECK-DAG: func.func @attn_forward_f32(%{{.*}}: memref<?x?xf32, strided<[?, ?], offset: ?>>, {{.*}}, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64) attributes {attn.entry = #attn.entry<role = forward, type = f32, kernel = @k>, llvm.emit_c_interface}
// CHECK-DAG: func.func @attn_backward_f32(
// CHECK-DAG: func.func @attn_forward_f64(%{{.*}}: memref<?x?xf64, strided<[?, ?], offset: ?>>
// CHECK-DAG: func.func @attn_backward_f64(
// CHECK-DAG: llvm.mlir.global internal constant @attn_manifest_text("{\0A  \22abi\22: 10,\0A  \22algorithm\22: \22online\22,\0A  \22contract\22: {\0A    \22feature\22: false,\0A    \22kind\22: \22scaled_dot\22,\0A    \22scale\22: null\0A  },\0A  \22cpu_cost\22: [\0A    {\0A      \22backward\22: 20,\0A      \22dtype\22: \22f32\22,\0A      \22forward\22: 30\0A    },\0A    {\0A      \22backward\22: 1,\0A      \22d\22: 32,\0A      \22dtype\22: \22f32\22,\0A      \22forward\22: 1,\0A      \22head_dim\22: 32\0A    },\0A    {\0A      \22backward\22: 1,\0A      \22d\22: 64,\0A      \22dtype\22: \22f32\22,\0A      \22forward\22: 1,\0A      \22head_dim\22: 64\0A    },\0A    {\0A      \22backward\22: 1,\0A      \22d\22: 128,\0A      \22dtype\22: \22f32\22,\0A      \22forward\22: 1,\0A      \22head_dim\22: 128\0A    },\0A    {\0A      \22backward\22: 40,\0A      \22dtype\22: \22f64\22,\0A      \22forward\22: 60\0A    },\0A    {\0A      \22backward\22: 2,\0A      \22d\22: 32,\0A      \22dtype\22: \22f64\22,\0A      \22forward\22: 2,\0A      \22head_dim\22: 32\0A    },\0A    {\0A      \22backward\22: 2,\0A      \22d\22: 64,\0A      \22dtype\22: \22f64\22,\0A      \22forward\22: 2,\0A      \22head_dim\22: 64\0A    },\0A    {\0A      \22backward\22: 2,\0A      \22d\22: 128,\0A      \22dtype\22: \22f64\22,\0A      \22forward\22: 2,\0A      \22head_dim\22: 128\0A    }\0A  ],\0A  \22denominator\22: \22sum\22,\0A  \22devices\22: [\0A    \22cpu\22\0A  ],\0A  \22dtypes\22: [\0A    \22f32\22,\0A    \22f64\22\0A  ],\0A  \22inputs\22: [],\0A  \22kernel\22: \22k\22,\0A  \22mask\22: \22none\22,\0A  \22normalizer\22: \22softmax\22,\0A  \22params\22: [],\0A  \22splits\22: {\0A    \22backward\22: \22key_chunks\22,\0A    \22forward\22: \22key_chunks\22,\0A    \22partial_calls\22: true\0A  }\0A}\0A\00") {addr_space = 0 : i32}
// CHECK-DAG: llvm.func @attn_manifest() -> !llvm.ptr

// After inlining, the forward loop carries the running max, Σ h, Σ h's rounding
// error (f32 sums are compensated; O's errors live in a row buffer) and the key
// count, and rescales the accumulator by e^(m_old - m_new); the keys run in blocks
// of 64 (which a mask's block sparsity classifies; here there is none).
// INLINED-LABEL: func.func @attn_forward_f32(
// INLINED-NOT: memref.alloc{{.*}}memref<?x?x
// INLINED: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// INLINED: %[[OERR:.*]] = memref.alloca(%{{.*}}) : memref<?xf32>
// INLINED: scf.for %[[I:.*]] = {{.*}} {
// INLINED: scf.for %[[J0:.*]] = {{.*}} step %c64 iter_args(%[[M0:.*]] = %[[NEGINF]], {{.*}}) -> (f32, f32, f32, index) {
// INLINED: scf.for %[[J:.*]] = %[[J0]] to {{.*}} iter_args(%[[M:.*]] = %[[M0]], %[[L:.*]] = %{{.*}}, %[[E:.*]] = %{{.*}}, %[[N:.*]] = %{{.*}}) -> (f32, f32, f32, index) {
// INLINED: %[[MNEW:.*]] = arith.maximumf %[[M]], %{{.*}} : f32
// INLINED: %[[DELTA:.*]] = arith.subf %[[M]], %[[MNEW]] : f32
// INLINED: %[[ALPHA:.*]] = math.exp %[[DELTA]] : f32
// INLINED: arith.mulf %{{.*}}, %[[ALPHA]] : f32
// INLINED: memref.store %{{.*}}, %[[OERR]]
// INLINED: scf.yield %[[MNEW]], %{{.*}}, %{{.*}}, %{{.*}} : f32, f32, f32, index
// INLINED-LABEL: func.func @attn_backward_f32(
// Nothing N×N: every buffer has at most one dynamic (key) dimension.
// INLINED-NOT: func.call
// INLINED-NOT: memref.alloc{{.*}}memref<?x?x
// INLINED-LABEL: llvm.mlir.global internal constant @attn_manifest_text

// -----

// Plain accumulation with a count denominator, a mask region and a param.
attn.mask @window {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %c4 = arith.constant 4 : index
  %d = arith.subi %i, %j : index
  %keep = arith.cmpi ult, %d, %c4 : index
  attn.yield %keep : i1
}
attn.normalizer @relu params(shift = 0.5) {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %shift: f32):
    %x = arith.addf %s, %shift : f32
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %x, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @k normalizer(@relu) mask(@window)

// The generic loops handle any head dim and stride.
// CHECK: func.func private @k.mask(
// CHECK: func.func private @attn_forward_f32.generic(
// CHECK: func.call @k.mask(
// CHECK: func.call @k.num(
// CHECK-NOT: func.call @k.stab
// CHECK: arith.uitofp
// A specialisation per head dim: φ(k)ᵀ packed in [d][64-key] panels, an FMA score tile, the regions
// called on vector<16xf32> lanes (keys), W·V accumulated in registers.
// CHECK: func.func private @attn_forward_f32.d64(
// CHECK: memref.alloc({{.*}}) {alignment = 64 : i64} : memref<?x64xf32>
// CHECK: vector.fma {{.*}} : vector<16xf32>
// CHECK: func.call @k.mask.x16({{.*}}) : (vector<16xindex>, vector<16xindex>, vector<16xindex>, vector<16xindex>, vector<16xf32>) -> vector<16xi1>
// CHECK: func.call @k.num.x16({{.*}}) : (vector<16xf32>, vector<16xf32>, vector<16xindex>, vector<16xindex>, vector<16xindex>, vector<16xindex>, vector<16xf32>) -> vector<16xf32>
// CHECK: vector.fma {{.*}} : vector<16xf32>
// CHECK: memref.dealloc
// The entry point dispatches on head dim and unit inner strides.
// CHECK: func.func @attn_forward_f32(
// CHECK: memref.reinterpret_cast {{.*}} to offset: [{{.*}}], sizes: [{{.*}}], strides: [{{.*}}, 1]
// CHECK: func.call @attn_forward_f32.d32(
// CHECK: func.call @attn_forward_f32.d64(
// CHECK: func.call @attn_forward_f32.d128(
// CHECK: func.call @attn_forward_f32.generic(
// CHECK: func.func private @attn_backward_f32.generic(
// CHECK: func.call @k.num.d.s(
// CHECK: func.call @k.num.d.shift(
// CHECK: func.func private @attn_backward_f32.d64(
// CHECK: func.call @k.num.d.s.x16(
// CHECK: func.call @k.num.d.shift.x16(
// CHECK: func.func @attn_backward_f32(
// CHECK: func.call @attn_backward_f32.d32(
// CHECK: func.call @attn_backward_f32.generic(
// CHECK: llvm.mlir.global internal constant @attn_manifest_text("{{.*}}\22algorithm\22: \22plain\22,{{.*}}\22denominator\22: \22count\22,{{.*}}\22mask\22: \22window\22,{{.*}}\22params\22: [\0A    {\0A      \22init\22: 0.5,\0A      \22name\22: \22shift\22,\0A      \22shape\22: []{{.*}}")

// -----

// Cosine: the public entries normalise the rows of q and k, then call the dot
// kernels (".inner", tiled where the head dim allows); backward chains dq̂, dk̂
// back through the norms.
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
attn.score @cos contract cosine scale 5.0
attn.kernel @k normalizer(@softmax) score(@cos)

// CHECK: func.func private @attn_forward_f32.inner.generic(
// CHECK: func.func private @attn_forward_f32.inner.d64(
// CHECK: func.func private @attn_forward_f32.inner(
// CHECK: func.func @attn_forward_f32({{.*}}attributes {attn.entry = #attn.entry<role = forward, type = f32, kernel = @{{.*}}>, llvm.emit_c_interface}
// CHECK: math.rsqrt
// CHECK: math.rsqrt
// CHECK: call @attn_forward_f32.inner(
// CHECK: func.func @attn_backward_f32({{.*}}attributes {attn.entry = #attn.entry<role = backward, type = f32, kernel = @{{.*}}>, llvm.emit_c_interface}
// CHECK: call @attn_backward_f32.inner(
// CHECK: math.rsqrt
// CHECK: memref.dealloc

// -----

// Bilinear and additive: weights after the scalar params in the params vector,
// described by the manifest (with the head dim they fix); additive gets no tiled
// kernels when its hidden width has none (see lower-to-loops-additive.mlir).
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
attn.score @concat contract additive hidden 4 weights(W_q: 4x8 = identity, W_k: 4x8 = 0.5, v: 4 = 0.25)
attn.kernel @k normalizer(@softmax) score(@concat)

// CHECK-NOT: func.func private @attn_forward_f32.inner.d
// CHECK: func.func private @attn_forward_f32.inner.generic(
// CHECK: math.tanh
// CHECK: func.func private @attn_backward_f32.inner.generic(
// CHECK: math.tanh
// CHECK: llvm.mlir.global internal constant @attn_manifest_text("{{.*}}\22kind\22: \22additive\22,{{.*}}\22head_dim\22: 8,{{.*}}\22init\22: \22identity\22,\0A      \22name\22: \22W_q\22,\0A      \22shape\22: [\0A        4,\0A        8\0A      ]{{.*}}\22name\22: \22W_k\22,{{.*}}\22name\22: \22v\22,{{.*}}")

// -----

// Tensor inputs: the entry points take the attn_table array (!llvm.ptr) and make
// each input a strided memref of its rank; attn.read became attn.table_load,
// expanded with clamped indices (one load per lane on vectors). The backward
// calls the derivative and position functions of the learnable read and adds to
// the flat gradient buffer from dtables. The manifest names the inputs.
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
attn.input @p learnable : tensor<?x?x?xf32>
attn.input @doc : tensor<?x?xi32>
attn.score @shifted contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %p = attn.read @p[%b, %h, %i] : f32
  %t = arith.mulf %s, %p : f32
  attn.yield %t : f32
}
attn.mask @same_doc {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %di = attn.read @doc[%b, %i] : i32
  %dj = attn.read @doc[%b, %j] : i32
  %keep = arith.cmpi eq, %di, %dj : i32
  attn.yield %keep : i1
}
attn.kernel @k normalizer(@softmax) score(@shifted) mask(@same_doc)

// CHECK: func.func private @k.score(%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[P:.*]]: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, %{{.*}}: memref<?x?xi32, strided<[?, ?], offset: ?>>) -> f32
// CHECK: %[[D:.*]] = memref.dim %[[P]], %c0
// CHECK: arith.minsi
// CHECK: arith.maxsi
// CHECK: memref.load %[[P]]
// CHECK: func.func private @k.score.at.p.0(
// CHECK: func.func private @k.score.d.p.0(
// CHECK: func.func private @attn_forward_f32.generic(
// CHECK-SAME: !llvm.ptr
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> !llvm.struct<(ptr, array<4 x i64>, array<4 x i64>)>
// CHECK: builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<3 x i64>, array<3 x i64>)> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
// CHECK: builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> to memref<?x?xi32, strided<[?, ?], offset: ?>>
// CHECK: func.func private @attn_backward_f32.generic(
// CHECK: builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> to memref<?xf32, strided<[?], offset: ?>>
// CHECK: func.call @k.score.d.p.0(
// CHECK: %[[AT:.*]] = func.call @k.score.at.p.0(
// CHECK: memref.load %{{.*}}[%[[AT]]] : memref<?xf32, strided<[?], offset: ?>>
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[AT]]] : memref<?xf32, strided<[?], offset: ?>>
// CHECK: func.func private @attn_backward_f32.d64(
// CHECK: func.call @k.score.at.p.0.x16(
// CHECK: vector.extract %{{.*}}[15] : index from vector<16xindex>
// CHECK: llvm.mlir.global internal constant @attn_manifest_text("{{.*}}\22inputs\22: [\0A    {\0A      \22element\22: \22float\22,\0A      \22learnable\22: true,\0A      \22name\22: \22p\22,{{.*}}\22element\22: \22i32\22,\0A      \22learnable\22: false,\0A      \22name\22: \22doc\22,{{.*}}")
