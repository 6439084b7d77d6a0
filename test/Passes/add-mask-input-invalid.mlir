// RUN: attn-opt %s --split-input-file --attn-add-mask-input="kind=bool" -verify-diagnostics
// RUN: not attn-opt %s --split-input-file --attn-add-mask-input="kind=causal" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not attn-opt %s --split-input-file --attn-add-mask-input 2>&1 | FileCheck %s --check-prefix=NOKIND
// RUN: not attn-opt %s --split-input-file --attn-add-mask-input="kind=bool kernel=other" 2>&1 | FileCheck %s --check-prefix=MISSING

// KIND: error: attn-add-mask-input: unsupported kind 'causal'; expected bool, additive or learnable-additive
// NOKIND: error: attn-add-mask-input: unsupported kind ''; expected bool, additive or learnable-additive
// MISSING: error: no attn.kernel named 'other'

// A kernel that already has an input named attn_mask: the pass would shadow it.
// expected-error @+1 {{attn-add-mask-input: the module already has a symbol named @attn_mask, the name of the input it adds; rename it}}
attn.input @attn_mask : tensor<?x?xi8>
attn.mask @own {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %m = attn.read @attn_mask[%i, %j] : i8
  %zero = arith.constant 0 : i8
  %keep = arith.cmpi ne, %m, %zero : i8
  attn.yield %keep : i1
}
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %zero = arith.constant 0.0 : f32
    %g = arith.maximumf %s, %zero : f32
    attn.yield %g : f32
  }
  denominator count
}
attn.kernel @k normalizer(@relu) mask(@own)

// -----

// Any symbol of that name, not only an input.
// expected-error @+1 {{attn-add-mask-input: the module already has a symbol named @attn_mask}}
attn.mask @attn_mask {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}
attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k normalizer(@relu) mask(@attn_mask)

// -----

// expected-error @+1 {{an artifact holds one kernel; this module has 2: choose one with kernel=<name>}}
module {
  attn.normalizer @relu {
    numerator {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      attn.yield %s : f32
    }
    denominator count
  }
  // expected-note @+1 {{candidate @a}}
  attn.kernel @a normalizer(@relu)
  // expected-note @+1 {{candidate @b}}
  attn.kernel @b normalizer(@relu)
}
