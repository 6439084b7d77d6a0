// RUN: attn-opt %examples/normalizers/stick_breaking_left_over.mlir --attn-classify-normalizer --attn-derive-backward --attn-select-schedule="element-types=f32" --attn-instantiate-functions --attn-lower-to-loops --attn-emit-manifest --attn-erase-declarations | FileCheck %s
//
// A scan normalizer lowers to the generic loops of ScanLoops.cpp alone: no tiled
// specialisation, and with a left-over no merge entry (the farthest key chunk, which
// adds r_i·v_i, cannot tell whether key i is padding: a call takes every key of its
// rows; lower-to-loops-scan-merge.mlir has the merge of a scan without one). The
// forward visits key j = end − 1 − t for t = 0, 1, ... carrying the log-survival S
// (and the keys kept), weights g·e^S, adds d to S, and gives e^S to the query's own
// value at the end (`left_over current`).

// CHECK-NOT: attn_merge_f32
// CHECK-LABEL: func.func private @attn_forward_f32.generic(
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[LAST:.*]] = arith.subi %{{.*}}, %c1
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[S:.*]] = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, f32)
// CHECK: arith.subi %[[LAST]], %[[T]]
// CHECK: func.call @stick_breaking_left_over_attention.mask
// CHECK: func.call @stick_breaking_left_over_attention.num
// CHECK: func.call @stick_breaking_left_over_attention.den
// CHECK: math.exp %[[S]]
// CHECK: math.exp
// CHECK-NOT: func.func
// CHECK: return
// CHECK-LABEL: func.func @attn_forward_f32(
// CHECK-NOT: .d32
// CHECK-LABEL: func.func private @attn_backward_f32.generic(
// CHECK: call @stick_breaking_left_over_attention.num.d.s
// CHECK: call @stick_breaking_left_over_attention.den.d.s
// CHECK-NOT: attn_merge_f32
// CHECK: algorithm\22: \22scan\22
