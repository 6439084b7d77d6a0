// Stick-breaking attention (Tan et al., arXiv 2410.17980): each kept key, from the
// nearest (the last) to the farthest, takes a share σ(s_ij) of what the keys after
// it left, w_ij = σ(s_ij)·Π_{k kept, k > j} (1 − σ(s_ik)), in log space:
//   w_ij = σ(s_ij)·exp(Σ_{k kept, k > j} d(s_ik)),  d(s) = log(1 − σ(s)) = −softplus(s)
// No denominator: what no key took, r_i = exp(Σ_k d(s_ik)), is dropped here
// (stick_breaking_left_over.mlir gives it to the query's own value). The paper's
// keys are j < i: the mask keeps those.
attn.mask @before {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi slt, %j, %i : index
  attn.yield %keep : i1
}

attn.normalizer @stick_breaking {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %ns = arith.negf %s : f32
    %e = math.exp %ns : f32
    %den = arith.addf %one, %e : f32
    %sigma = arith.divf %one, %den : f32
    attn.yield %sigma : f32
  }
  denominator log_survival {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // −softplus(s) = −max(s, 0) − log1p(e^-|s|), stable at any |s|.
    %zero = arith.constant 0.0 : f32
    %pos = arith.maximumf %s, %zero : f32
    %abs = math.absf %s : f32
    %nabs = arith.negf %abs : f32
    %e = math.exp %nabs : f32
    %l = math.log1p %e : f32
    %softplus = arith.addf %pos, %l : f32
    %d = arith.negf %softplus : f32
    attn.yield %d : f32
  }
}

attn.kernel @stick_breaking_attention normalizer(@stick_breaking) mask(@before)
