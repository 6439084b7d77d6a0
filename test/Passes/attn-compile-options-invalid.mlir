// Option values attn-compile refuses up front, each with a diagnostic naming what
// it expected: no LLVM warning or LLVM ERROR, no crash, no artifact.
// RUN: not attn-compile %s -o %t.so --cpu=bogus 2>&1 | FileCheck %s --check-prefix=UNKNOWN --implicit-check-not=recognized
// RUN: not attn-compile %s -o %t.so --cpu=i386 2>&1 | FileCheck %s --check-prefix=I386 --implicit-check-not="LLVM ERROR"
// RUN: not attn-compile %s -o %t.so --dtypes= 2>&1 | FileCheck %s --check-prefix=NODTYPES
// RUN: not attn-compile %s -o %t.so --dtypes=f32,,f64 2>&1 | FileCheck %s --check-prefix=EMPTYDTYPE
// RUN: not attn-compile %s -o %t.so --dtypes=f32,f32 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not attn-compile %s -o %t.so --cuda-targets= 2>&1 | FileCheck %s --check-prefix=NOTARGETS
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90,sm_90 2>&1 | FileCheck %s --check-prefix=TARGETTWICE
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90 --cuda-dtypes= 2>&1 | FileCheck %s --check-prefix=NOCUDADTYPES
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90 --cuda-dtypes=f16,f16 2>&1 | FileCheck %s --check-prefix=CUDADTYPETWICE
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90 --cuda-head-dims= 2>&1 | FileCheck %s --check-prefix=NOHEADDIMS
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90 --cuda-head-dims=64,64 2>&1 | FileCheck %s --check-prefix=HEADDIMTWICE
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90 --cuda-head-dims=64,sixty 2>&1 | FileCheck %s --check-prefix=HEADDIMWORD
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90 --cuda-head-dims=64,064 2>&1 | FileCheck %s --check-prefix=HEADDIMZERO
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90 --cuda-head-dims=-64 2>&1 | FileCheck %s --check-prefix=HEADDIMNEGATIVE
// RUN: not ls %t.so
// Target names themselves are checked by attn-select-gpu-schedule (select-gpu-schedule-invalid.mlir),
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_75 2>&1 | FileCheck %s --check-prefix=OLDTARGET
// as is each head dim and each --cuda-dtypes type.
// RUN: not attn-compile %s -o %t.so --cuda-targets=sm_90 --cuda-head-dims=64,48 2>&1 | FileCheck %s --check-prefix=HEADDIM48
// RUN: not ls %t.so

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
attn.kernel @softmax_attention normalizer(@softmax)

// UNKNOWN: attn-compile: error: --cpu=bogus is not a CPU of the host target {{.*}}; expected native or a 64-bit CPU of that target as LLVM names it
// I386: attn-compile: error: --cpu=i386 is a 32-bit CPU, which cannot run code for the host target x86_64
// NODTYPES: attn-compile: error: --dtypes='' names an empty entry; expected a comma-separated list of distinct entries, e.g. --dtypes=f32,f64
// EMPTYDTYPE: attn-compile: error: --dtypes='f32,,f64' names an empty entry
// TWICE: attn-compile: error: --dtypes='f32,f32' names 'f32' twice; expected a comma-separated list of distinct entries
// NOTARGETS: attn-compile: error: --cuda-targets='' names an empty entry; expected a comma-separated list of distinct entries, e.g. --cuda-targets=sm_80,sm_90
// TARGETTWICE: attn-compile: error: --cuda-targets='sm_90,sm_90' names 'sm_90' twice
// NOCUDADTYPES: attn-compile: error: --cuda-dtypes='' names an empty entry; expected a comma-separated list of distinct entries, e.g. --cuda-dtypes=f16,bf16,f32
// CUDADTYPETWICE: attn-compile: error: --cuda-dtypes='f16,f16' names 'f16' twice
// NOHEADDIMS: attn-compile: error: --cuda-head-dims='' names an empty entry; expected a comma-separated list of distinct entries, e.g. --cuda-head-dims=16,32,64,96,128,256
// HEADDIMTWICE: attn-compile: error: --cuda-head-dims='64,64' names '64' twice
// HEADDIMWORD: attn-compile: error: --cuda-head-dims='64,sixty' names 'sixty', which is not a head dim; expected positive integers, e.g. --cuda-head-dims=16,32,64,96,128,256
// HEADDIMZERO: attn-compile: error: --cuda-head-dims='64,064' names '064', which is not a head dim
// HEADDIMNEGATIVE: attn-compile: error: --cuda-head-dims='-64' names '-64', which is not a head dim
// OLDTARGET: error: 'attn.kernel' op CUDA target 'sm_75' is not supported; expected sm_XY with XY >= 80
// HEADDIM48: error: 'attn.kernel' op head dim 48 is not supported on GPU; supported: 16, 32, 64, 96, 128, 256
