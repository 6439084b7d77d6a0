// RUN: attn-opt %s --attn-cpu-pipeline="element-types=f32 vector-bits=256" | FileCheck %s
// RUN: attn-opt %s --attn-cuda-pipeline="element-types=f32 gpu-element-types=bf16 head-dims=64,128 targets=sm_90" | FileCheck %s --check-prefix=CUDA
// RUN: attn-opt %s --attn-cpu-pipeline="element-types=f32" --attn-host-to-llvm | FileCheck %s --check-prefix=LLVM

// The registered pipelines attn-compile runs: the artifact's code, its
// manifest, no attn op left, every scalar function inlined.
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

// CHECK-NOT: attn.kernel
// CHECK-NOT: func.call @k.
// CHECK-DAG: func.func @attn_forward_f32(
// CHECK-DAG: func.func @attn_backward_f32(
// CHECK-DAG: vector.fma {{.*}} : vector<8xf32>
// CHECK-DAG: llvm.mlir.global internal constant @attn_manifest_text("{{.*}}\22algorithm\22: \22online\22,{{.*}}\22devices\22: [\0A    \22cpu\22\0A  ],\0A  \22dtypes\22: [\0A    \22f32\22\0A  ],{{.*}}\00")
// The CUDA pipeline is the CPU one plus the GPU schedule, which the manifest lists (the
// Triton kernels themselves are compiled by attn-compile, not in this pipeline).
// CUDA-NOT: gpu.module
// CUDA-DAG: func.func @attn_forward_f32(
// CUDA-DAG: llvm.mlir.global internal constant @attn_manifest_text("{{.*}}\22cuda\22: {\0A    \22backend\22: \22triton\22,\0A    \22kernels\22: [\0A      {\0A        \22dtype\22: \22bf16\22,\0A        \22head_dim\22: 64\0A      },\0A      {\0A        \22dtype\22: \22bf16\22,\0A        \22head_dim\22: 128\0A      }\0A    ],\0A    \22targets\22: [\0A      \22sm_90\22\0A    ]\0A  },\0A{{.*}}\22devices\22: [\0A    \22cpu\22,\0A    \22cuda\22\0A  ],{{.*}}")
// LLVM: llvm.func @_mlir_ciface_attn_forward_f32(
