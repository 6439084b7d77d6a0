// attn_signature (runtime/include/attn/abi.h) of a kernel with a weight and tensor
// inputs: ABI version, T = 2 inputs, head dim 8 (the weight fixes it), 2 params (the
// scalar sigma, then W 8x8), then per input rank, element (0: float, else the integer's
// width), learnable, extents (-1: any).
// RUN: attn-compile %s -o %t.ll --emit=llvm --dtypes=f32
// RUN: FileCheck %s < %t.ll
// CHECK: @attn_signature = {{.*}}constant [17 x i64] [i64 10, i64 2, i64 8, i64 2, i64 0, i64 2, i64 8, i64 8, i64 1, i64 0, i64 0, i64 8, i64 2, i64 0, i64 1, i64 -1, i64 -1], align 8

attn.input @slopes : tensor<8xf32>
attn.input @doc learnable : tensor<?x?xf32>

attn.score @biased contract bilinear params(sigma = 1.0) weights(W: 8x8 = identity) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sigma: f32):
  %slope = attn.read @slopes[%h] : f32
  %doc = attn.read @doc[%b, %j] : f32
  %t = arith.mulf %s, %slope : f32
  %u = arith.addf %t, %doc : f32
  %v = arith.mulf %u, %sigma : f32
  attn.yield %v : f32
}

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

attn.kernel @biased_attention normalizer(@softmax) score(@biased)
