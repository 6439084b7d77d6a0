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
/// What the GPU schedule covers (attn-select-gpu-schedule's options).
#define ATTN_GPU_SCHEDULE_OPTIONS                                                            \
  ListOption<std::string> targets{                                                           \
      *this, "targets",                                                                      \
      llvm::cl::desc("CUDA chips of the Triton kernels (default sm_80, sm_90)")};            \
  ListOption<int64_t> headDims{*this, "head-dims",                                           \
                               llvm::cl::desc("Head dims of the Triton kernels (default 64)")}; \
  ListOption<std::string> gpuElementTypes {                                                  \
    *this, "gpu-element-types",                                                              \
        llvm::cl::desc("Storage types of the Triton kernels (f16, bf16, f32; default bf16)") \
  }
struct CudaPipelineOptions : CpuPipelineOptionsBase<CudaPipelineOptions> {
  ATTN_GPU_SCHEDULE_OPTIONS;
};
/// Options of the Triton pipeline (attn-triton).
struct TritonPipelineOptions : PassPipelineOptions<TritonPipelineOptions> {
  Option<std::string> kernel{*this, "kernel",
                             llvm::cl::desc("Which attn.kernel to print when the module holds "
                                            "several"),
                             llvm::cl::init("")};
  ATTN_GPU_SCHEDULE_OPTIONS;
};
#undef ATTN_GPU_SCHEDULE_OPTIONS

/// attn-cpu-pipeline: an attn module to the CPU code of one artifact, before the
/// conversion to LLVM: verify, classify, derive, schedule, instantiate, lower to
/// loops, emit the manifest, erase the attn ops, inline and clean up.
void buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options);

/// attn-cuda-pipeline: the same, with the gpu_schedule of the artifact's Triton kernels
/// (attn-select-gpu-schedule), which the manifest lists.
void buildCudaPipeline(OpPassManager &pm, const CudaPipelineOptions &options);

/// attn-host-to-llvm: the host code of an artifact (the output of either
/// pipeline above) to the LLVM dialect.
void buildHostToLLVMPipeline(OpPassManager &pm);

/// What the Triton emitter reads (attn-emit-triton): verify, classify, derive,
/// analyse block sparsity, select the GPU schedule, then a cleanup that keeps the
/// printed functions short.
void buildTritonAnalysisPipeline(OpPassManager &pm, const TritonPipelineOptions &options);

/// Registers the pipelines above (and attn-triton: the analysis, then
/// attn-emit-triton) with the pass registry.
void registerAttnPipelines();

} // namespace mlir::attn

#endif
