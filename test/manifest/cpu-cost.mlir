// The manifest's cpu_cost (lib/Analysis/Schedules.cpp cpuPairCost, docs/artifacts.md):
// per CPU schedule a call can reach, what a (query, key) pair's multiply-adds cost
// relative to an f32 multiply-add of the tiled loops on 16 lanes. The runtime's
// estimate of a call's one-thread time reads it to decide how many threads the call is
// worth.
// RUN: attn-compile %examples/normalizers/softmax.mlir --emit=manifest --cpu=skylake-avx512 --dtypes=f32,f64 -o %t.avx512
// RUN: FileCheck %s --check-prefix=AVX512 < %t.avx512
// RUN: attn-compile %examples/normalizers/softmax.mlir --emit=manifest --cpu=haswell --dtypes=f32,f64 -o %t.avx2
// RUN: FileCheck %s --check-prefix=AVX2 < %t.avx2
// RUN: attn-compile %examples/normalizers/sparsemax.mlir --emit=manifest --cpu=skylake-avx512 --dtypes=f32 -o %t.implicit
// RUN: FileCheck %s --check-prefix=IMPLICIT < %t.implicit
// RUN: attn-compile %examples/normalizers/stick_breaking.mlir --emit=manifest --cpu=skylake-avx512 --dtypes=f32 -o %t.scan
// RUN: FileCheck %s --check-prefix=SCAN < %t.scan
// RUN: attn-compile %examples/families/nested_tanh.mlir --emit=manifest --cpu=skylake-avx512 --dtypes=f32 -o %t.projected
// RUN: FileCheck %s --check-prefix=PROJECTED < %t.projected

// The generic loops first (every head dim), then a tiled schedule per head dim: on 16
// f32 lanes at the reference rate, f64 (8 lanes) at twice it; the decode schedules
// beside the f32 ones add no entry (their rows cost what their tiled schedule's do).
// AVX512:      "cpu_cost": [
// AVX512-NEXT:   {
// AVX512-NEXT:     "backward": 20,
// AVX512-NEXT:     "dtype": "f32",
// AVX512-NEXT:     "forward": 30
// AVX512-NEXT:   },
// AVX512-NEXT:   {
// AVX512-NEXT:     "backward": 1,
// AVX512-NEXT:     "d": 32,
// AVX512-NEXT:     "dtype": "f32",
// AVX512-NEXT:     "forward": 1,
// AVX512-NEXT:     "head_dim": 32
// AVX512-NEXT:   },
// AVX512-NEXT:   {
// AVX512-NEXT:     "backward": 1,
// AVX512-NEXT:     "d": 64,
// AVX512-NEXT:     "dtype": "f32",
// AVX512-NEXT:     "forward": 1,
// AVX512-NEXT:     "head_dim": 64
// AVX512-NEXT:   },
// AVX512-NEXT:   {
// AVX512-NEXT:     "backward": 1,
// AVX512-NEXT:     "d": 128,
// AVX512-NEXT:     "dtype": "f32",
// AVX512-NEXT:     "forward": 1,
// AVX512-NEXT:     "head_dim": 128
// AVX512-NEXT:   },
// AVX512-NEXT:   {
// AVX512-NEXT:     "backward": 40,
// AVX512-NEXT:     "dtype": "f64",
// AVX512-NEXT:     "forward": 60
// AVX512-NEXT:   },
// AVX512-NEXT:   {
// AVX512-NEXT:     "backward": 2,
// AVX512-NEXT:     "d": 32,
// AVX512-NEXT:     "dtype": "f64",
// AVX512-NEXT:     "forward": 2,
// AVX512-NEXT:     "head_dim": 32
// AVX512-NEXT:   },
// AVX512-NEXT:   {
// AVX512-NEXT:     "backward": 2,
// AVX512-NEXT:     "d": 64,
// AVX512-NEXT:     "dtype": "f64",
// AVX512-NEXT:     "forward": 2,
// AVX512-NEXT:     "head_dim": 64
// AVX512-NEXT:   },
// AVX512-NEXT:   {
// AVX512-NEXT:     "backward": 2,
// AVX512-NEXT:     "d": 128,
// AVX512-NEXT:     "dtype": "f64",
// AVX512-NEXT:     "forward": 2,
// AVX512-NEXT:     "head_dim": 128
// AVX512-NEXT:   }
// AVX512-NEXT: ],

// AVX2's 8 f32 lanes take twice the reference's time per multiply-add, its 4 f64 lanes
// four times.
// AVX2:      "cpu_cost": [
// AVX2-NEXT:   {
// AVX2-NEXT:     "backward": 20,
// AVX2-NEXT:     "dtype": "f32",
// AVX2-NEXT:     "forward": 30
// AVX2-NEXT:   },
// AVX2-NEXT:   {
// AVX2-NEXT:     "backward": 2,
// AVX2-NEXT:     "d": 32,
// AVX2-NEXT:     "dtype": "f32",
// AVX2-NEXT:     "forward": 2,
// AVX2-NEXT:     "head_dim": 32
// AVX2-NEXT:   },
// AVX2-NEXT:   {
// AVX2-NEXT:     "backward": 2,
// AVX2-NEXT:     "d": 64,
// AVX2-NEXT:     "dtype": "f32",
// AVX2-NEXT:     "forward": 2,
// AVX2-NEXT:     "head_dim": 64
// AVX2-NEXT:   },
// AVX2-NEXT:   {
// AVX2-NEXT:     "backward": 2,
// AVX2-NEXT:     "d": 128,
// AVX2-NEXT:     "dtype": "f32",
// AVX2-NEXT:     "forward": 2,
// AVX2-NEXT:     "head_dim": 128
// AVX2-NEXT:   },
// AVX2-NEXT:   {
// AVX2-NEXT:     "backward": 40,
// AVX2-NEXT:     "dtype": "f64",
// AVX2-NEXT:     "forward": 60
// AVX2-NEXT:   },
// AVX2-NEXT:   {
// AVX2-NEXT:     "backward": 4,
// AVX2-NEXT:     "d": 32,
// AVX2-NEXT:     "dtype": "f64",
// AVX2-NEXT:     "forward": 4,
// AVX2-NEXT:     "head_dim": 32
// AVX2-NEXT:   },
// AVX2-NEXT:   {
// AVX2-NEXT:     "backward": 4,
// AVX2-NEXT:     "d": 64,
// AVX2-NEXT:     "dtype": "f64",
// AVX2-NEXT:     "forward": 4,
// AVX2-NEXT:     "head_dim": 64
// AVX2-NEXT:   },
// AVX2-NEXT:   {
// AVX2-NEXT:     "backward": 4,
// AVX2-NEXT:     "d": 128,
// AVX2-NEXT:     "dtype": "f64",
// AVX2-NEXT:     "forward": 4,
// AVX2-NEXT:     "head_dim": 128
// AVX2-NEXT:   }
// AVX2-NEXT: ],

// An implicit normalizer and a scan have generic loops only, at their own rates.
// IMPLICIT:      "cpu_cost": [
// IMPLICIT-NEXT:   {
// IMPLICIT-NEXT:     "backward": 12,
// IMPLICIT-NEXT:     "dtype": "f32",
// IMPLICIT-NEXT:     "forward": 20
// IMPLICIT-NEXT:   }
// IMPLICIT-NEXT: ],
// SCAN:      "cpu_cost": [
// SCAN-NEXT:   {
// SCAN-NEXT:     "backward": 8,
// SCAN-NEXT:     "dtype": "f32",
// SCAN-NEXT:     "forward": 4
// SCAN-NEXT:   }
// SCAN-NEXT: ],

// W [32 x 16] projects q and k to 32 columns before the entry point dispatches on
// them: only the tiled schedule of 32 is reached, by calls with d = 16 and dv = 32.
// PROJECTED:      "cpu_cost": [
// PROJECTED-NEXT:   {
// PROJECTED-NEXT:     "backward": 20,
// PROJECTED-NEXT:     "dtype": "f32",
// PROJECTED-NEXT:     "forward": 30
// PROJECTED-NEXT:   },
// PROJECTED-NEXT:   {
// PROJECTED-NEXT:     "backward": 1,
// PROJECTED-NEXT:     "d": 16,
// PROJECTED-NEXT:     "dtype": "f32",
// PROJECTED-NEXT:     "forward": 1,
// PROJECTED-NEXT:     "head_dim": 32
// PROJECTED-NEXT:   }
// PROJECTED-NEXT: ],
