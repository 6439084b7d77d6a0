// RUN: attn-opt %examples/normalizers/stick_breaking.mlir --attn-classify-normalizer --attn-derive-backward --attn-select-schedule="element-types=f32" --attn-instantiate-functions --attn-lower-to-loops --attn-erase-declarations | FileCheck %s
//
// A scan without a left-over has a merge entry: the forward's key chunks write their
// partial state (row_max = the chunk's log-survival S, row_count = its kept keys when
// `partial`), and attn_merge_f32 folds the splits in split order, each nearer than
// the ones before it: S = S_split + S, O = O_split + e^(S_split)·O, then row_max = S
// and row_sum = C = 1 (RowAlgorithm's ScanState).

// CHECK-LABEL: func.func private @attn_forward_f32.generic(
// CHECK: %[[ROW:.*]]:2 = scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, f32)
// CHECK: memref.store %[[ROW]]#0, %{{.*}}[%{{.*}}]
// CHECK: scf.if %{{.*}} {
// CHECK-NEXT: memref.store %[[ROW]]#1, %{{.*}}[%{{.*}}]

// CHECK-LABEL: func.func @attn_merge_f32(
// CHECK-SAME: %[[OPARTS:[a-z0-9]+]]: memref<?x?xf32, strided<[?, ?], offset: ?>>, %[[MAXPARTS:[a-z0-9]+]]: memref<?xf32, strided<[?], offset: ?>>, %{{[a-z0-9]+}}: memref<?xf32, strided<[?], offset: ?>>, %{{[a-z0-9]+}}: memref<?xf32, strided<[?], offset: ?>>, %[[O:[a-z0-9]+]]: memref<?x?xf32, strided<[?, ?], offset: ?>>, %[[ROWMAX:[a-z0-9]+]]: memref<?xf32, strided<[?], offset: ?>>, %[[ROWSUM:[a-z0-9]+]]: memref<?xf32, strided<[?], offset: ?>>,
// CHECK: %[[SPLITS:.*]] = arith.divui
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[LOGR:.*]] = scf.for %[[SPLIT:.*]] = %{{.*}} to %[[SPLITS]] step %{{.*}} iter_args(%[[S:.*]] = %{{.*}}) -> (f32)
// CHECK: %[[AT:.*]] = arith.addi
// CHECK: %[[SPART:.*]] = memref.load %[[MAXPARTS]][%[[AT]]]
// CHECK: %[[SNEXT:.*]] = arith.addf %[[SPART]], %[[S]]
// CHECK: %[[FACTOR:.*]] = math.exp %[[SPART]]
// CHECK: scf.for %[[C:.*]] =
// CHECK: %[[NEAR:.*]] = memref.load %[[OPARTS]][%[[AT]], %[[C]]]
// CHECK: %[[FAR:.*]] = memref.load %[[O]][%[[I]], %[[C]]]
// CHECK: %[[SCALED:.*]] = arith.mulf %[[FACTOR]], %[[FAR]]
// CHECK: %[[SUM:.*]] = arith.addf %[[NEAR]], %[[SCALED]]
// CHECK: memref.store %[[SUM]], %[[O]][%[[I]], %[[C]]]
// CHECK: scf.yield %[[SNEXT]]
// CHECK: memref.store %[[LOGR]], %[[ROWMAX]][%[[I]]]
// CHECK: memref.store %{{.*}}, %[[ROWSUM]][%[[I]]]
// CHECK: return
