// RUN: attn-opt %s --attn-derive-backward --attn-lower-to-loops="kernel=b element-types=f64" | FileCheck %s
// RUN: not attn-opt %s --attn-derive-backward --attn-lower-to-loops="kernel=c" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not attn-opt %s --attn-derive-backward --attn-lower-to-loops="kernel=a element-types=f16" 2>&1 | FileCheck %s --check-prefix=TYPE

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @a normalizer(@relu)
attn.kernel @b normalizer(@relu)

// CHECK-NOT: func.func @attn_forward_f32
// CHECK: func.func @attn_forward_f64(
// CHECK: "attn-abi 2\0Akernel b\0A
// MISSING: error: no attn.kernel named 'c'
// TYPE: error: unsupported element type 'f16'; expected f32 or f64
