// T5's relative position bias (Raffel et al.), bidirectional: s = q·k + bias[h, bucket(j - i)]
// with a learnable table bias [H, 32] (the tensor input, learned per head; T5 does not
// scale q·k). Of n = i - j: 16 buckets per sign (keys after the query in buckets 16..31);
// |n| < 8 exact, then logarithmic up to max_distance 128,
//   8 + ⌊log(|n|/8) / log(128/8) · 8⌋ = 8 + ⌊2·log2(|n|/8)⌋ = ⌊log2(|n|²)⌋ + 2,  capped at 15,
// computed exactly on integers (⌊log2 x⌋ = 63 - ctlz(x)): the float form T5's code uses
// lands on either side of a bucket boundary (|n| = 16, 32, 64) depending on rounding.
// The bucket is an integer: no gradient flows through it; dbias collects every pair's ds.
attn.input @bias learnable : tensor<?x32xf32> dims(H, 32)

attn.score @t5 contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %n = arith.subi %i, %j : index
  %zero = arith.constant 0 : index
  %half = arith.constant 16 : index
  %exact = arith.constant 8 : index
  %last = arith.constant 15 : index
  %negative = arith.cmpi slt, %n, %zero : index
  %side = arith.select %negative, %half, %zero : index
  %minus_n = arith.subi %zero, %n : index
  %distance = arith.select %negative, %minus_n, %n : index
  %small = arith.cmpi slt, %distance, %exact : index
  %d64 = arith.index_cast %distance : index to i64
  %square = arith.muli %d64, %d64 : i64
  %zeros = math.ctlz %square : i64
  %sixty_five = arith.constant 65 : i64
  %large64 = arith.subi %sixty_five, %zeros : i64
  %large = arith.index_cast %large64 : i64 to index
  %capped = arith.minsi %large, %last : index
  %within = arith.select %small, %distance, %capped : index
  %bucket = arith.addi %side, %within : index
  %bias = attn.read @bias[%h, %bucket] : f32
  %biased = arith.addf %s, %bias : f32
  attn.yield %biased : f32
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @t5_attention normalizer(@softmax) score(@t5)
