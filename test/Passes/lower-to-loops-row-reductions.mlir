// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-derive-backward --attn-select-schedule="element-types=f32 vector-bits=256" --attn-instantiate-functions --attn-lower-to-loops | FileCheck %s --check-prefix=AVX2
// RUN: attn-opt %s --split-input-file --attn-classify-normalizer --attn-derive-backward --attn-select-schedule="element-types=f32 vector-bits=512" --attn-instantiate-functions --attn-lower-to-loops | FileCheck %s --check-prefix=AVX512

// The tiled forward reduces its rows' score maxima (and their Σ h) by one shuffle
// tree for the whole register tile, not one reduction per row: two rows of 8
// lanes merge into one vector of two 4-lane segments, each segment combines
// with itself twice, and lanes 0 and 4 are the rows' totals. With 4 rows of 16
// lanes the merges leave the rows' segments in the order 0, 2, 1, 3, which the
// last shuffle puts back. The maxima then take one e^ for all rows.
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
attn.kernel @k normalizer(@softmax) {head_dims = array<i64: 64>}

// AVX2-LABEL: func.func private @attn_forward_f32.d64(
// After the two sites that pack kᵀ, whose transposes end with these shuffles
// (lower-to-loops-key-packing.mlir):
// AVX2-COUNT-8: vector.shuffle {{.*}} [1, 9, 3, 11, 5, 13, 7, 15]
// AVX2: %[[LOW:.*]] = vector.shuffle %[[ROW0:.*]], %[[ROW1:.*]] [0, 1, 2, 3, 8, 9, 10, 11] : vector<8xf32>, vector<8xf32>
// AVX2: %[[HIGH:.*]] = vector.shuffle %[[ROW0]], %[[ROW1]] [4, 5, 6, 7, 12, 13, 14, 15] : vector<8xf32>, vector<8xf32>
// AVX2: %[[MERGED:.*]] = arith.maximumf %[[LOW]], %[[HIGH]] fastmath<nnan,nsz> : vector<8xf32>
// AVX2: %[[PAIRS:.*]] = vector.shuffle %[[MERGED]], %[[MERGED]] [2, 3, 0, 1, 6, 7, 4, 5]
// AVX2: %[[HALVES:.*]] = arith.maximumf %[[MERGED]], %[[PAIRS]]
// AVX2: %[[NEIGHBOURS:.*]] = vector.shuffle %[[HALVES]], %[[HALVES]] [1, 0, 3, 2, 5, 4, 7, 6]
// AVX2: %[[TOTALS:.*]] = arith.maximumf %[[HALVES]], %[[NEIGHBOURS]]
// AVX2: %[[MAXIMA:.*]] = vector.shuffle %[[TOTALS]], %[[TOTALS]] [0, 4] : vector<8xf32>, vector<8xf32>
// AVX2: %[[NEW_MAX:.*]] = arith.maximumf %{{.*}}, %[[MAXIMA]] : vector<2xf32>
// AVX2: math.exp %{{.*}} : vector<2xf32>
// AVX2-NOT: vector.reduction <maximumf>
// AVX2: arith.addf %{{.*}}, %{{.*}} fastmath<reassoc> : vector<8xf32>
// AVX2: vector.shuffle %{{.*}}, %{{.*}} [0, 4] : vector<8xf32>, vector<8xf32>
// AVX2-LABEL: func.func private @attn_backward_f32.d64(

// AVX512-LABEL: func.func private @attn_forward_f32.d64(
// AVX512-COUNT-16: vector.shuffle {{.*}} [1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31]
// AVX512: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xf32>, vector<16xf32>
// AVX512: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27] : vector<16xf32>, vector<16xf32>
// AVX512: vector.shuffle %{{.*}}, %{{.*}} [2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13]
// AVX512: vector.shuffle %{{.*}}, %{{.*}} [1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14]
// AVX512: vector.shuffle %{{.*}}, %{{.*}} [0, 8, 4, 12] : vector<16xf32>, vector<16xf32>
// AVX512: math.exp %{{.*}} : vector<4xf32>
// AVX512-NOT: vector.reduction <maximumf>
// AVX512-LABEL: func.func private @attn_backward_f32.d64(
