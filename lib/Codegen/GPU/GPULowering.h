//===- GPULowering.h - CUDA kernels of an attn.kernel ------------*- C++ -*-===//
//
// Builds `gpu.module @attn_cuda` with the kernels of the CUDA ABI
// (runtime/include/attn/abi.h, section CUDA): forward, backward_prep,
// backward_dkdv and backward_dq per storage type and head dim, from the scalar
// functions attn-derive-backward emitted. Each kernel gpu.func carries
// attn.role / attn.dtype / attn.head_dim / attn.tile and known_block_size, from
// which the manifest's cuda-kernel lines are written (cudaManifestLines).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_CODEGEN_GPU_GPULOWERING_H
#define ATTN_LIB_CODEGEN_GPU_GPULOWERING_H

#include "dialect/AttnOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>

namespace mlir::attn {

/// The gpu.module holding an artifact's CUDA kernels.
constexpr const char *kCudaModuleName = "attn_cuda";

/// Head dims the GPU kernels support (one lane owns head_dim/32 columns).
constexpr int64_t kGpuHeadDims[] = {32, 64, 128};

/// XY of a CUDA chip name sm_XY (an sm_90a-style suffix allowed), else std::nullopt.
std::optional<int> cudaChipVersion(StringRef chip);

/// Builds gpu.module @attn_cuda for `kernel`: the four kernels for each of
/// `storageTypes` (f32, f16, bf16) and `headDims`, with one #nvvm.target per
/// chip of `chips` (sm_XY, XY >= 80) attached.
LogicalResult lowerKernelToGPU(KernelOp kernel, ArrayRef<FloatType> storageTypes,
                               ArrayRef<int64_t> headDims, ArrayRef<std::string> chips);

/// The manifest lines describing the CUDA kernels of `module` ("cuda-targets ..."
/// then one "cuda-kernel ..." per kernel), or "" without gpu.module @attn_cuda.
std::string cudaManifestLines(ModuleOp module);

} // namespace mlir::attn

#endif
