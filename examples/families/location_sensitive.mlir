// Chorowski et al.'s location-sensitive attention ("Attention-Based Models for Speech
// Recognition", 2015), one decoder step i over the encoder states h_j:
//   e_ij = w·tanh(W s_{i-1} + V h_j + U f_ij + b),   f_i = F * α_{i-1},   α_i = softmax_j(e_ij)
// f_ij [k] are k learnable 1-D convolutions F of the previous alignment α_{i-1}: they
// tell the score where the decoder attended last. The score is the additive
// contraction v·tanh(W_q q + W_k k) on augmented rows of head dim d' = d + 1 + k:
//   q   = [s_{i-1}; 1; 0_k],   W_q = [W | b | ·]   so W_q q   = W s_{i-1} + b
//   k_j = [h_j; 0; f_ij],      W_k = [V | · | U]   so W_k k_j = V h_j + U f_ij
// (the columns marked · multiply zeros; they stay 0), v = w. Here d = 16 (encoder and
// decoder width), k = 4 location channels, hidden n = 16: W_q, W_k [16 x 21].
// Initially W = V = identity, b = U = 0 (no location term), w = 0.25;
// examples/families/location_sensitive.py builds q, k, runs the conv F and draws a
// random initialisation.
attn.score @location_sensitive contract additive hidden 16 weights(W_q: 16x21 = identity, W_k: 16x21 = identity, v: 16 = 0.25)

attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator sum
}

attn.kernel @location_sensitive_attention normalizer(@softmax) score(@location_sensitive)
