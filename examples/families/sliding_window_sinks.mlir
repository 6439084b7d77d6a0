// Sliding-window attention with learnable attention sinks, as in gpt-oss: causal, query
// i sees keys i - 15 .. i (gpt-oss: 128), and every head h has a learnable sink logit
// sinks[h] that joins the softmax's denominator but carries no value:
//   C_i = e^(sinks[h]) + Σ_j e^s_ij,  O_i = Σ_j e^s_ij v_j / C_i.
// The sink is the normalizer's row offset β = e^(sinks[h]); its exponent joins the
// running max, and the sinks get gradients dβ = −D_i/C_i·β summed over the rows.
attn.input @sinks learnable : tensor<?xf32> dims(H)

attn.mask @window {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %causal = arith.cmpi ule, %j, %i : index
  %width = arith.constant 16 : index
  %reach = arith.addi %j, %width : index
  %recent = arith.cmpi ugt, %reach, %i : index
  %keep = arith.andi %causal, %recent : i1
  attn.yield %keep : i1
}

attn.normalizer @softmax_sinks {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
  offset {
  ^bb0(%b: index, %h: index, %i: index):
    %sink = attn.read @sinks[%h] : f32
    %e = math.exp %sink : f32
    attn.yield %e : f32
  }
}

attn.kernel @sliding_window_sinks_attention normalizer(@softmax_sinks) mask(@window)
