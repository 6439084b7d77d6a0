// RUN: attn-opt %s --split-input-file --verify-diagnostics

// attn.yield terminates the regions of attn.normalizer, attn.score and
// attn.mask only.
func.func @f(%x: f32) {
  // expected-error @+1 {{'attn.yield' op expects parent op to be one of 'attn.normalizer, attn.score, attn.mask'}}
  attn.yield %x : f32
}

// -----

attn.normalizer @zero_values {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'attn.yield' op in the numerator region must yield one value, got 0 (only a normalizer's shared region yields several)}}
    "attn.yield"() : () -> ()
  }
  denominator count
}

// -----

// Exactly one value.
attn.normalizer @two_values {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'attn.yield' op in the numerator region must yield one value, got 2 (only a normalizer's shared region yields several)}}
    attn.yield %s, %s : f32, f32
  }
  denominator count
}

// -----

attn.normalizer @no_value {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{number of operands and types do not match: got 0 operands and 1 types}}
    attn.yield : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op numerator region must end in attn.yield}}
attn.normalizer @returns {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    func.return %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.normalizer' op numerator region must end in attn.yield}}
attn.normalizer @no_terminator {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %ix: index, %jx: index):
    %e = math.exp %s : f32
  }
  denominator count
}

// -----

// expected-error @+1 {{'attn.score' op region #1 ('mod') failed to verify constraint: region with at most 1 blocks}}
attn.score @branches contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  cf.br ^bb1(%s : f32)
^bb1(%t: f32):
  attn.yield %t : f32
}

// -----

// expected-error @+1 {{'attn.mask' op mask region must end in attn.yield}}
attn.mask @scf_yield {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %t = arith.constant true
  scf.yield %t : i1
}

// -----

// A yield before the end of the block is refused (reported as an op that
// does not belong in the region).
attn.normalizer @early_yield {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'attn.yield' op must be the last op of the numerator region}}
    attn.yield %s : f32
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator count
}

// -----

// The yielded type is the region's float type (the type of %s), in every region.
attn.normalizer @yields_f16 {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %t = arith.truncf %s : f32 to f16
    // expected-error @+1 {{'attn.yield' op in the numerator region must yield 'f32', got 'f16'}}
    attn.yield %t : f16
  }
  denominator count
}
