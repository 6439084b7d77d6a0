// The parser fuzz target (fuzz/ParserFuzzer.cpp: no input crashes the parser or the
// verifier, and every module that verifies prints, parses and prints again the same,
// in the custom and the generic form), replayed on its seeds, the dialect tests and
// the examples. scripts/fuzz.sh runs it under libFuzzer.
// RUN: attn-parser-fuzz-replay %S/../../fuzz/corpus %S %examples | FileCheck %s
// CHECK: attn-parser-fuzz-replay: {{[0-9]+}} inputs
