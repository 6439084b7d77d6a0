//===- Passes.h - attn passes and pipelines ---------------------*- C++ -*-===//
#ifndef ATTN_PASSES_PASSES_H
#define ATTN_PASSES_PASSES_H

// Only what the pass declarations need: each pass's source includes the dialects its
// definition registers (dependentDialects), so that NVVM's and X86Vector's headers,
// the heaviest, are parsed where they are used and not in every file including this.
#include "dialect/AttnOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::attn {
/// The default size limits of attn-verify and attn-derive-backward (docs/architecture.md,
/// Compile time): ops in a kernel's scalar functions and derivatives in all, ops in
/// one region.
inline constexpr int64_t kDefaultMaxFunctionOps = 20000;
inline constexpr int64_t kDefaultMaxRegionOps = 1000;

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Options of the CPU pipeline (and the CPU half of the CUDA one).
template <typename Derived> struct CpuPipelineOptionsBase : PassPipelineOptions<Derived> {
  ::mlir::detail::PassOptions::Option<std::string> kernel{
      *this, "kernel", llvm::cl::desc("Which attn.kernel to compile when the module holds several"),
      llvm::cl::init("")};
  ::mlir::detail::PassOptions::ListOption<std::string> elementTypes{
      *this, "element-types", llvm::cl::desc("Element types of the CPU entry points (f32, f64)")};
  ::mlir::detail::PassOptions::Option<int64_t> vectorBits{
      *this, "vector-bits",
      llvm::cl::desc("Vector register width of the tiled schedules (512: AVX-512, 256: AVX2)"),
      llvm::cl::init(512)};
};
struct CpuPipelineOptions : CpuPipelineOptionsBase<CpuPipelineOptions> {};
struct CudaPipelineOptions : CpuPipelineOptionsBase<CudaPipelineOptions> {
  ListOption<std::string> cudaElementTypes{
      *this, "cuda-element-types",
      llvm::cl::desc("Storage types of the CUDA kernels (f16, bf16, f32; default all three)")};
  ListOption<int64_t> headDims{
      *this, "head-dims", llvm::cl::desc("Head dims of the CUDA kernels (default 32, 64, 128)")};
  ListOption<std::string> targets{
      *this, "targets", llvm::cl::desc("CUDA chips to attach as #nvvm.target (sm_80, ...)")};
};

/// attn-cpu-pipeline: an attn module to the CPU code of one artifact, before the
/// conversion to LLVM: verify, classify, derive, schedule, instantiate, lower to
/// loops, emit the manifest, erase the attn ops, inline and clean up.
void buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options);

/// attn-cuda-pipeline: the same with the CUDA kernels (gpu.module @attn_cuda).
void buildCudaPipeline(OpPassManager &pm, const CudaPipelineOptions &options);

/// attn-host-to-llvm: the host code of an artifact (the output of either
/// pipeline above, gpu.module aside) to the LLVM dialect.
void buildHostToLLVMPipeline(OpPassManager &pm);

/// attn-gpu-to-nvvm: gpu.module @attn_cuda to the NVVM dialect, ready for
/// gpu-module-to-binary.
void buildGpuToNVVMPipeline(OpPassManager &pm);

/// What the Triton emitter reads (attn-emit-triton): verify, classify, derive,
/// analyse block sparsity, then a cleanup that keeps the printed functions short.
void buildTritonAnalysisPipeline(OpPassManager &pm);

/// Registers the pipelines above (and attn-triton: the analysis, then
/// attn-emit-triton) with the pass registry.
void registerAttnPipelines();

} // namespace mlir::attn

#endif
