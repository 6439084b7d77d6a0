// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-derive-backward --attn-select-gpu-schedule="element-types=f16 head-dims=64" --attn-instantiate-functions --attn-lower-to-gpu="targets=sm_80,sm_90" | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-derive-backward --attn-select-gpu-schedule="element-types=f32 head-dims=64" --attn-instantiate-functions --attn-lower-to-gpu | FileCheck %s --check-prefix=SIMT
// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-derive-backward --attn-select-gpu-schedule="element-types=bf16,f32 head-dims=32,128" --attn-instantiate-functions --attn-lower-to-gpu="targets=sm_90" | FileCheck %s --check-prefix=TYPES
// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-derive-backward --attn-select-gpu-schedule="element-types=f32 head-dims=32" --attn-select-schedule="element-types=f32" --attn-instantiate-functions --attn-lower-to-gpu="targets=sm_90" --attn-lower-to-loops --attn-emit-manifest | FileCheck %s --check-prefix=MANIFEST

// Online softmax: the four kernels of the CUDA ABI in gpu.module @attn_cuda with
// one #nvvm.target per chip; bare device pointers then i64 scalars.
// f16 forward on tensor cores: 64-key φ(K) and V tiles in shared memory in f16
// (rows padded to 72), S = Q·Kᵀ and O += P·V as nvgpu.mma.sync m16n8k16 with f32
// accumulators, the row max over the 4 lanes of a fragment row by gpu.shuffle,
// e^(m_old - m_new) rescaling, P narrowed to f16.
// SIMT (f32 forward, every backward): K and V staged in shared memory (f32)
// between barriers; scores reduced across the warp with a gpu.shuffle xor
// butterfly; the outlined functions inlined, no calls left.
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
attn.kernel @k normalizer(@softmax)

// CHECK: gpu.module @attn_cuda [#nvvm.target<O = 3, chip = "sm_80">, #nvvm.target<O = 3, chip = "sm_90">]
// CHECK-LABEL: gpu.func @attn_forward_f16_d64(
// CHECK-SAME: %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64)
// CHECK-SAME: workgroup(%[[KT:.*]] : memref<64x72xf16, #gpu.address_space<workgroup>>, %[[VT:.*]] : memref<64x72xf16, #gpu.address_space<workgroup>>)
// CHECK-SAME: kernel attributes {attn.dtype = "f16", attn.head_dim = 64 : i64, attn.role = "forward", attn.tile = 64 : i64, known_block_size = array<i32: 128, 1, 1>}
// CHECK: %[[SCALE:.*]] = arith.constant 1.250000e-01 : f32
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> f16
// CHECK: scf.for
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: memref.store %{{.*}}, %[[KT]]
// CHECK: memref.store %{{.*}}, %[[VT]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[KT]]
// CHECK: nvgpu.mma.sync(%{{.*}}, %{{.*}}, %{{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// CHECK: arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: arith.maximumf
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: memref.load %[[VT]]
// CHECK: nvgpu.mma.sync
// CHECK: gpu.barrier
// CHECK: llvm.store %{{.*}}, %{{.*}} : f16, !llvm.ptr<1>
// CHECK: gpu.return

// SIMT-LABEL: gpu.func @attn_forward_f32_d64(
// SIMT-SAME: workgroup(%[[KT:.*]] : memref<32x64xf32, #gpu.address_space<workgroup>>, %[[VT:.*]] : memref<32x64xf32, #gpu.address_space<workgroup>>)
// SIMT-SAME: kernel attributes {attn.dtype = "f32", attn.head_dim = 64 : i64, attn.role = "forward", attn.tile = 8 : i64, known_block_size = array<i32: 256, 1, 1>}
// SIMT: %[[SCALE:.*]] = arith.constant 1.250000e-01 : f32
// SIMT: llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// SIMT: scf.for
// SIMT: memref.store %{{.*}}, %[[KT]]
// SIMT: memref.store %{{.*}}, %[[VT]]
// SIMT: gpu.barrier
// SIMT: scf.for
// SIMT: memref.load %[[KT]]
// SIMT: gpu.shuffle  xor %{{.*}}, %{{.*}}, %{{.*}} : f32
// SIMT-COUNT-4: gpu.shuffle  xor
// SIMT: scf.if
// SIMT: arith.maximumf
// SIMT: math.exp
// SIMT: memref.load %[[VT]]
// SIMT: gpu.barrier
// SIMT-NOT: nvgpu.mma.sync
// SIMT: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<1>
// SIMT: gpu.return

// CHECK-LABEL: gpu.func @attn_backward_prep_f16_d64(
// CHECK-SAME: %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i64, %{{.*}}: i64)
// CHECK-SAME: attn.role = "backward_prep"
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<1>
// CHECK-LABEL: gpu.func @attn_backward_dkdv_f16_d64(
// CHECK-SAME: workgroup(%[[QT:.*]] : memref<32x72xf16, #gpu.address_space<workgroup>>, %[[GT:.*]] : memref<32x72xf16, #gpu.address_space<workgroup>>, {{.*}}memref<32xf32, #gpu.address_space<workgroup>>, {{.*}}memref<32xf32, #gpu.address_space<workgroup>>, {{.*}}memref<32xf32, #gpu.address_space<workgroup>>)
// CHECK-SAME: attn.role = "backward_dkdv", attn.tile = 64 : i64, known_block_size = array<i32: 128, 1, 1>
// CHECK: gpu.barrier
// CHECK: memref.load %[[QT]]
// CHECK: nvgpu.mma.sync
// CHECK: memref.load %[[GT]]
// CHECK: nvgpu.mma.sync
// CHECK: math.exp
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: nvgpu.mma.sync
// CHECK: gpu.barrier
// CHECK-NOT: llvm.atomicrmw
// CHECK: llvm.store %{{.*}}, %{{.*}} : f16, !llvm.ptr<1>
// CHECK-LABEL: gpu.func @attn_backward_dq_f16_d64(
// CHECK-SAME: workgroup({{.*}}memref<64x72xf16, #gpu.address_space<workgroup>>, {{.*}}memref<64x72xf16, #gpu.address_space<workgroup>>)
// CHECK-SAME: attn.role = "backward_dq", attn.tile = 64 : i64, known_block_size = array<i32: 128, 1, 1>
// CHECK-NOT: func.call
// CHECK: nvgpu.mma.sync
// CHECK: gpu.return

// SIMT-LABEL: gpu.func @attn_backward_dkdv_f32_d64(
// SIMT-SAME: workgroup({{.*}}memref<32x64xf32, #gpu.address_space<workgroup>>, {{.*}}memref<32x64xf32, #gpu.address_space<workgroup>>, {{.*}}memref<32xf32, #gpu.address_space<workgroup>>, {{.*}}memref<32xf32, #gpu.address_space<workgroup>>, {{.*}}memref<32xf32, #gpu.address_space<workgroup>>)
// SIMT-SAME: attn.role = "backward_dkdv", attn.tile = 8 : i64, known_block_size = array<i32: 256, 1, 1>
// SIMT-NOT: llvm.atomicrmw
// SIMT-NOT: mma.sync
// SIMT-LABEL: gpu.func @attn_backward_dq_f32_d64(
// SIMT-SAME: attn.role = "backward_dq"
// SIMT-NOT: func.call
// SIMT: gpu.return

// TYPES: gpu.module @attn_cuda [#nvvm.target<O = 3, chip = "sm_90">]
// TYPES: gpu.func @attn_forward_bf16_d32({{.*}}workgroup({{.*}}memref<64x40xbf16
// TYPES: llvm.bitcast %{{.*}} : vector<2xbf16> to i32
// TYPES: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// TYPES-DAG: gpu.func @attn_forward_bf16_d128({{.*}}workgroup({{.*}}memref<64x136xbf16
// TYPES-DAG: gpu.func @attn_forward_f32_d32(
// TYPES-DAG: gpu.func @attn_forward_f32_d128(
// TYPES-DAG: gpu.func @attn_backward_prep_f32_d128(
// TYPES-DAG: gpu.func @attn_backward_dkdv_bf16_d128(
// TYPES-DAG: gpu.func @attn_backward_dq_bf16_d32(

// MANIFEST: llvm.mlir.global internal constant @attn_manifest_text("{{.*}}devices cpu cuda\0Acuda-targets sm_90\0Acuda-kernel forward f32 32 attn_forward_f32_d32 tile 8 threads 256 smem 0\0Acuda-kernel backward_prep f32 32 attn_backward_prep_f32_d32 tile 8 threads 256 smem 0\0Acuda-kernel backward_dkdv f32 32 attn_backward_dkdv_f32_d32 tile 8 threads 256 smem 0\0Acuda-kernel backward_dq f32 32 attn_backward_dq_f32_d32 tile 8 threads 256 smem 0\0A\00")

// -----

// A learnable param (sigmoid bias, constant denominator): params read from the
// device, dθ accumulated per warp and added to dparams with one atomic per warp
// and param; no denominator sum. A plain normalizer's weights are unbounded, so
// its f16 forward stays SIMT (f32 weights) rather than feeding f16 tensor cores.
attn.normalizer @sigmoid params(bias = -4.0) {
  numerator {
  ^bb0(%s: f32, %bias: f32):
    %one = arith.constant 1.0 : f32
    %x = arith.addf %s, %bias : f32
    %nx = arith.negf %x : f32
    %e = math.exp %nx : f32
    %den = arith.addf %one, %e : f32
    %g = arith.divf %one, %den : f32
    attn.yield %g : f32
  }
  denominator constant 1.0
}
attn.kernel @k normalizer(@sigmoid)

// CHECK-LABEL: gpu.func @attn_forward_f16_d64(
// CHECK-SAME: memref<32x64xf32, #gpu.address_space<workgroup>>
// CHECK-NOT: mma.sync
// CHECK-LABEL: gpu.func @attn_backward_dkdv_f16_d64(
// CHECK-SAME: memref<32x64xf32, #gpu.address_space<workgroup>>
// CHECK: %[[BIAS:.*]] = llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32)
// CHECK: arith.addf %{{.*}}, %[[BIAS]] : f32
// CHECK: llvm.atomicrmw fadd %{{.*}}, %{{.*}} monotonic : !llvm.ptr<1>, f32
// CHECK: gpu.return

// bf16 has f32's range, so the plain normalizer's bf16 kernels use tensor cores;
// dθ: per-thread shares summed over the warp, then one atomic per param.
// TYPES: gpu.func @attn_backward_dkdv_bf16_d32(
// TYPES: nvvm.mma.sync
// TYPES: gpu.shuffle  xor
// TYPES: llvm.atomicrmw fadd %{{.*}}, %{{.*}} monotonic : !llvm.ptr<1>, f32

// MANIFEST: devices cpu cuda\0Acuda-targets sm_90\0Acuda-kernel forward f32 32

// -----

// Causal mask region, a feature map and a score mod with a param: the mask and
// mod are evaluated per (i, j) from index arguments, the feature map on staging
// (keys) and on the query row, its derivative on the final dK and dQ.
attn.normalizer @linear {
  numerator {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
  denominator epsilon 1.0e-06 {
  ^bb0(%s: f32):
    attn.yield %s : f32
  }
}
attn.score @elu_alibi contract dot params(slope = -0.5) feature {
^bb0(%x: f32):
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = math.exp %x : f32
  %neg = arith.cmpf olt, %x, %zero : f32
  %xp1 = arith.addf %x, %one : f32
  %phi = arith.select %neg, %e, %xp1 : f32
  attn.yield %phi : f32
} mod {
^bb0(%s: f32, %i: index, %j: index, %slope: f32):
  %ii = arith.index_cast %i : index to i64
  %ji = arith.index_cast %j : index to i64
  %d = arith.subi %ji, %ii : i64
  %df = arith.sitofp %d : i64 to f32
  %b = arith.mulf %slope, %df : f32
  %t = arith.addf %s, %b : f32
  attn.yield %t : f32
}
attn.mask @causal {
^bb0(%i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}
attn.kernel @k normalizer(@linear) score(@elu_alibi) mask(@causal)

// CHECK-LABEL: gpu.func @attn_forward_f16_d64(
// CHECK-NOT: arith.constant 1.250000e-01
// CHECK: arith.cmpf olt
// CHECK: scf.for
// CHECK: arith.cmpf olt
// CHECK: memref.store
// CHECK: gpu.barrier
// CHECK: arith.cmpi ule
// CHECK: scf.if
// CHECK: arith.sitofp
// CHECK: arith.constant 9.99999997E-7 : f32
// CHECK-LABEL: gpu.func @attn_backward_dkdv_f16_d64(
// CHECK: llvm.atomicrmw fadd
// CHECK-LABEL: gpu.func @attn_backward_dq_f16_d64(
// CHECK-NOT: llvm.atomicrmw
// CHECK: gpu.return

// MANIFEST: devices cpu cuda
