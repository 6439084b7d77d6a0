//===- Passes.td - attn passes ------------------------------*- tablegen -*-===//
//
// The passes hand each other typed attributes on the attn.kernel (see
// dialect/AttnOps.td): each states what it reads and what it writes, and refuses
// with a diagnostic naming the missing pass when what it reads is absent.
//
//   attn-expand-shared-regions   reads the normalizers    writes their short forms out
//   attn-add-mask-input          reads the kernel         adds attn.input @attn_mask (on request)
//   attn-verify                  reads the module         writes nothing
//   attn-classify-normalizer     reads the regions        writes `algorithm`
//   attn-derive-backward         reads `algorithm`        writes `functions` (+ func.func)
//   attn-analyze-block-sparsity  reads the mask region    writes `block_sparsity`
//   attn-select-schedule         reads `algorithm`        writes `cpu_schedule`
//   attn-select-gpu-schedule     reads `algorithm`        writes `gpu_schedule` (Triton tiles)
//   attn-instantiate-functions   reads `functions`, the schedules   adds to `functions`
//   attn-lower-to-loops          reads all of the above   writes the CPU entry points
//   attn-emit-triton             reads `functions`, `block_sparsity`, `gpu_schedule`   prints Triton
//   attn-emit-manifest           reads the kernel, entry points, `gpu_schedule`   writes attn_manifest
//   attn-erase-declarations      erases the attn ops
//   attn-print-explanation       reads `algorithm`, `functions`   prints formulas
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_PASSES
#define ATTN_PASSES

include "mlir/Pass/PassBase.td"

def AttnAddMaskInput : Pass<"attn-add-mask-input", "::mlir::ModuleOp"> {
  let summary = "Gives a kernel torch's attn_mask as a tensor input";
  let description = [{
    Adds the tensor input `attn.input @attn_mask` [B, H, Nq, Nk], read at (b, h, i, j),
    to the kernel `kernel` names (the module's only kernel when empty), so torch's
    masks (SDPA's and nn.MultiheadAttention's `attn_mask`, any `key_padding_mask`) run
    inside the kernel (runtime/python/attn/masks.py fills it):

    - `kind=bool`: `tensor<?x?x?x?xi8>`, a keep table. The kernel's mask keeps a pair
      only where the table is nonzero: a new attn.mask when the kernel has none,
      else the existing mask's result `and` the table's.
    - `kind=additive`: `tensor<?x?x?x?xT>` (T the kernel's float type), added to the
      final score: a mod `s + table` on the kernel's score, after its existing mod
      (`t + table`); a kernel without attn.score gets `scaled_dot` (the default
      q·k/sqrt(d)) with that mod. The kernel's mask (as for `bool`) also drops the
      pairs whose entry is -inf, torch's "masked": their weight is exactly 0, and a
      row with no other key gives 0 instead of NaN.
    - `kind=learnable-additive`: the same input `learnable` (it gets a gradient).

    A mask or score that another kernel shares is copied for this kernel first
    (under a fresh name), so the other kernels do not change; one only this kernel
    uses is changed in place. Errors: an unknown kind, a module that already has a
    symbol named attn_mask, and attn-select-schedule's kernel selection errors. Run
    it first: the new mask or mod is classified and differentiated with the rest.
  }];
  let options = [
    Option<"kernelName", "kernel", "std::string", /*default=*/"\"\"",
           "Which attn.kernel gets the input when the module holds several">,
    Option<"kind", "kind", "std::string", /*default=*/"\"\"",
           "bool (a keep table, i8), additive (a score bias in the kernel's float type) "
           "or learnable-additive">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def AttnExpandSharedRegions : Pass<"attn-expand-shared-regions", "::mlir::ModuleOp"> {
  let summary = "Writes out the short forms of attn.normalizer";
  let description = [{
    Rewrites every attn.normalizer into the explicit form the other passes read:
    a `shared` region is copied to the start of the numerator and of a denominator
    region, whose shared-value arguments it replaces, then dropped; `denominator sum`
    becomes a denominator region that is a copy of the numerator. The normalizer
    computes the same g and C. Every pipeline runs it first; a pass that reads the
    regions and meets a short form stops with a diagnostic naming this pass.
  }];
}

def AttnVerify : Pass<"attn-verify", "::mlir::ModuleOp"> {
  let summary = "Checks that a module holds something to compile, of a size that compiles";
  let description = [{
    The op verifiers check each op; this pass checks the module as a compile unit:
    it must hold at least one attn.kernel, and every kernel must be small enough to
    compile in reasonable time (docs/architecture.md, Compile time), before any analysis reads it:
    no region of more than `max-region-ops` ops, and no more than
    `max-function-ops` ops in the scalar functions and derivatives
    attn-derive-backward would make (a lower bound: each region's size times the
    functions made from it; attn-derive-backward counts them exactly). Then it
    refuses a constant expression of a region (an op of constant operands, e.g.
    1.0 / 0.0) that folds to NaN or to an infinity not only compared with, as the
    verifier refuses such a literal.
  }];
  let options = [
    Option<"maxFunctionOps", "max-function-ops", "int64_t",
           /*default=*/"::mlir::attn::kDefaultMaxFunctionOps",
           "The most ops a kernel's functions and derivatives may hold together "
           "(as attn-derive-backward's option)">,
    Option<"maxRegionOps", "max-region-ops", "int64_t",
           /*default=*/"::mlir::attn::kDefaultMaxRegionOps",
           "The most ops one region of a kernel may hold (as attn-derive-backward's "
           "option)">
  ];
}

def AttnClassifyNormalizer : Pass<"attn-classify-normalizer", "::mlir::ModuleOp"> {
  let summary = "Chooses each normalizer's and kernel's forward algorithm";
  let description = [{
    Sets `algorithm` on every attn.normalizer: `online` (flash-style, stabilised by
    the running maximum of the exp arguments) when numerator and summed denominator
    carry exactly one exp factor per term, `plain` accumulation when they carry none
    or the denominator is a constant or a count. Anything else is an error naming
    the op that mixes exp degrees. See lib/Analysis/NormalizerAnalysis.h.
    First rewrites the regions to stable forms (lib/Transforms/StableForms.h:
    exp2, powf, expm1, sinh, cosh as math.exp; softplus written log(1 + e^x) in
    its bounded form; constants beside exp factors as ±e^(log|c|)), recording
    the rules applied in the normalizer's `rewrites`. Then checks that no kernel
    divides by a summed denominator that can be 0 (SignAnalysis.h; an error
    naming `epsilon` unless the normalizer has `assume_nonzero_denominator`).
    Then sets `algorithm` on every attn.kernel: `kernelised` (linear-time form,
    lib/Analysis/KernelisedAnalysis.h) when s = φ(q)·φ(k), g and C are linear in
    s and the mask is none or causal, else its normalizer's. A kernel with a
    feature map that does not qualify gets a remark naming the op that breaks the
    form. Every later pass reads this attribute instead of classifying again.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
}

def AttnDeriveBackward : Pass<"attn-derive-backward", "::mlir::ModuleOp"> {
  let summary = "Outlines each kernel's regions as scalar functions and derives their gradients";
  let description = [{
    Reads: the kernel's `algorithm` (attn-classify-normalizer; an error without it).
    Writes: private scalar func.func ops (numerator, denominator, stabiliser for
    online kernels, score mod, feature map, mask, cosFormer phase) and their
    symbolic derivatives (lib/Transforms/Differentiate.h), and the kernel's
    `functions` = [#attn.functions<...>] naming them by role
    (lib/Transforms/ScalarFunctions.h). Online normalizers are emitted
    stabilised: every exp factor e^x becomes e^(x - m). Functions of more than
    `inline-op-limit` ops are marked `no_inline` (the loops call them). Kernels
    that already have `functions` are left alone. A kernel past `max-region-ops`
    or `max-function-ops` is refused (as by attn-verify, before any function is
    made; the exact total after).
  }];
  let options = [
    Option<"inlineOpLimit", "inline-op-limit", "int64_t", /*default=*/"64",
           "Functions of more ops are called from the loops, not inlined (no_inline): "
           "their body dwarfs a call, and inlining them at every call site makes "
           "compile time grow with region size times call sites">,
    Option<"maxFunctionOps", "max-function-ops", "int64_t",
           /*default=*/"::mlir::attn::kDefaultMaxFunctionOps",
           "The most ops a kernel's functions and derivatives may hold together "
           "(docs/architecture.md, Compile time); past it the pass stops with a diagnostic "
           "instead of a compile of many minutes">,
    Option<"maxRegionOps", "max-region-ops", "int64_t",
           /*default=*/"::mlir::attn::kDefaultMaxRegionOps",
           "The most ops one region of a kernel may hold (docs/architecture.md, Compile time); "
           "checked with the lower bound of the total before any function is made">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def AttnAnalyzeBlockSparsity : Pass<"attn-analyze-block-sparsity", "::mlir::ModuleOp"> {
  let summary = "Decides how the tiled schedules skip tiles under each kernel's mask region";
  let description = [{
    Sets `block_sparsity` on every attn.kernel with a mask region (see
    lib/Analysis/MaskIntervals.h): `indices` when interval arithmetic over a
    tile's index ranges (b and h fixed, i and j in the tile's rows and keys)
    bounds the mask's boolean, e.g. causal, sliding-window, chunked or dilated
    masks; `tables` when it also reads tensor inputs at indices that are constant
    over the tile or are i or j themselves, whose value ranges the generated code
    takes per call from per-block minima and maxima (document masks, prefix-LM);
    `dense` otherwise. attn-lower-to-loops then emits, per (query tile, key tile),
    whether the mask may keep a pair (else the tile is skipped) and whether it
    keeps every pair (then the mask is not evaluated). Without the attribute a
    masked kernel's tiles evaluate the mask pair by pair.
  }];
}

def AttnSelectSchedule : Pass<"attn-select-schedule", "::mlir::ModuleOp"> {
  let summary = "Chooses the CPU loop schedules of the kernel an artifact is built from";
  let description = [{
    Reads: the kernel's `algorithm`. Writes: its `cpu_schedule`, a list of
    #attn.cpu_schedule: per element type a `generic` schedule (scf loops, any
    head dim and stride; `linear` for a kernelised kernel) and `tiled` ones for
    head dims 32, 64 and 128 (register-blocked on vectors of `vector-bits`; rows
    per block, forward and backward keys per block). A kernel that already has a
    `cpu_schedule` keeps it: a test or a tuner pins one by writing it.
  }];
  let options = [
    Option<"kernelName", "kernel", "std::string", /*default=*/"\"\"",
           "Which attn.kernel to schedule when the module holds several">,
    ListOption<"elementTypes", "element-types", "std::string",
               "Element types of the CPU entry points (f32, f64; default both)">,
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"512",
           "Vector register width of the tiled schedules (512: AVX-512, 256: AVX2)">,
  ];
}

def AttnSelectGpuSchedule : Pass<"attn-select-gpu-schedule", "::mlir::ModuleOp"> {
  let summary = "Chooses the Triton kernels' tiles, warps and stages per CUDA chip";
  let description = [{
    Reads: the kernel's `algorithm`. Writes: its `gpu_schedule`, one
    #attn.gpu_schedule per target chip, storage type and head dim
    (lib/Analysis/Schedules.h: defaultGpuSchedule), which the Triton emitter
    prints as the module's SCHEDULES and attn.triton_aot compiles. A kernel that
    already has a `gpu_schedule` keeps it.
  }];
  let options = [
    Option<"kernelName", "kernel", "std::string", /*default=*/"\"\"",
           "Which attn.kernel to schedule when the module holds several">,
    ListOption<"targets", "targets", "std::string",
               "CUDA chips (sm_80, sm_90, ...; default sm_80 and sm_90)">,
    ListOption<"elementTypes", "element-types", "std::string",
               "Storage types of the GPU kernels (f32, f16, bf16; default bf16)">,
    ListOption<"headDims", "head-dims", "int64_t",
               "Head dims of the GPU kernels (16, 32, 64, 96, 128, 256; default 64)">,
  ];
}

def AttnInstantiateFunctions : Pass<"attn-instantiate-functions", "::mlir::ModuleOp"> {
  let summary = "Copies a kernel's scalar functions to the types and vector widths its schedules use";
  let description = [{
    Reads: `functions` (attn-derive-backward; an error without it) and
    `cpu_schedule`. Writes: for every (float type, lanes) the schedules need
    that the kernel's functions are not at yet, retyped copies of them (on
    vector<lanes x _> for tiled schedules), added to `functions` as another
    #attn.functions.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::vector::VectorDialect"];
}

def AttnLowerToLoops : Pass<"attn-lower-to-loops", "::mlir::ModuleOp"> {
  let summary = "Generates the CPU forward and backward entry points of the scheduled kernel";
  let description = [{
    Reads, on the kernel with a `cpu_schedule` (one per module): `algorithm`,
    `cpu_schedule` and the `functions` instances those schedules need; an error
    names the pass to run when one is missing. Writes `attn_forward_<T>` and
    `attn_backward_<T>` (C interface, runtime/include/attn/abi.h) for every
    element type of the schedules: a dispatch to the tiled schedules' loops when
    the head dim matches and rows are contiguous, else to the generic (or
    linear) loops, as scf/vector/memref over strided memrefs calling the scalar
    functions. Leaves the attn ops in place. Run `inline` afterwards.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect", "::mlir::vector::VectorDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def AttnEmitManifest : Pass<"attn-emit-manifest", "::mlir::ModuleOp"> {
  let summary = "Writes the artifact's manifest as the attn_manifest() function";
  let description = [{
    Reads, on the kernel with a `cpu_schedule`: `algorithm`, params, weights, row
    inputs, the schedules' element types and the `gpu_schedule` (the lines of
    the Triton kernels), and checks that the CPU entry points
    (attn-lower-to-loops) exist. Writes the manifest text
    (runtime/include/attn/abi.h; lib/Codegen/Manifest.h is its one writer) as an
    LLVM global and the function `attn_manifest` returning it.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def AttnEraseDeclarations : Pass<"attn-erase-declarations", "::mlir::ModuleOp"> {
  let summary = "Erases the attn ops once the artifact's code and manifest exist";
  let description = [{
    Removes every attn.kernel, attn.normalizer, attn.score, attn.mask and
    attn.input: what
    remains is func/scf/vector/memref code and the manifest. The
    scalar functions stay until `inline` and `symbol-dce`.
  }];
}

def AttnApproximateMath : Pass<"attn-approximate-math", "::mlir::ModuleOp"> {
  let summary = "Replaces f32 math functions by polynomial approximations";
  let description = [{
    Applies MLIR's math polynomial approximations (exp, expm1, log, tanh, erf, ...)
    to f32 scalars and vectors, so the tiled kernels' exps vectorise instead of
    calling libm per lane. f64 stays on libm.

    With `avx512`, exp on vector<16xf32> instead takes
    the same range reduction and polynomial and scales by 2^n with
    `x86vector.avx512.mask.scalef`: no clamp of n and no exponent built from
    integer bits, 16 instructions where the upstream form takes 21. Lanes
    below ln 2^-126 return 0, as upstream's do: a denormal weight would send
    every multiply it enters through a microcode assist.
  }];
  let options = [
    Option<"avx512", "avx512", "bool", /*default=*/"false",
           "The target has AVX-512F: exp on 16 f32 lanes scales with vscalefps">,
  ];
  let dependentDialects = ["::mlir::vector::VectorDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect", "::mlir::x86vector::X86VectorDialect"];
}

def AttnPrintExplanation : Pass<"attn-print-explanation", "::mlir::ModuleOp"> {
  let summary = "Prints each kernel's algorithm and derived functions as formulas";
  let description = [{
    Reads: `algorithm` and `functions` (attn-classify-normalizer,
    attn-derive-backward; an error without them). Writes nothing to the IR; prints
    to stdout, for each attn.kernel: the algorithm and what it means, the
    stabiliser, g, h (or the constant / count denominator), the row offset, the
    score mod and mask, and the derivatives ∂g/∂s, ∂h/∂s and by every param, as
    infix formulas (lib/Analysis/ReadableMath.h). `attn-opt --attn-explain` runs
    it after the passes it needs and a cleanup.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def AttnEmitTriton : Pass<"attn-emit-triton", "::mlir::ModuleOp"> {
  let summary = "Prints a kernel as a Python module of Triton kernels (the GPU backend)";
  let description = [{
    Reads: `algorithm` and `functions` (attn-classify-normalizer,
    attn-derive-backward). Writes nothing to the IR; prints to stdout the kernel
    `kernel` names (or the module's only one) as one Python module: every scalar
    function as a @triton.jit function and the compiler's forward and backward
    kernel templates calling them (lib/Codegen/Triton/TritonEmitter.h). A kernel
    the emitter does not cover yet (kernelised form, weights,
    feature maps, bilinear / additive / cosine contractions) is an error naming
    the feature. `attn-opt --attn-triton` runs it after the passes it needs and
    a cleanup; `attn-compile --emit=triton` writes the same module.
  }];
  let options = [
    Option<"kernelName", "kernel", "std::string", /*default=*/"\"\"",
           "The attn.kernel to print (default: the module's only one)">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def AttnTestDifferentiate : Pass<"attn-test-differentiate", "::mlir::ModuleOp"> {
  let summary = "Test pass: derivatives of plain scalar functions";
  let description = [{
    For every func.func @f of the module returning one float, adds @f.d.<n>, the
    derivative of @f by its float argument n (lib/Transforms/Differentiate.h),
    for each float argument: the derivative rules are tested on small functions
    without a kernel around them.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

#endif // ATTN_PASSES
