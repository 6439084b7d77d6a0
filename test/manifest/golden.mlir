// The compiler's manifest writer (lib/Codegen/Manifest.cpp) against the golden
// files of this directory, which the runtime's C++ reader
// (test/runtime/runtime_errors_test.cpp, ManifestGolden) and the Python reader
// (test/python/test_manifest_golden.py) parse. The schema:
// runtime/python/attn/manifest.schema.json.
// RUN: attn-compile %examples/normalizers/multimax.mlir --emit=manifest --cpu=skylake-avx512 -o %t.multimax
// RUN: diff %S/multimax.json %t.multimax
// RUN: attn-compile %examples/normalizers/linear.mlir --emit=manifest --cpu=skylake-avx512 --dtypes=f64 -o %t.linear
// RUN: diff %S/linear.json %t.linear
// RUN: attn-compile %examples/families/luong_general.mlir --emit=manifest --cpu=skylake-avx512 -o %t.luong_general
// RUN: diff %S/luong_general.json %t.luong_general
// RUN: attn-compile %examples/families/luong_local.mlir --emit=manifest --cpu=skylake-avx512 -o %t.luong_local
// RUN: diff %S/luong_local.json %t.luong_local
// RUN: attn-compile %examples/families/bahdanau.mlir --emit=manifest --cpu=skylake-avx512 -o %t.bahdanau
// RUN: diff %S/bahdanau.json %t.bahdanau
// RUN: attn-compile %examples/families/cosine.mlir --emit=manifest --cpu=skylake-avx512 -o %t.cosine
// RUN: diff %S/cosine.json %t.cosine
// RUN: attn-compile %examples/families/ssmax.mlir --emit=manifest --cpu=skylake-avx512 -o %t.ssmax
// RUN: diff %S/ssmax.json %t.ssmax
// RUN: attn-compile %examples/normalizers/softmax.mlir --emit=manifest --cpu=skylake-avx512 --dtypes=f32 --cuda-targets=sm_80,sm_90 --cuda-dtypes=bf16,f16 --cuda-head-dims=64,128 -o %t.softmax-triton
// RUN: diff %S/softmax-triton.json %t.softmax-triton
