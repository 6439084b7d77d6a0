// A negative additive width is rejected (it used to verify as a huge unsigned).
// RUN: not attn-opt %s 2>&1 | FileCheck %s

// CHECK: error: 'attn.score' op 'hidden' must be positive, got -3
attn.score @negative_hidden contract additive hidden -3
