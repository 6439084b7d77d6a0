// RUN: attn-opt %s --split-input-file --attn-triton -o /dev/null | FileCheck %s
//
// How the Triton emitter prints integers of each width and the math ops that have no
// tl function (prelude helpers) or are one expression.

// Integers compute at the IR's width: index and i64 as int64 (the kernels' int32
// indices are cast once at the function's entry), i32 as int32; truncation keeps the
// low bits (to i1: the lowest), extension is signed or unsigned as the op says.
attn.mask @widths {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %product = arith.muli %i, %j : index
  %wide = arith.index_cast %product : index to i64
  %low = arith.index_cast %i : index to i32
  %back = arith.extsi %low : i32 to i64
  %unsigned = arith.extui %low : i32 to i64
  %bit = arith.trunci %wide : i64 to i1
  %positive = arith.index_castui %low : i32 to index
  %c7 = arith.constant 7 : i64
  %r = arith.remsi %wide, %c7 : i64
  %u = arith.divui %back, %unsigned : i64
  %ceil = arith.ceildivui %u, %c7 : i64
  %sum = arith.addi %r, %ceil : i64
  %s2 = arith.index_cast %sum : i64 to index
  %s3 = arith.addi %s2, %positive : index
  %c0 = arith.constant 0 : index
  %ne = arith.cmpi ne, %s3, %c0 : index
  %keep = arith.andi %ne, %bit : i1
  attn.yield %keep : i1
}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @widths_attention normalizer(@softmax) mask(@widths)

// CHECK-LABEL: KERNEL = "widths_attention"
// CHECK: def mask(b, h, i, j):
// CHECK-NEXT: i = tl.cast(i, tl.int64)
// CHECK-NEXT: j = tl.cast(j, tl.int64)
// CHECK-NEXT: t0 = (i * j)
// CHECK-NEXT: t1 = tl.cast(i, tl.int32)
// CHECK-NEXT: t2 = tl.cast(t1, tl.int64)
// CHECK-NEXT: t3 = tl.cast(tl.cast(t1, tl.uint32, bitcast=True), tl.int64)
// CHECK-NEXT: t4 = ((t0 & 1) != 0)
// CHECK-NEXT: t5 = tl.cast(tl.cast(t1, tl.uint32, bitcast=True), tl.int64)
// CHECK-NEXT: t6 = (t0 % 7)
// CHECK-NEXT: t7 = tl.cast((tl.cast(t2, tl.uint64, bitcast=True) // tl.cast(t3, tl.uint64, bitcast=True)), tl.int64, bitcast=True)
// CHECK-NEXT: t8 = tl.cast(tl.where(tl.cast(t7, tl.uint64, bitcast=True) == 0, 0, (tl.cast(t7, tl.uint64, bitcast=True) - 1) // 7 + 1), tl.int64, bitcast=True)
// CHECK: def attn_fwd(
// CHECK: q_start = tl.load(QueryStarts + b).to(tl.int64)
// CHECK-NEXT: key_start = tl.load(KeyStarts + b).to(tl.int64)

// -----

// Float math without a tl function: each a @triton.jit helper of the prelude (printed
// once, with the helpers it calls), or one inline expression.
// (In a mask: a score mod is differentiated, and atan2, sinh, ... have no derivative rule.)
attn.mask @math_mask {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %i64 = arith.index_cast %i : index to i64
  %s = arith.sitofp %i64 : i64 to f32
  %c = arith.constant 0.5 : f32
  %x = arith.mulf %s, %c : f32
  %n = arith.constant 3 : i32
  %at = math.atan %s : f32
  %a2 = math.atan2 %s, %x : f32
  %as = math.asin %x : f32
  %ac = math.acos %x : f32
  %ash = math.asinh %s : f32
  %ach = math.acosh %s : f32
  %ath = math.atanh %x : f32
  %sh = math.sinh %s : f32
  %ch = math.cosh %s : f32
  %pw = math.powf %s, %c : f32
  %pi = math.fpowi %s, %n : f32, i32
  %cb = math.cbrt %s : f32
  %ec = math.erfc %s : f32
  %tn = math.tan %s : f32
  %lg = math.log10 %s : f32
  %ro = math.round %s : f32
  %re = math.roundeven %s : f32
  %tr = math.trunc %s : f32
  %cs = math.copysign %x, %s : f32
  %nan = math.isnan %s : f32
  %inf = math.isinf %s : f32
  %fin = math.isfinite %s : f32
  %nor = math.isnormal %s : f32
  %bits = arith.bitcast %s : f32 to i32
  %u = arith.fptoui %s : f32 to i32
  %v0 = arith.addf %at, %a2 : f32
  %v1 = arith.addf %v0, %as : f32
  %v2 = arith.addf %v1, %ac : f32
  %v3 = arith.addf %v2, %ash : f32
  %v4 = arith.addf %v3, %ach : f32
  %v5 = arith.addf %v4, %ath : f32
  %v6 = arith.addf %v5, %sh : f32
  %v7 = arith.addf %v6, %ch : f32
  %v8 = arith.addf %v7, %pw : f32
  %v9 = arith.addf %v8, %pi : f32
  %v10 = arith.addf %v9, %cb : f32
  %v11 = arith.addf %v10, %ec : f32
  %v12 = arith.addf %v11, %tn : f32
  %v13 = arith.addf %v12, %lg : f32
  %v14 = arith.addf %v13, %ro : f32
  %v15 = arith.addf %v14, %re : f32
  %v16 = arith.addf %v15, %tr : f32
  %v17 = arith.addf %v16, %cs : f32
  %classes = arith.andi %nan, %inf : i1
  %classes2 = arith.ori %fin, %nor : i1
  %either = arith.ori %classes, %classes2 : i1
  %bu = arith.addi %bits, %u : i32
  %buf = arith.sitofp %bu : i32 to f32
  %v18 = arith.addf %v17, %buf : f32
  %zero = arith.constant 0.0 : f32
  %positive = arith.cmpf ogt, %v18, %zero : f32
  %keep = arith.andi %either, %positive : i1
  attn.yield %keep : i1
}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}
attn.kernel @math_attention normalizer(@softmax) mask(@math_mask)

// CHECK-LABEL: KERNEL = "math_attention"
// CHECK: def log1p_(x):
// CHECK: def expm1_(x):
// CHECK: def trunc_(x):
// CHECK: def round_(x):
// CHECK: def roundeven_(x):
// CHECK: def atan_(x):
// CHECK: def atan2_(y, x):
// CHECK: def asin_(x):
// CHECK: def acos_(x):
// CHECK: def asinh_(x):
// CHECK: def acosh_(x):
// CHECK: def atanh_(x):
// CHECK: def sinh_(x):
// CHECK: def cosh_(x):
// CHECK: def pow_(x, y):
// CHECK: def cbrt_(x):
// CHECK: def erfc_(x):
// CHECK: def mask(b, h, i, j):
// CHECK-NEXT: i = tl.cast(i, tl.int64)
// CHECK-NEXT: t0 = tl.cast(i, tl.float32)
// CHECK-NEXT: t1 = (t0 * 0.5)
// CHECK-NEXT: t2 = atan_(t0)
// CHECK-NEXT: t3 = atan2_(t0, t1)
// CHECK-NEXT: t4 = asin_(t1)
// CHECK-NEXT: t5 = acos_(t1)
// CHECK-NEXT: t6 = asinh_(t0)
// CHECK-NEXT: t7 = acosh_(t0)
// CHECK-NEXT: t8 = atanh_(t1)
// CHECK-NEXT: t9 = sinh_(t0)
// CHECK-NEXT: t10 = cosh_(t0)
// CHECK-NEXT: t11 = pow_(t0, 0.5)
// CHECK-NEXT: t12 = pow_(t0, tl.cast(3, tl.float32))
// CHECK-NEXT: t13 = cbrt_(t0)
// CHECK-NEXT: t14 = erfc_(t0)
// CHECK-NEXT: t15 = (tl.sin(t0) / tl.cos(t0))
// CHECK-NEXT: t16 = (tl.log(t0) * 0.43429448190325176)
// CHECK-NEXT: t17 = round_(t0)
// CHECK-NEXT: t18 = roundeven_(t0)
// CHECK-NEXT: t19 = trunc_(t0)
// CHECK-NEXT: t20 = tl.where(tl.cast(t0, tl.int32, bitcast=True) < 0, -tl.abs(t1), tl.abs(t1))
// CHECK-NEXT: t21 = (t0 != t0)
// CHECK-NEXT: t22 = (tl.abs(t0) == float("inf"))
// CHECK-NEXT: t23 = (tl.abs(t0) < float("inf"))
// CHECK-NEXT: t24 = ((tl.abs(t0) >= 1.1754943508222875e-38) & (tl.abs(t0) < float("inf")))
// CHECK-NEXT: t25 = tl.cast(t0, tl.int32, bitcast=True)
// CHECK-NEXT: t26 = tl.cast(tl.cast(t0, tl.uint32), tl.int32, bitcast=True)
