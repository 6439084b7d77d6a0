// RUN: attn-opt %s --split-input-file -verify-diagnostics
// #attn.entry (dialect/AttnOps.td, Attn_EntryAttr): what a generated entry point is.

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k normalizer(@relu)
// expected-error @+1 {{an entry point's element type is f32 or f64 (the CPU entry points of abi.h), got 'f16'}}
func.func @e(%q: memref<?x?xf16>) attributes {attn.entry = #attn.entry<role = forward, type = f16, kernel = @k>} {
  return
}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k normalizer(@relu)
// expected-error @+1 {{a backward entry point on 'f64' must take a memref of 'f64' first (abi.h), got 'memref<?x?xf32>'}}
func.func @e(%q: memref<?x?xf32>) attributes {attn.entry = #attn.entry<role = backward, type = f64, kernel = @k>} {
  return
}

// -----

attn.normalizer @relu {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  denominator count
}
attn.kernel @k normalizer(@relu)
// expected-error @+1 {{'attn.entry' names @missing, which is not an attn.kernel of the module}}
func.func @e(%q: memref<?x?xf32>) attributes {attn.entry = #attn.entry<role = merge, type = f32, kernel = @missing>} {
  return
}

// -----

// expected-error @+1 {{'attn.entry' belongs on a func.func, found on memref.global}}
memref.global "private" @e : memref<1xf32> {attn.entry = #attn.entry<role = merge, type = f32, kernel = @k>}

// -----

// expected-error @+1 {{'attn.entry' must be an #attn.entry, got "forward"}}
func.func @e(%q: memref<?x?xf32>) attributes {attn.entry = "forward"} {
  return
}

// -----

// expected-error @+1 {{unknown attn attribute '"attn.role"' on an operation (expected 'attn.entry')}}
func.func @e(%q: memref<?x?xf32>) attributes {attn.role = "forward"} {
  return
}
