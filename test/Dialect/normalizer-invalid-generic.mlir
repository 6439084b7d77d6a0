// RUN: attn-opt %s --split-input-file --verify-diagnostics
//
// Verifier errors that the custom syntax cannot produce, reached through the
// generic op form (as a pass or a Python builder could build them).

// expected-error @+1 {{'attn.normalizer' op a summed denominator needs a region, or `denominator sum` to sum the numerator}}
"attn.normalizer"() <{denominator_kind = #attn<denominator sum>, param_inits = array<f64>, param_names = [], sym_name = "sum_without_region"}> ({
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}, {
}) : () -> ()

// -----

// expected-error @+1 {{'attn.normalizer' op a summed denominator takes no constant value}}
"attn.normalizer"() <{denominator_constant = 2.0 : f64, denominator_kind = #attn<denominator sum>, param_inits = array<f64>, param_names = [], sym_name = "sum_with_constant"}> ({
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}) : () -> ()

// -----

// expected-error @+1 {{'attn.normalizer' op a constant denominator needs a value}}
"attn.normalizer"() <{denominator_kind = #attn<denominator constant>, param_inits = array<f64>, param_names = [], sym_name = "constant_without_value"}> ({
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}, {
}) : () -> ()

// -----

// expected-error @+1 {{'attn.normalizer' op a constant denominator takes no region}}
"attn.normalizer"() <{denominator_constant = 1.0 : f64, denominator_kind = #attn<denominator constant>, param_inits = array<f64>, param_names = [], sym_name = "constant_with_region"}> ({
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}) : () -> ()

// -----

// expected-error @+1 {{'attn.normalizer' op a count denominator takes no region}}
"attn.normalizer"() <{denominator_kind = #attn<denominator count>, param_inits = array<f64>, param_names = [], sym_name = "count_with_region"}> ({
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}) : () -> ()

// -----

// expected-error @+1 {{'attn.normalizer' op epsilon applies to a summed denominator only}}
"attn.normalizer"() <{denominator_kind = #attn<denominator count>, epsilon = 1.0e-6 : f64, param_inits = array<f64>, param_names = [], sym_name = "count_with_epsilon"}> ({
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}, {
}) : () -> ()

// -----

// expected-error @+1 {{'attn.normalizer' op epsilon applies to a summed denominator only}}
"attn.normalizer"() <{denominator_constant = 1.0 : f64, denominator_kind = #attn<denominator constant>, epsilon = 1.0e-6 : f64, param_inits = array<f64>, param_names = [], sym_name = "constant_with_epsilon"}> ({
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}, {
}) : () -> ()

// -----

// expected-error @+1 {{'attn.normalizer' op declares 2 param names but 1 initial values}}
"attn.normalizer"() <{denominator_kind = #attn<denominator count>, param_inits = array<f64: 1.0>, param_names = ["a", "b"], sym_name = "names_without_inits"}> ({
^bb0(%s: f32, %bx: index, %h: index, %i: index, %j: index, %a: f32, %b: f32):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}, {
}) : () -> ()

// -----

// expected-error @+1 {{'attn.normalizer' op region #0 ('numerator') failed to verify constraint: region with 1 blocks}}
"attn.normalizer"() <{denominator_kind = #attn<denominator count>, param_inits = array<f64>, param_names = [], sym_name = "empty_numerator"}> ({
}, {
}, {
}, {
}) : () -> ()

// -----

// expected-error @+1 {{'attn.normalizer' op requires attribute 'denominator_kind'}}
"attn.normalizer"() <{param_inits = array<f64>, param_names = [], sym_name = "no_kind"}> ({
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}, {
}) : () -> ()

// -----

// expected-error @+1 {{'attn.score' op declares 1 param names but 0 initial values}}
"attn.score"() <{contract = #attn<contract dot>, param_inits = array<f64>, param_names = ["a"], sym_name = "score_names_without_inits"}> ({
}, {
}) : () -> ()

// -----

// expected-error @+1 {{'attn.normalizer' op `denominator sum` sums the numerator and takes no region; write either `denominator sum` or a denominator region}}
"attn.normalizer"() <{denominator_kind = #attn<denominator sum>, param_inits = array<f64>, param_names = [], sum_of_numerator, sym_name = "sum_with_region"}> ({
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}) : () -> ()

// -----

// expected-error @+1 {{'attn.normalizer' op sum_of_numerator applies to a summed denominator, not to a count denominator}}
"attn.normalizer"() <{denominator_kind = #attn<denominator count>, param_inits = array<f64>, param_names = [], sum_of_numerator, sym_name = "count_sum_of_numerator"}> ({
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}, {
}) : () -> ()

// -----

"attn.normalizer"() <{denominator_kind = #attn<denominator count>, param_inits = array<f64>, param_names = [], sym_name = "shared_yields_nothing"}> ({
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  "attn.yield"(%s) : (f32) -> ()
}, {
}, {
}, {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  // expected-error @+1 {{'attn.yield' op in the shared region must yield at least one value}}
  "attn.yield"() : () -> ()
}) : () -> ()
