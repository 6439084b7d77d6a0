//===- Passes.td - attn passes ------------------------------*- tablegen -*-===//
#ifndef ATTN_PASSES
#define ATTN_PASSES

include "mlir/Pass/PassBase.td"

def AttnVerify : Pass<"attn-verify", "::mlir::ModuleOp"> {
  let summary = "Checks that a module holds something to compile";
  let description = [{
    The op verifiers check each op; this pass checks the module as a compile unit:
    it must hold at least one attn.kernel.
  }];
}

def AttnClassifyNormalizer : Pass<"attn-classify-normalizer", "::mlir::ModuleOp"> {
  let summary = "Chooses each normalizer's forward algorithm";
  let description = [{
    Sets `algorithm` on every attn.normalizer: `online` (flash-style, stabilised by
    the running maximum of the exp arguments) when numerator and summed denominator
    carry exactly one exp factor per term, `plain` accumulation when they carry none
    or the denominator is a constant or a count. Anything else is an error naming
    the op that mixes exp degrees. See lib/Analysis/NormalizerAnalysis.h.
    Then sets `algorithm` on every attn.kernel: `kernelised` (linear-time form,
    lib/Analysis/KernelisedAnalysis.h) when s = φ(q)·φ(k), g and C are linear in s and the
    mask is none or causal, else its normalizer's. A kernel with a feature map that
    does not qualify gets a remark naming the op that breaks the form.
  }];
}

def AttnDeriveBackward : Pass<"attn-derive-backward", "::mlir::ModuleOp"> {
  let summary = "Outlines each kernel's regions as scalar functions and derives their gradients";
  let description = [{
    For every attn.kernel @k emits private scalar functions @k.num, @k.den, @k.stab
    (online), @k.score, @k.feature, @k.mask and the symbolic derivatives
    @k.num.d.s, @k.num.d.<param>, ... (see lib/Transforms/ScalarFunctions.h). Online
    normalizers are emitted stabilised: every exp factor e^x becomes e^(x - m).
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def AttnLowerToLoops : Pass<"attn-lower-to-loops", "::mlir::ModuleOp"> {
  let summary = "Generates the CPU forward and backward entry points of a kernel";
  let description = [{
    Builds `attn_forward_<T>` and `attn_backward_<T>` (C interface, see
    runtime/include/attn/abi.h) for the module's attn.kernel from the functions
    attn-derive-backward emitted, as scf loops over strided memrefs, plus the
    `attn_manifest` function. Erases the attn ops. Run `inline` afterwards.
  }];
  let options = [
    Option<"kernelName", "kernel", "std::string", /*default=*/"\"\"",
           "Which attn.kernel to lower when the module holds several">,
    ListOption<"elementTypes", "element-types", "std::string",
               "Element types to instantiate (f32, f64)">,
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"512",
           "Vector register width of the tiled specialisations (512: AVX-512, 256: AVX2)">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect", "::mlir::LLVM::LLVMDialect",
                           "::mlir::vector::VectorDialect"];
}

def AttnLowerToGPU : Pass<"attn-lower-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Generates the CUDA kernels of a kernel as gpu.module @attn_cuda";
  let description = [{
    Builds `gpu.module @attn_cuda` holding, per storage type and head dim, the
    four kernels of the CUDA ABI (runtime/include/attn/abi.h, section CUDA):
    `attn_forward_<T>_d<D>`, `attn_backward_prep_<T>_d<D>`,
    `attn_backward_dkdv_<T>_d<D>`, `attn_backward_dq_<T>_d<D>`, from the functions
    attn-derive-backward emitted (inlined at their call sites). SIMT kernels: one
    warp per row, the other operand staged in shared memory, dot products reduced
    with gpu.shuffle, f32 arithmetic. The f16/bf16 kernels of online normalizers
    (and every bf16 kernel) run their products on tensor cores instead (Q·Kᵀ,
    P·V; backward dO·Vᵀ, dS·K, dSᵀ·Q, Pᵀ·dO): nvgpu.mma.sync for f16,
    nvvm.mma.sync for bf16, m16n8k16, f32 accumulation. Attaches one
    #nvvm.target per `targets` chip.
    Run before attn-lower-to-loops, which erases the attn ops and writes the
    manifest's cuda lines from this module.
  }];
  let options = [
    Option<"kernelName", "kernel", "std::string", /*default=*/"\"\"",
           "Which attn.kernel to lower when the module holds several">,
    ListOption<"elementTypes", "element-types", "std::string",
               "Storage types to instantiate (f32, f16, bf16; default all three)">,
    ListOption<"headDims", "head-dims", "int64_t",
               "Head dims to instantiate (32, 64, 128; default all three)">,
    ListOption<"targets", "targets", "std::string",
               "CUDA chips to attach as #nvvm.target (sm_80, sm_90, ...)">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::NVVM::NVVMDialect",
                           "::mlir::nvgpu::NVGPUDialect", "::mlir::vector::VectorDialect",
                           "::mlir::LLVM::LLVMDialect", "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def AttnApproximateMath : Pass<"attn-approximate-math", "::mlir::ModuleOp"> {
  let summary = "Replaces f32 math functions by upstream polynomial approximations";
  let description = [{
    Applies MLIR's math polynomial approximations (exp, expm1, log, tanh, erf, ...)
    to f32 scalars and vectors, so the tiled kernels' exps vectorise instead of
    calling libm per lane. f64 stays on libm.
  }];
  let dependentDialects = ["::mlir::vector::VectorDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

#endif // ATTN_PASSES
