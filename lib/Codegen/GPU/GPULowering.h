//===- GPULowering.h - CUDA kernels of an attn.kernel ------------*- C++ -*-===//
//
// Builds `gpu.module @attn_cuda` with the kernels of the CUDA ABI
// (runtime/include/attn/abi.h, section CUDA): forward, backward_prep,
// backward_dkdv and backward_dq per #attn.gpu_schedule entry (storage type, head
// dim, SIMT or tensor cores), from the kernel's f32 scalar functions. Each kernel gpu.func carries
// attn.role / attn.dtype / attn.head_dim / attn.tile and known_block_size, from
// which the manifest's cuda-kernel lines are written (lib/Codegen/Manifest.h).
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

/// XY of a CUDA chip name sm_XY (an sm_90a-style suffix allowed), else std::nullopt.
std::optional<int> cudaChipVersion(StringRef chip);

/// Checks one #attn.gpu_schedule against what the GPU lowering builds: f16, bf16
/// or f32 storage, head dim 32, 64 or 128, tensor cores for f16/bf16 only.
LogicalResult checkGpuSchedule(KernelOp kernel, GpuScheduleAttr schedule);

/// Builds gpu.module @attn_cuda for `kernel`, which has a gpu_schedule
/// (attn-select-gpu-schedule): the four kernels of each of its schedules, from its f32 scalar
/// functions, with one #nvvm.target per chip of `chips` (sm_XY, XY >= 80) attached.
LogicalResult lowerKernelToGPU(KernelOp kernel, ArrayRef<std::string> chips);

} // namespace mlir::attn

#endif
