// RUN: attn-opt %s --split-input-file --attn-analyze-block-sparsity | FileCheck %s

// Causal: bounded by the indices alone.
// CHECK-LABEL: attn.kernel @causal
// CHECK-SAME: block_sparsity = #attn<block_sparsity indices>
attn.mask @m {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}

attn.kernel @causal normalizer(@softmax) mask(@m)

// -----

// Causal sliding window of 16 keys (gpt-oss's form).
// CHECK-LABEL: attn.kernel @window
// CHECK-SAME: block_sparsity = #attn<block_sparsity indices>
attn.mask @m {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %causal = arith.cmpi ule, %j, %i : index
  %width = arith.constant 16 : index
  %reach = arith.addi %j, %width : index
  %recent = arith.cmpi ugt, %reach, %i : index
  %keep = arith.andi %causal, %recent : i1
  attn.yield %keep : i1
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}

attn.kernel @window normalizer(@softmax) mask(@m)

// -----

// Prefix-LM with a constant prefix of 128 positions.
// CHECK-LABEL: attn.kernel @prefix_constant
// CHECK-SAME: block_sparsity = #attn<block_sparsity indices>
attn.mask @m {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %prefix = arith.constant 128 : index
  %in_prefix = arith.cmpi ult, %j, %prefix : index
  %causal = arith.cmpi ule, %j, %i : index
  %keep = arith.ori %in_prefix, %causal : i1
  attn.yield %keep : i1
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}

attn.kernel @prefix_constant normalizer(@softmax) mask(@m)

// -----

// Chunked attention: blocks of 64 positions see themselves.
// CHECK-LABEL: attn.kernel @chunked
// CHECK-SAME: block_sparsity = #attn<block_sparsity indices>
attn.mask @m {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %size = arith.constant 64 : index
  %ci = arith.divui %i, %size : index
  %cj = arith.divui %j, %size : index
  %keep = arith.cmpi eq, %ci, %cj : index
  attn.yield %keep : i1
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}

attn.kernel @chunked normalizer(@softmax) mask(@m)

// -----

// Dilated: every second key (bounded, its tiles are partial).
// CHECK-LABEL: attn.kernel @dilated
// CHECK-SAME: block_sparsity = #attn<block_sparsity indices>
attn.mask @m {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %two = arith.constant 2 : index
  %zero = arith.constant 0 : index
  %parity = arith.remui %j, %two : index
  %keep = arith.cmpi eq, %parity, %zero : index
  attn.yield %keep : i1
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}

attn.kernel @dilated normalizer(@softmax) mask(@m)

// -----

// Prefix-LM reading prefix[b]: one element per call.
// CHECK-LABEL: attn.kernel @prefix_table
// CHECK-SAME: block_sparsity = #attn<block_sparsity tables>
attn.input @t : tensor<?xi64>
attn.mask @m {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %length = attn.read @t[%b] : i64
  %j64 = arith.index_cast %j : index to i64
  %in_prefix = arith.cmpi slt, %j64, %length : i64
  %causal = arith.cmpi ule, %j, %i : index
  %keep = arith.ori %in_prefix, %causal : i1
  attn.yield %keep : i1
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}

attn.kernel @prefix_table normalizer(@softmax) mask(@m)

// -----

// Documents: doc[b, i] and doc[b, j] range over per-block minima and maxima.
// CHECK-LABEL: attn.kernel @document
// CHECK-SAME: block_sparsity = #attn<block_sparsity tables>
attn.input @t : tensor<?x?xi64>
attn.mask @m {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %di = attn.read @t[%b, %i] : i64
  %dj = attn.read @t[%b, %j] : i64
  %keep = arith.cmpi eq, %di, %dj : i64
  attn.yield %keep : i1
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}

attn.kernel @document normalizer(@softmax) mask(@m)

// -----

// A read at i + 1 has no per-block range: dense.
// CHECK-LABEL: attn.kernel @shifted_read
// CHECK-SAME: block_sparsity = #attn<block_sparsity dense>
attn.input @t : tensor<?x?xi64>
attn.mask @m {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %one = arith.constant 1 : index
  %next = arith.addi %i, %one : index
  %dn = attn.read @t[%b, %next] : i64
  %dj = attn.read @t[%b, %j] : i64
  %keep = arith.cmpi eq, %dn, %dj : i64
  attn.yield %keep : i1
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}

attn.kernel @shifted_read normalizer(@softmax) mask(@m)

// -----

// A float table compared: no interval rule, dense.
// CHECK-LABEL: attn.kernel @float_read
// CHECK-SAME: block_sparsity = #attn<block_sparsity dense>
attn.input @t : tensor<?xf32>
attn.mask @m {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %wi = attn.read @t[%i] : f32
  %zero = arith.constant 0.0 : f32
  %keep = arith.cmpf ogt, %wi, %zero : f32
  attn.yield %keep : i1
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}

attn.kernel @float_read normalizer(@softmax) mask(@m)

// -----

// Without a mask there is nothing to classify.
// CHECK-LABEL: attn.kernel @unmasked
// CHECK-NOT: block_sparsity
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}

attn.kernel @unmasked normalizer(@softmax)
