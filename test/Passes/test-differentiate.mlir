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

// exp, log, sqrt, tanh, sin, cos; floor is piecewise constant.
func.func @transcendental(%x: f32) -> f32 {
  %e = math.exp %x : f32
  %l = math.log %e : f32
  %q = math.sqrt %l : f32
  %t = math.tanh %q : f32
  %s = math.sin %t : f32
  %c = math.cos %s : f32
  %f = math.floor %x : f32
  %r = arith.addf %c, %f : f32
  return %r : f32
}
// CHECK-LABEL: func.func private @transcendental.d.0(
// CHECK-DAG: math.exp
// CHECK-DAG: arith.divf
// CHECK-DAG: math.sqrt
// CHECK-DAG: math.tanh
// CHECK-DAG: math.cos
// CHECK-DAG: math.sin
// CHECK-NOT: math.floor
// CHECK: return

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
