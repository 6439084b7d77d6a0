// Sliding-window (local) attention: query i sees keys j with |i - j| <= 3.
// With is_causal=True at the call it becomes the causal window i - 3 <= j <= i.
attn.mask @window {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %width = arith.constant 3 : index
  %j_reach = arith.addi %j, %width : index
  %i_reach = arith.addi %i, %width : index
  %after_start = arith.cmpi uge, %j_reach, %i : index
  %before_end = arith.cmpi uge, %i_reach, %j : index
  %keep = arith.andi %after_start, %before_end : i1
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

attn.kernel @sliding_window_attention normalizer(@softmax) mask(@window)
