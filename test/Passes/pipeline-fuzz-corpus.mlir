// The pipeline fuzz target (fuzz/PipelineFuzzer.cpp: expand, verify, classify and
// derive, which no input may crash or keep busy), replayed on its seeds (deep chains,
// a DAG whose values are used twice, a many-param chain, a deep score mod) and the
// examples, each under the 20 s limit scripts/fuzz.sh gives libFuzzer: an analysis
// exponential in the region depth fails here. scripts/fuzz.sh runs it under libFuzzer.
// RUN: attn-pipeline-fuzz-replay --timeout=20 %S/../../fuzz/pipeline-corpus %examples | FileCheck %s
// CHECK: attn-pipeline-fuzz-replay: {{[0-9]+}} inputs
