// RUN: attn-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{'attn.input' op must have rank 1 to 4, got 'tensor<f32>'}}
attn.input @scalar : tensor<f32>

// -----

// expected-error @+1 {{'attn.input' op must have rank 1 to 4, got 'tensor<?x?x?x?x?xf32>'}}
attn.input @rank5 : tensor<?x?x?x?x?xf32>

// -----

// expected-error @+1 {{'attn.input' op extents must be '?' or positive, got 'tensor<0x?xf32>'}}
attn.input @empty : tensor<0x?xf32>

// -----

// expected-error @+1 {{'attn.input' op elements must be a float type or i8, i32, i64, got 'i1'}}
attn.input @bits : tensor<?xi1>

// -----

// expected-error @+1 {{'attn.input' op is learnable but has element type 'i64'; only float inputs have gradients}}
attn.input @ids learnable : tensor<?xi64>

// -----

attn.score @reads_a_mask contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  // expected-error @+1 {{'attn.read' op @causal must name an 'attn.input', but names a 'attn.mask'}}
  %x = attn.read @causal[%h] : f32
  attn.yield %x : f32
}
attn.mask @causal {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %keep = arith.cmpi ule, %j, %i : index
  attn.yield %keep : i1
}

// -----

attn.score @reads_nothing contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  // expected-error @+1 {{'attn.read' op @missing must name an 'attn.input', but names nothing}}
  %x = attn.read @missing[%h] : f32
  attn.yield %x : f32
}

// -----

attn.input @bias : tensor<?x?xf32>
attn.score @one_index contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  // expected-error @+1 {{'attn.read' op reads @bias of rank 2 with 1 indices; one index per dimension}}
  %x = attn.read @bias[%h] : f32
  attn.yield %x : f32
}

// -----

attn.input @doc : tensor<?x?xi64>
attn.mask @wrong_type {
^bb0(%b: index, %h: index, %i: index, %j: index):
  // expected-error @+1 {{'attn.read' op yields 'i32' but @doc holds 'i64'}}
  %x = attn.read @doc[%b, %i] : i32
  %zero = arith.constant 0 : i32
  %keep = arith.cmpi eq, %x, %zero : i32
  attn.yield %keep : i1
}

// -----

// The feature map sees no indices, so it reads no input.
attn.input @w : tensor<?xf32>
attn.score @feature_reads contract dot feature {
^bb0(%x: f32):
  %zero = arith.constant 0 : index
  // expected-error @+1 {{'attn.read' op reads a tensor input in the feature region, which sees no indices to read it at}}
  %w = attn.read @w[%zero] : f32
  %y = arith.mulf %x, %w : f32
  attn.yield %y : f32
}

// -----

// A float input has the kernel's float type.
attn.input @slopes : tensor<?xf64>
attn.score @s contract dot mod {
^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
  %slope = attn.read @slopes[%h] : f64
  %t = arith.truncf %slope : f64 to f32
  %u = arith.addf %s, %t : f32
  attn.yield %u : f32
}
attn.normalizer @softmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %e = math.exp %s : f32
    attn.yield %e : f32
  }
}
// expected-error @+1 {{'attn.kernel' op reads float input @slopes of element type 'f64' but computes in 'f32'; a float input has the kernel's float type}}
attn.kernel @k normalizer(@softmax) score(@s)

// -----

// The table ops of the outlined functions (attn-derive-backward makes them).
func.func @load_rank(%t: memref<?x?xf32, strided<[?, ?], offset: ?>>, %i: index) -> f32 {
  // expected-error @+1 {{'attn.table_load' op takes one index per dimension of 'memref<?x?xf32, strided<[?, ?], offset: ?>>', got 1}}
  %x = attn.table_load %t[%i] : memref<?x?xf32, strided<[?, ?], offset: ?>>, index -> f32
  return %x : f32
}

// -----

func.func @load_lanes(%t: memref<?xf32, strided<[?], offset: ?>>, %i: vector<8xindex>) -> f32 {
  // expected-error @+1 {{'attn.table_load' op must yield 'vector<8xf32>', got 'f32'}}
  %x = attn.table_load %t[%i] : memref<?xf32, strided<[?], offset: ?>>, vector<8xindex> -> f32
  return %x : f32
}

// -----

func.func @load_i64(%t: memref<?xf32, strided<[?], offset: ?>>, %i: i64) -> f32 {
  // expected-error @+1 {{'attn.table_load' op indices must be index or vector<n x index>, got 'i64'}}
  %x = attn.table_load %t[%i] : memref<?xf32, strided<[?], offset: ?>>, i64 -> f32
  return %x : f32
}

// -----

func.func @mixed(%t: memref<?x?xf32, strided<[?, ?], offset: ?>>, %i: index, %j: vector<4xindex>) -> f32 {
  // expected-error @+1 {{'attn.table_load' op indices must all have one type, got 'index' and 'vector<4xindex>'}}
  %x = attn.table_load %t[%i, %j] : memref<?x?xf32, strided<[?, ?], offset: ?>>, index, vector<4xindex> -> f32
  return %x : f32
}

// -----

func.func @position(%t: memref<?xf32, strided<[?], offset: ?>>, %i: index) -> f32 {
  // expected-error @+1 {{'attn.table_position' op must yield 'index', got 'f32'}}
  %x = attn.table_position %t[%i] : memref<?xf32, strided<[?], offset: ?>>, index -> f32
  return %x : f32
}

// -----

attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
func.func private @g(%s: f32, %m: f32, %b: index, %h: index, %i: index, %j: index) -> f32
// expected-error @+2 {{input must be a position in the kernel's inputs, got -1}}
// expected-error @+1 {{failed to parse Attn_KernelFunctionsAttr parameter 'table_grads'}}
attn.kernel @k normalizer(@n) {functions = [#attn.functions<type = f32, numerator = @g, numerator_ds = @g, table_grads = [#attn.table_grad<role = numerator, input = -1, derivative = @g, position = @g>]>]}

// -----

attn.normalizer @n {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
func.func private @g(%s: f32, %m: f32, %b: index, %h: index, %i: index, %j: index) -> f32
// expected-error @+1 {{table_grads holds #attn.table_grad entries, got [@g]}}
attn.kernel @k normalizer(@n) {functions = [#attn.functions<type = f32, numerator = @g, numerator_ds = @g, table_grads = [@g]>]}

// -----

// expected-error @+1 {{'attn.input' op has 2 entries in dims(...) but its type 'tensor<?x?x?xf32>' has rank 3; one per dimension}}
attn.input @gate learnable : tensor<?x?x?xf32> dims(B, H)

// -----

// expected-error @+1 {{'N' is not a dimension of the call; expected B, H, Hkv, Nq, Nk, ? or a number}}
attn.input @gate learnable : tensor<?x?x?xf32> dims(B, H, N)

// -----

// expected-error @+1 {{expected an extent: B, H, Hkv, Nq, Nk, ? or a number}}
attn.input @gate learnable : tensor<?x?x?xf32> dims(B, H, "Nq")

// -----

// expected-error @+1 {{'attn.input' op names dim 0 H but its type fixes it to 8; a named extent is '?' in the type, e.g. tensor<?x...> dims(H, ...)}}
attn.input @scale learnable : tensor<8xf32> dims(H)

// -----

// expected-error @+1 {{'attn.input' op has extent 16 in dims(...) for dim 1 but 32 in its type 'tensor<?x32xf32>'; a '?' or a number in dims(...) repeats the type's}}
attn.input @bias : tensor<?x32xf32> dims(H, 16)

// -----

// expected-error @+1 {{'attn.input' op has extent ? in dims(...) for dim 1 but 32 in its type 'tensor<?x32xf32>'; a '?' or a number in dims(...) repeats the type's}}
attn.input @bias : tensor<?x32xf32> dims(H, ?)

// -----

// expected-error @+1 {{'attn.input' op has extent 4 in dims(...) for dim 0 but ? in its type 'tensor<?xf32>'; a '?' or a number in dims(...) repeats the type's}}
attn.input @bias : tensor<?xf32> dims(4)

// -----

// expected-error @+1 {{'attn.input' op has an initial value but is not learnable; only a learnable input is created as a parameter (write 'learnable = FLOAT')}}
attn.input @scale = 0.5 : tensor<?xf32> dims(H)

// -----

// expected-error @+1 {{'attn.input' op has a non-finite initial value; expected a finite number}}
"attn.input"() {sym_name = "scale", learnable, init = 0x7FF0000000000000 : f64, type = tensor<?xf32>} : () -> ()

// -----

// expected-error @+1 {{'attn.input' op attribute 'dims' failed to satisfy constraint: extents: #attn.call_dim, i64 or unit}}
"attn.input"() {sym_name = "t", type = tensor<?xf32>, dims = ["H"]} : () -> ()
