//===- MaskIntervals.h - a mask region over a whole tile ----------*- C++
//-*-===//
//
// Block sparsity (issue 14, part 6). A tiled schedule asks, per (query tile,
// key tile) with b and h fixed, i in [iLo, iHi] and j in [jLo, jHi]: may the
// mask keep some pair of the tile (else the tile is skipped), and does it keep
// every pair (then the mask is not evaluated)? Interval arithmetic answers both
// at run time in a few scalar ops: every integer value of the region becomes a
// range [lo, hi], every boolean a pair (may be true, may be false), e.g. causal
// `j <= i` may be true when jLo <= iHi and may be false when jHi > iLo.
//
// Tensor inputs enter as value ranges the schedule supplies (ReadRange): a read
// whose indices are all b, h or constants is one element; a read indexed by i
// or j itself (doc[b, j]) ranges over the table's values on the tile, which the
// generated code takes from per-block minima and maxima computed once per call
// in O(N). Anything else (a float read, an op without an interval rule) leaves
// the kernel `dense`: its tiles evaluate the mask pair by pair.
//
// Index arithmetic is taken as not overflowing (indices stay far below 2^62).
// Unsigned ops follow the signed rules while their operands are non-negative,
// which the emitted code checks: otherwise an unsigned compare may go either
// way, a remui is any remainder, and any other unsigned op leaves the whole
// tile partial (e.g. `(i - j) % 3` above the diagonal, where i - j < 0).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_ANALYSIS_MASKINTERVALS_H
#define ATTN_LIB_ANALYSIS_MASKINTERVALS_H

#include "dialect/AttnOps.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::attn {

/// How the tiled schedules can classify tiles under `mask`: Indices (its
/// indices alone bound it), Tables (it also reads tensor inputs, as above) or
/// Dense.
BlockSparsity analyzeBlockSparsity(MaskOp mask);

/// An inclusive range [lo, hi] of an index or integer value (signed).
struct IntRange {
  Value lo, hi;
};

/// A tile: b and h fixed, i and j in inclusive ranges (index values).
struct TileRanges {
  Value b, h;
  IntRange i, j;
};

/// The mask on a tile (i1 values): some pair may be kept; every pair is kept.
struct TileClass {
  Value anyKept, allKept;
};

/// A read of a tensor input in a mask region that a Tables kernel may make:
/// every index b, h or a constant, except at most one, `rangeDim`, that is i
/// (`querySide`) or j.
struct MaskRead {
  ReadOp read;
  std::optional<unsigned> rangeDim;
  bool querySide = false;
};
SmallVector<MaskRead> maskReads(MaskOp mask);
/// The value of a read's index that is b, h or a constant (not i or j).
Value fixedReadIndex(ImplicitLocOpBuilder &b, Value index, Value batch, Value head);

/// The range of the values `read` gives on a tile (where it ranges, its index
/// `rangeDim` covers `rows` (i) or `keys` (j)).
using ReadRange = function_ref<IntRange(const MaskRead &read, const TileRanges &tile)>;

/// Emits the classification of `tile` under `mask` (analyzeBlockSparsity is not
/// Dense) at the builder's insertion point.
TileClass emitTileClass(ImplicitLocOpBuilder &b, MaskOp mask, const TileRanges &tile,
                        ReadRange readRange);

} // namespace mlir::attn

#endif
