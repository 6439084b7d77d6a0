// RUN: attn-opt %s --split-input-file --attn-test-differentiate --canonicalize --cse | FileCheck %s

// Each derivative rule of lib/Transforms/Differentiate.h on a plain function:
// @f.d.<n> is d@f/d(argument n).

// Sums, products, quotient: d(x/y)/dy = -(x/y)/y.
func.func @ops(%x: f32, %y: f32) -> f32 {
  %p = arith.mulf %x, %y : f32
  %q = arith.divf %x, %y : f32
  %s = arith.subf %p, %q : f32
  return %s : f32
}
// CHECK-LABEL: func.func private @ops.d.1(
// CHECK-SAME: %[[X:.*]]: f32, %[[Y:.*]]: f32)
// CHECK: %[[Q:.*]] = arith.divf %[[X]], %[[Y]]
// CHECK: %[[NQ:.*]] = arith.negf %[[Q]]
// CHECK: %[[DQ:.*]] = arith.divf %[[NQ]], %[[Y]]
// CHECK: %[[D:.*]] = arith.subf %[[X]], %[[DQ]]
// CHECK: return %[[D]]
// CHECK-LABEL: func.func private @ops.d.0(
// CHECK-SAME: %[[X:.*]]: f32, %[[Y:.*]]: f32)
// CHECK: %[[INV:.*]] = arith.divf %{{.*}}, %[[Y]]
// CHECK: %[[D:.*]] = arith.subf %[[Y]], %[[INV]]
// CHECK: return %[[D]]

// -----

// 1/(1 + e^-x) differentiates as σ·(1 − σ), finite where e^-x overflows.
func.func @sigmoid(%x: f32) -> f32 {
  %one = arith.constant 1.0 : f32
  %n = arith.negf %x : f32
  %e = math.exp %n : f32
  %d = arith.addf %one, %e : f32
  %r = arith.divf %one, %d : f32
  return %r : f32
}
// CHECK-LABEL: func.func private @sigmoid.d.0(
// CHECK: %[[SIG:.*]] = arith.divf %[[ONE:.*]], %{{.*}}
// CHECK: %[[REST:.*]] = arith.subf %[[ONE]], %[[SIG]]
// CHECK: %[[D:.*]] = arith.mulf %[[SIG]], %[[REST]]
// CHECK: return %[[D]]

// -----

// Kinks: max follows x only where x > y, min only where x < y, select the
// chosen operand, |x| has derivative 0 at 0.
func.func @kinks(%c: i1, %x: f32, %y: f32) -> f32 {
  %a = arith.maximumf %x, %y : f32
  %b = arith.minimumf %a, %y : f32
  %s = arith.select %c, %b, %x : f32
  %r = math.absf %s : f32
  return %r : f32
}
// CHECK-LABEL: func.func private @kinks.d.2(
// CHECK-LABEL: func.func private @kinks.d.1(
// CHECK-SAME: %[[C:.*]]: i1, %[[X:.*]]: f32, %[[Y:.*]]: f32)
// CHECK: %[[A:.*]] = arith.maximumf %[[X]], %[[Y]]
// CHECK: %[[XWINS:.*]] = arith.cmpf ogt, %[[X]], %[[Y]]
// CHECK: %[[DA:.*]] = arith.select %[[XWINS]], %[[ONE:.*]], %[[ZERO:.*]] : f32
// CHECK: %[[AWINS:.*]] = arith.cmpf olt, %[[A]], %[[Y]]
// CHECK: %[[DB:.*]] = arith.select %[[AWINS]], %[[DA]], %[[ZERO]] : f32
// CHECK: %[[S:.*]] = arith.select %[[C]], %{{.*}}, %[[X]] : f32
// CHECK: %[[DS:.*]] = arith.select %[[C]], %[[DB]], %[[ONE]] : f32
// CHECK: %[[NEG:.*]] = arith.cmpf olt, %[[S]], %[[ZERO]]
// CHECK: %[[POS:.*]] = arith.cmpf ogt, %[[S]], %[[ZERO]]
// CHECK: arith.select %[[POS]], %[[DS]], %{{.*}} : f32

// -----

// Exponentials: d e^x = e^x, d 2^x = 2^x·ln 2, d(e^x − 1) = (e^x − 1) + 1.
func.func @exp(%x: f32) -> f32 {
  %r = math.exp %x : f32
  return %r : f32
}
func.func @exp2(%x: f32) -> f32 {
  %r = math.exp2 %x : f32
  return %r : f32
}
func.func @expm1(%x: f32) -> f32 {
  %r = math.expm1 %x : f32
  return %r : f32
}
// CHECK-LABEL: func.func private @exp.d.0(
// CHECK-NEXT: %[[E:.*]] = math.exp %arg0
// CHECK-NEXT: return %[[E]]
// CHECK-LABEL: func.func private @exp2.d.0(
// CHECK-NEXT: %[[LN2:.*]] = arith.constant 0.693147182 : f32
// CHECK-NEXT: %[[E:.*]] = math.exp2 %arg0
// CHECK-NEXT: %[[D:.*]] = arith.mulf %[[E]], %[[LN2]]
// CHECK-NEXT: return %[[D]]
// CHECK-LABEL: func.func private @expm1.d.0(
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[E:.*]] = math.expm1 %arg0
// CHECK-NEXT: %[[D:.*]] = arith.addf %[[E]], %[[ONE]]
// CHECK-NEXT: return %[[D]]

// -----

// Logarithms: d log x = 1/x, d log(1 + x) = 1/(x + 1), d log2 x = 1/(x·ln 2).
func.func @log(%x: f32) -> f32 {
  %r = math.log %x : f32
  return %r : f32
}
func.func @log1p(%x: f32) -> f32 {
  %r = math.log1p %x : f32
  return %r : f32
}
func.func @log2(%x: f32) -> f32 {
  %r = math.log2 %x : f32
  return %r : f32
}
// CHECK-LABEL: func.func private @log.d.0(
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[D:.*]] = arith.divf %[[ONE]], %arg0
// CHECK-NEXT: return %[[D]]
// CHECK-LABEL: func.func private @log1p.d.0(
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[X1:.*]] = arith.addf %arg0, %[[ONE]]
// CHECK-NEXT: %[[D:.*]] = arith.divf %[[ONE]], %[[X1]]
// CHECK-NEXT: return %[[D]]
// CHECK-LABEL: func.func private @log2.d.0(
// CHECK-DAG: %[[LN2:.*]] = arith.constant 0.693147182 : f32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[XLN2:.*]] = arith.mulf %arg0, %[[LN2]]
// CHECK-NEXT: %[[D:.*]] = arith.divf %[[ONE]], %[[XLN2]]
// CHECK-NEXT: return %[[D]]

// -----

// Roots: d √x = 1/(2·√x), d x^-1/2 = x^-1/2 / (−2x).
func.func @sqrt(%x: f32) -> f32 {
  %r = math.sqrt %x : f32
  return %r : f32
}
func.func @rsqrt(%x: f32) -> f32 {
  %r = math.rsqrt %x : f32
  return %r : f32
}
// CHECK-LABEL: func.func private @sqrt.d.0(
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[R:.*]] = math.sqrt %arg0
// CHECK-NEXT: %[[R2:.*]] = arith.mulf %[[R]], %[[TWO]]
// CHECK-NEXT: %[[D:.*]] = arith.divf %[[ONE]], %[[R2]]
// CHECK-NEXT: return %[[D]]
// CHECK-LABEL: func.func private @rsqrt.d.0(
// CHECK-NEXT: %[[M2:.*]] = arith.constant -2.000000e+00 : f32
// CHECK-NEXT: %[[R:.*]] = math.rsqrt %arg0
// CHECK-NEXT: %[[X2:.*]] = arith.mulf %arg0, %[[M2]]
// CHECK-NEXT: %[[D:.*]] = arith.divf %[[R]], %[[X2]]
// CHECK-NEXT: return %[[D]]

// -----

// d tanh x = 1 − tanh²x, d sin = cos, d cos = −sin, d atan x = 1/(x² + 1),
// d erf x = 2/√π·e^(−x²).
func.func @tanh(%x: f32) -> f32 {
  %r = math.tanh %x : f32
  return %r : f32
}
func.func @sin(%x: f32) -> f32 {
  %r = math.sin %x : f32
  return %r : f32
}
func.func @cos(%x: f32) -> f32 {
  %r = math.cos %x : f32
  return %r : f32
}
func.func @atan(%x: f32) -> f32 {
  %r = math.atan %x : f32
  return %r : f32
}
func.func @erf(%x: f32) -> f32 {
  %r = math.erf %x : f32
  return %r : f32
}
// CHECK-LABEL: func.func private @tanh.d.0(
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[T:.*]] = math.tanh %arg0
// CHECK-NEXT: %[[TT:.*]] = arith.mulf %[[T]], %[[T]]
// CHECK-NEXT: %[[D:.*]] = arith.subf %[[ONE]], %[[TT]]
// CHECK-NEXT: return %[[D]]
// CHECK-LABEL: func.func private @sin.d.0(
// CHECK-NEXT: %[[D:.*]] = math.cos %arg0
// CHECK-NEXT: return %[[D]]
// CHECK-LABEL: func.func private @cos.d.0(
// CHECK-NEXT: %[[S:.*]] = math.sin %arg0
// CHECK-NEXT: %[[D:.*]] = arith.negf %[[S]]
// CHECK-NEXT: return %[[D]]
// CHECK-LABEL: func.func private @atan.d.0(
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[XX:.*]] = arith.mulf %arg0, %arg0
// CHECK-NEXT: %[[XX1:.*]] = arith.addf %[[XX]], %[[ONE]]
// CHECK-NEXT: %[[D:.*]] = arith.divf %[[ONE]], %[[XX1]]
// CHECK-NEXT: return %[[D]]
// CHECK-LABEL: func.func private @erf.d.0(
// CHECK-NEXT: %[[K:.*]] = arith.constant 1.12837923 : f32
// CHECK-NEXT: %[[XX:.*]] = arith.mulf %arg0, %arg0
// CHECK-NEXT: %[[NXX:.*]] = arith.negf %[[XX]]
// CHECK-NEXT: %[[E:.*]] = math.exp %[[NXX]]
// CHECK-NEXT: %[[D:.*]] = arith.mulf %[[E]], %[[K]]
// CHECK-NEXT: return %[[D]]

// -----

// extf/truncf carry the tangent across widths; floor, ceil and an int-to-float
// conversion are piecewise constant; maxnumf/minnumf follow max/min.
func.func @casts(%x: f32) -> f32 {
  %w = arith.extf %x : f32 to f64
  %e = math.exp %w : f64
  %r = arith.truncf %e : f64 to f32
  return %r : f32
}
func.func @steps(%x: f32, %n: i32) -> f32 {
  %f = math.floor %x : f32
  %c = math.ceil %x : f32
  %i = arith.sitofp %n : i32 to f32
  %s = arith.addf %f, %c : f32
  %r = arith.mulf %s, %i : f32
  return %r : f32
}
func.func @nums(%x: f32, %y: f32) -> f32 {
  %a = arith.maxnumf %x, %y : f32
  %r = arith.minnumf %a, %y : f32
  return %r : f32
}
// CHECK-LABEL: func.func private @casts.d.0(
// CHECK-NEXT: %[[W:.*]] = arith.extf %arg0 : f32 to f64
// CHECK-NEXT: %[[E:.*]] = math.exp %[[W]] : f64
// CHECK-NEXT: %[[D:.*]] = arith.truncf %[[E]] : f64 to f32
// CHECK-NEXT: return %[[D]]
// CHECK-LABEL: func.func private @steps.d.0(
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: return %[[ZERO]]
// CHECK-LABEL: func.func private @nums.d.0(
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[A:.*]] = arith.maxnumf %arg0, %arg1
// CHECK-NEXT: %[[XWINS:.*]] = arith.cmpf ogt, %arg0, %arg1
// CHECK-NEXT: %[[DA:.*]] = arith.select %[[XWINS]], %[[ONE]], %[[ZERO]]
// CHECK-NEXT: %[[AWINS:.*]] = arith.cmpf olt, %[[A]], %arg1
// CHECK-NEXT: %[[D:.*]] = arith.select %[[AWINS]], %[[DA]], %[[ZERO]]
// CHECK-NEXT: return %[[D]]

// -----

// powf by base and exponent; fma; fpowi by its float base only.
func.func @powers(%x: f32, %y: f32, %n: i32) -> f32 {
  %p = math.powf %x, %y : f32
  %i = math.fpowi %x, %n : f32, i32
  %r = math.fma %p, %i, %y : f32
  return %r : f32
}
// CHECK-LABEL: func.func private @powers.d.1(
// CHECK: math.log
// CHECK-LABEL: func.func private @powers.d.0(
// CHECK: %[[YM1:.*]] = arith.subf %{{.*}}, %{{.*}} : f32
// CHECK: math.powf %{{.*}}, %[[YM1]]
// CHECK: arith.subi %{{.*}}, %{{.*}} : i32
// CHECK: math.fpowi
// CHECK: arith.sitofp

// -----

// A function without a float result is skipped.
func.func @predicate(%x: f32) -> i1 {
  %zero = arith.constant 0.0 : f32
  %r = arith.cmpf ogt, %x, %zero : f32
  return %r : i1
}
// CHECK-LABEL: func.func @predicate(
// CHECK-NOT: @predicate.d
