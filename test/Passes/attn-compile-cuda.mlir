// REQUIRES: ptxas
// The driver with CUDA targets: PTX for the lowest target (which ptxas accepts for
// the others too), f16 and bf16 kernels, and an artifact that exports a cubin per
// target, the PTX and their sizes, with the manifest's cuda lines. The f16 and
// bf16 kernels (TanhMax is online) use tensor cores (64x(64+8) f16/bf16 tiles),
// the f32 ones are SIMT (32x128 f32 tiles).
// RUN: attn-compile %s -o %t.ptx --emit=ptx --cuda-targets=sm_90,sm_80 --cuda-dtypes=f16,bf16,f32 --dtypes=f32
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %ptxas -arch=sm_90 %t.ptx -o %t.sm_90.cubin
// RUN: attn-compile %s -o %t.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16 --dtypes=f32
// RUN: llvm-nm -D -S --defined-only %t.so | FileCheck %s --check-prefix=SYMBOLS
// RUN: llvm-strings %t.so | FileCheck %s --check-prefix=MANIFEST
// One dtype and head dim alone (what attn.compile builds for a CUDA call on first use):
// only its kernels, in the manifest and in the image.
// RUN: attn-compile %s -o %t.one.so --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16 --cuda-head-dims=64 --dtypes=f32
// RUN: llvm-strings %t.one.so | FileCheck %s --check-prefix=ONE --implicit-check-not=cuda-kernel --implicit-check-not=attn_forward_bf16_d32 --implicit-check-not=attn_forward_bf16_d128

attn.normalizer @tanhmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %g = arith.subf %p, %n : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %hx: index, %i: index, %j: index):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %h = arith.addf %p, %n : f32
    attn.yield %h : f32
  }
}
attn.kernel @tanhmax_attention normalizer(@tanhmax)

// PTX: .target sm_80
// PTX-DAG: .visible .entry attn_forward_f16_d64(
// PTX-DAG: .visible .entry attn_forward_bf16_d128(
// PTX-DAG: .visible .entry attn_backward_prep_f16_d32(
// PTX-DAG: .visible .entry attn_backward_dkdv_bf16_d64(
// PTX-DAG: .visible .entry attn_backward_dq_f16_d128(
// PTX-DAG: .visible .entry attn_backward_dkdv_f32_d64(
// PTX-DAG: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-DAG: shfl.sync.bfly.b32
// PTX-DAG: bar.sync
// PTX-DAG: cvt.rn.bf16.f32
// PTX-DAG: cvt.rn.f16.f32
// PTX-DAG: .shared .align {{[0-9]+}} .b8 {{.*}}[17408]
// PTX-DAG: .shared .align {{[0-9]+}} .b8 {{.*}}[16384]
// PTX-NOT: call.uni

// SYMBOLS-DAG: {{0*[1-9a-f][0-9a-f]*}} R attn_cuda_cubin_sm_80{{$}}
// SYMBOLS-DAG: 0000000000000008 R attn_cuda_cubin_sm_80_size
// SYMBOLS-DAG: {{0*[1-9a-f][0-9a-f]*}} R attn_cuda_cubin_sm_90{{$}}
// SYMBOLS-DAG: 0000000000000008 R attn_cuda_cubin_sm_90_size
// SYMBOLS-DAG: {{0*[1-9a-f][0-9a-f]*}} R attn_cuda_ptx{{$}}
// SYMBOLS-DAG: 0000000000000008 R attn_cuda_ptx_size
// SYMBOLS-DAG: T attn_manifest
// SYMBOLS-DAG: T _mlir_ciface_attn_forward_f32

// MANIFEST: devices cpu cuda
// MANIFEST-NEXT: cuda-targets sm_80 sm_90
// MANIFEST-NEXT: cuda-kernel forward bf16 32 attn_forward_bf16_d32 tile 64 threads 128 smem 0
// MANIFEST-NEXT: cuda-kernel backward_prep bf16 32 attn_backward_prep_bf16_d32 tile 8 threads 256 smem 0
// MANIFEST-NEXT: cuda-kernel backward_dkdv bf16 32 attn_backward_dkdv_bf16_d32 tile 64 threads 128 smem 0
// MANIFEST-NEXT: cuda-kernel backward_dq bf16 32 attn_backward_dq_bf16_d32 tile 64 threads 128 smem 0
// MANIFEST-NEXT: cuda-kernel forward bf16 64 attn_forward_bf16_d64
// MANIFEST: cuda-kernel backward_dq bf16 128 attn_backward_dq_bf16_d128 tile 64 threads 128 smem 0

// ONE: devices cpu cuda
// ONE-NEXT: cuda-targets sm_80 sm_90
// ONE-NEXT: cuda-kernel forward bf16 64 attn_forward_bf16_d64 tile 64 threads 128 smem 0
// ONE-NEXT: cuda-kernel backward_prep bf16 64 attn_backward_prep_bf16_d64
// ONE-NEXT: cuda-kernel backward_dkdv bf16 64 attn_backward_dkdv_bf16_d64
// ONE-NEXT: cuda-kernel backward_dq bf16 64 attn_backward_dq_bf16_d64
