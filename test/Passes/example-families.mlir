// The examples/families/ kernels round-trip and get the algorithm their docs/language.md
// entry promises; the kernelised ones lower without the quadratic tiles.
// RUN: attn-opt %examples/families/linear_causal.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/relu_kernel.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/cosformer.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/ldn.mlir --verify-roundtrip > /dev/null
// RUN: attn-opt %examples/families/linear_causal.mlir --attn-expand-shared-regions --attn-classify-normalizer | FileCheck %s --check-prefix=CAUSAL
// RUN: attn-opt %examples/families/relu_kernel.mlir --attn-expand-shared-regions --attn-classify-normalizer | FileCheck %s --check-prefix=RELU
// RUN: attn-opt %examples/families/cosformer.mlir --attn-expand-shared-regions --attn-classify-normalizer | FileCheck %s --check-prefix=COS
// RUN: attn-opt %examples/families/ldn.mlir --attn-expand-shared-regions --attn-classify-normalizer | FileCheck %s --check-prefix=LDN
// RUN: attn-opt %examples/normalizers/linear.mlir --attn-expand-shared-regions --attn-classify-normalizer | FileCheck %s --check-prefix=LINEAR
// RUN: attn-compile %examples/families/linear_causal.mlir -o %t.mlir --emit=mlir --dtypes=f32
// RUN: FileCheck %s --check-prefix=LOWERED < %t.mlir

// CAUSAL: attn.kernel @linear_causal normalizer(@linear) score(@elu_feature) mask(@causal) {algorithm = #attn<algorithm kernelised>}
// RELU: attn.kernel @relu_kernel_attention normalizer(@linear) score(@relu_feature) {algorithm = #attn<algorithm kernelised>}
// COS: attn.kernel @cosformer_attention normalizer(@linear) score(@cos_reweighted) {algorithm = #attn<algorithm kernelised>}
// LDN: attn.normalizer @diffusion_step params(dt = 0.1) attributes {algorithm = #attn<algorithm plain>}
// LDN: attn.kernel @ldn normalizer(@diffusion_step) score(@diffusion) mask(@causal) {algorithm = #attn<algorithm plain>}
// LINEAR: attn.kernel @linear_attention normalizer(@linear) score(@elu_feature) {algorithm = #attn<algorithm kernelised>}

// LOWERED-NOT: attn_forward_f32.d64
// LOWERED: func.func @attn_forward_f32(
// LOWERED: \22algorithm\22: \22kernelised\22
