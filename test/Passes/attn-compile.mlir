// The one-shot driver: loops after the attn passes, optimised LLVM IR, and a
// linked shared object exporting the ABI entry points and the manifest, whether the
// LLVM IR is compiled on one thread or split over several (--jobs).
// RUN: attn-compile %s -o %t.mlir --emit=mlir
// RUN: FileCheck %s --check-prefix=LOOPS < %t.mlir
// RUN: attn-compile %s -o %t.ll --emit=llvm --dtypes=f32
// RUN: FileCheck %s --check-prefix=LLVM < %t.ll
// RUN: attn-compile %s -o %t.so
// RUN: llvm-nm -D --defined-only %t.so | FileCheck %s --check-prefix=SYMBOLS
// RUN: attn-seal --check %t.so | FileCheck %s --check-prefix=SEALED
// RUN: attn-compile %s -o %t.serial.so --jobs=1
// RUN: llvm-nm -D --defined-only %t.serial.so | FileCheck %s --check-prefix=SYMBOLS
// RUN: attn-compile %s -o %t.parallel.so --jobs=3
// RUN: llvm-nm -D --defined-only %t.parallel.so | FileCheck %s --check-prefix=SYMBOLS
// RUN: attn-seal --check %t.parallel.so | FileCheck %s --check-prefix=SEALED
// Temporary objects whose paths are short strings ("./attn-xxxxxx.o"):
// RUN: rm -rf %t.dir && mkdir %t.dir && cd %t.dir && env TMPDIR=. attn-compile %s -o %t.short.so --jobs=3
// RUN: llvm-nm -D --defined-only %t.short.so | FileCheck %s --check-prefix=SYMBOLS
// RUN: ls -A %t.dir | count 0
// RUN: not attn-compile %s -o %t.bad.so --dtypes=f16 2>&1 | FileCheck %s --check-prefix=BADTYPE
// RUN: not attn-compile %s.missing -o %t.none.so 2>&1 | FileCheck %s --check-prefix=NOFILE

attn.normalizer @tanhmax {
  numerator {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %g = arith.subf %p, %n : f32
    attn.yield %g : f32
  }
  denominator {
  ^bb0(%s: f32, %b: index, %hx: index, %i: index, %j: index):
    %p = math.exp %s : f32
    %ns = arith.negf %s : f32
    %n = math.exp %ns : f32
    %h = arith.addf %p, %n : f32
    attn.yield %h : f32
  }
}
attn.kernel @tanhmax_attention normalizer(@tanhmax)

// LOOPS-NOT: func.call
// LOOPS: func.func @attn_forward_f32(
// LOOPS: func.func @attn_backward_f32(
// LOOPS: func.func @attn_forward_f64(
// LOOPS: func.func @attn_backward_f64(

// LLVM: @attn_manifest_text = internal constant {{.*}}c"{\0A  \22abi\22: 10,\0A  \22algorithm\22: \22online\22,{{.*}}\22kernel\22: \22tanhmax_attention\22,{{.*}}\00"
// LLVM-DAG: define void @_mlir_ciface_attn_forward_f32(
// LLVM-DAG: define void @_mlir_ciface_attn_backward_f32(
// LLVM-DAG: define {{.*}}ptr @attn_manifest()
// What the entry points read (ABI version, no tensor inputs, any head dim, no params):
// LLVM-DAG: @attn_signature = {{.*}}constant [4 x i64] [i64 10, i64 0, i64 0, i64 0], align 8

// SYMBOLS-DAG: T _mlir_ciface_attn_backward_f32
// SYMBOLS-DAG: T _mlir_ciface_attn_backward_f64
// SYMBOLS-DAG: T _mlir_ciface_attn_forward_f32
// SYMBOLS-DAG: T _mlir_ciface_attn_forward_f64
// SYMBOLS-DAG: T attn_manifest
// SYMBOLS-DAG: R attn_signature

// The SHA-256 trailer appended after linking (runtime/include/attn/checksum.h).
// SEALED: .so: ok {{[0-9a-f]+$}}

// BADTYPE: error: unsupported element type 'f16'; expected f32 or f64
// NOFILE: attn-compile: error: cannot open input file
