//===- KernelSplits.h - how an artifact's calls may divide a slice -*- C++ -*-===//
//
// The contract between the compiler and the runtime's work split: which divisions of
// a (batch, head) slice into entry-point calls the artifact's code supports. Decided
// here once from the kernel's classification; the merge entry point follows it
// (lib/Codegen/CPU/EntryPoints.cpp) and the manifest records it as "splits"
// (lib/Codegen/Manifest.cpp, docs/artifacts.md), which the runtime reads instead of
// the algorithm's name.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_ANALYSIS_KERNELSPLITS_H
#define ATTN_LIB_ANALYSIS_KERNELSPLITS_H

#include "dialect/AttnOps.h"

namespace mlir::attn {

/// How the calls of one direction (forward or backward) may divide a slice.
enum class SliceSplit {
  /// One call per slice, all its rows and keys from position 0.
  Whole,
  /// Any query rows per call, each row over all its keys.
  Rows,
  /// Any query rows, and chunks of their keys whose partial results combine: the
  /// forward's partial row states in the merge entry point, the backward's dq shares
  /// by summing.
  KeyChunks,
};

/// The manifest's name of `split`: "whole", "rows", "key_chunks".
StringRef stringifySliceSplit(SliceSplit split);

struct KernelSplits {
  SliceSplit forward = SliceSplit::Whole;
  SliceSplit backward = SliceSplit::Whole;
  /// Whether a caller may run the partial entry points on key blocks of its own
  /// (attention_partial_forward, attention_merge, attention_partial_backward: context
  /// parallelism): both directions split keys.
  bool partialCalls = false;
  /// The forward's key chunks leave partial row states: the artifact has a merge entry.
  bool hasMerge() const { return forward == SliceSplit::KeyChunks; }
};

/// The splits of `kernel`, classified as `algorithm`.
KernelSplits kernelSplits(KernelOp kernel, Algorithm algorithm);

} // namespace mlir::attn

#endif
