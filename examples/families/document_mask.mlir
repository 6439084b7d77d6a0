// Document masking of packed sequences: several documents share one row of the batch,
// doc [B, N] (int64, a tensor input; N covers the queries and the keys) holds the document
// id of every position, and a query sees the keys of its own document only (with
// is_causal=True at the call: the causal mask within each document).
attn.input @doc : tensor<?x?xi64> dims(B, ?)

attn.mask @same_document {
^bb0(%b: index, %h: index, %i: index, %j: index):
  %di = attn.read @doc[%b, %i] : i64
  %dj = attn.read @doc[%b, %j] : i64
  %keep = arith.cmpi eq, %di, %dj : i64
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

attn.kernel @document_attention normalizer(@softmax) mask(@same_document)
