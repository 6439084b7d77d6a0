//===- CPULowering.h - CPU forward/backward entry points ----------*- C++ -*-===//
#ifndef ATTN_LIB_CODEGEN_CPU_CPULOWERING_H
#define ATTN_LIB_CODEGEN_CPU_CPULOWERING_H

#include "dialect/AttnOps.h"

namespace mlir::attn {

/// Builds the ABI entry points (runtime/include/attn/abi.h) of `kernel` for each
/// of `elementTypes` from the functions outlineKernelFunctions emitted, and the
/// manifest. Call once per module: an artifact holds one kernel. The tiled
/// specialisations use vectors of `vectorBits` (512 for AVX-512, 256 for AVX2).
LogicalResult lowerKernelToLoops(KernelOp kernel, ArrayRef<FloatType> elementTypes,
                                 int64_t vectorBits);

/// The manifest text the artifact of `kernel` carries.
std::string buildManifest(KernelOp kernel, ArrayRef<FloatType> elementTypes);

} // namespace mlir::attn

#endif
