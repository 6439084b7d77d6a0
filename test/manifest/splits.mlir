// The manifest's splits (lib/Analysis/KernelSplits.cpp, docs/artifacts.md) of the
// algorithms the golden files do not cover: how the runtime may divide a slice into
// calls, which it reads instead of the algorithm's name.
// RUN: attn-compile %examples/normalizers/sparsemax.mlir --emit=manifest --dtypes=f64 -o %t.implicit
// RUN: FileCheck %s --check-prefix=IMPLICIT < %t.implicit
// RUN: attn-compile %examples/normalizers/stick_breaking.mlir --emit=manifest --dtypes=f64 -o %t.scan
// RUN: FileCheck %s --check-prefix=SCAN < %t.scan
// RUN: attn-compile %examples/normalizers/stick_breaking_left_over.mlir --emit=manifest --dtypes=f64 -o %t.left-over
// RUN: FileCheck %s --check-prefix=LEFT-OVER < %t.left-over

// An implicit normalizer solves τ_i over every key of row i: rows only, both ways.
// IMPLICIT:      "algorithm": "implicit",
// IMPLICIT:      "splits": {
// IMPLICIT-NEXT:   "backward": "rows",
// IMPLICIT-NEXT:   "forward": "rows",
// IMPLICIT-NEXT:   "partial_calls": false
// IMPLICIT-NEXT: }

// A scan's forward chunks merge; its backward's need the suffix sums of later chunks.
// SCAN:      "algorithm": "scan",
// SCAN:      "splits": {
// SCAN-NEXT:   "backward": "rows",
// SCAN-NEXT:   "forward": "key_chunks",
// SCAN-NEXT:   "partial_calls": false
// SCAN-NEXT: }

// With a left-over the farthest chunk cannot tell padding from keys: no forward chunks.
// LEFT-OVER:      "algorithm": "scan",
// LEFT-OVER:      "splits": {
// LEFT-OVER-NEXT:   "backward": "rows",
// LEFT-OVER-NEXT:   "forward": "rows",
// LEFT-OVER-NEXT:   "partial_calls": false
// LEFT-OVER-NEXT: }
