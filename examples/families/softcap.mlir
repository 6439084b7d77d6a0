// Logit soft-capping (Gemma 2, Grok-1): s = cap·tanh((q·k/sqrt(d)) / cap) bounds every
// score to (-cap, cap) before the softmax, smoothly (scores far below the cap pass
// almost unchanged). The cap is a learnable score param here, initially Gemma 2's 50.
attn.score @softcap contract scaled_dot params(cap = 50.0) mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %cap: f32):
  %x = arith.divf %s, %cap : f32
  %t = math.tanh %x : f32
  %capped = arith.mulf %cap, %t : f32
  attn.yield %capped : f32
}

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @softcap_attention normalizer(@softmax) score(@softcap)
