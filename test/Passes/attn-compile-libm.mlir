// f64 math with no LLVM intrinsic (erf) in the vectorised CPU schedules: the host
// lowering unrolls each vector op into libm calls before it lowers the vectors, so the
// artifact links (it failed in LLVM translation on a leftover vector.extract).
// RUN: attn-compile %s -o %t.ll --emit=llvm --dtypes=f64
// RUN: FileCheck %s < %t.ll
// RUN: attn-compile %s -o %t.so --dtypes=f32,f64
// RUN: llvm-nm -D --defined-only %t.so | FileCheck %s --check-prefix=SYMBOLS

// CHECK: declare {{.*}}double @erf(double
// CHECK: call {{.*}}double @erf(double
// SYMBOLS: attn_forward_f64

attn.normalizer @erf_shifted {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %e = math.erf %s : f32
    %g = arith.addf %e, %one : f32
    attn.yield %g : f32
  }
  // erf(s) + 1 underflows to 0 for s < -10: ε keeps C_i from 0.
  denominator epsilon 1.0e-06 sum
}
attn.kernel @erf_attention normalizer(@erf_shifted)
