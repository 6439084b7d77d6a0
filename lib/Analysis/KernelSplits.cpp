//===- KernelSplits.cpp - how an artifact's calls may divide a slice ------===//
#include "lib/Analysis/KernelSplits.h"

using namespace mlir;
using namespace mlir::attn;

StringRef mlir::attn::stringifySliceSplit(SliceSplit split) {
  switch (split) {
  case SliceSplit::Whole:
    return "whole";
  case SliceSplit::Rows:
    return "rows";
  case SliceSplit::KeyChunks:
    return "key_chunks";
  }
  llvm_unreachable("a SliceSplit");
}

KernelSplits mlir::attn::kernelSplits(KernelOp kernel, Algorithm algorithm) {
  switch (algorithm) {
  case Algorithm::Online:
  case Algorithm::Plain:
    return {SliceSplit::KeyChunks, SliceSplit::KeyChunks, /*partialCalls=*/true};
  case Algorithm::Kernelised:
    // A call builds its key state Σ φ(k) vᵀ over every key of the slice before its
    // rows: a call over part of the slice could not, and no partial state is merged.
    return {SliceSplit::Whole, SliceSplit::Whole, false};
  case Algorithm::Implicit:
    // τ_i is solved over every key of row i, which no merge of key chunks recovers.
    return {SliceSplit::Rows, SliceSplit::Rows, false};
  case Algorithm::Scan: {
    // The forward's chunk states (S, O) combine (ScanLoops.cpp), unless the scan has a
    // left-over: the farthest chunk adds r_i·v_i but cannot tell whether key i is
    // padding beyond its chunk. The backward's chunks need the suffix sums of the
    // chunks after them.
    bool leftOver = kernel.getNormalizerOp().getLeftOverToCurrent();
    return {leftOver ? SliceSplit::Rows : SliceSplit::KeyChunks, SliceSplit::Rows, false};
  }
  }
  llvm_unreachable("an Algorithm");
}
