//===- Schedules.h - which loop schedules a kernel gets ----------*- C++ -*-===//
//
// The default choices of attn-select-schedule (CPU) and attn-select-gpu-schedule
// (CUDA), recorded on the kernel as #attn.cpu_schedule / #attn.gpu_schedule
// attributes that the lowerings read. A test or a tuner may write its own
// attributes instead; the lowerings check what they are given.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_ANALYSIS_SCHEDULES_H
#define ATTN_LIB_ANALYSIS_SCHEDULES_H

#include "dialect/AttnOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::attn {

/// Head dims that get a register-blocked CPU schedule by default.
constexpr int64_t kTiledHeadDims[] = {32, 64, 128};

/// The most query rows of a forward call that the decode schedule serves (the
/// tiled schedule takes calls of more).
constexpr int64_t kDecodeRows = 16;

/// Head dims the GPU kernels support (one lane owns head_dim/32 columns).
constexpr int64_t kGpuHeadDims[] = {32, 64, 128};

/// Per element type of `types`: `linear` for a kernelised kernel, else
/// `generic`; then, unless kernelised, a `tiled` schedule for each head dim of
/// kTiledHeadDims (for the additive contraction only its hidden width) that vectors of `vectorBits` bits divide: rows per
/// block such that the output accumulators fill at most 16 vector registers (at
/// most 4 rows), keys per block 4 vectors (forward) and 2 (backward); beside each
/// tiled schedule of a dot-product score below f64, a `decode` one for forward
/// calls of at most kDecodeRows rows.
SmallVector<Attribute> defaultCpuSchedules(KernelOp kernel, Algorithm algorithm,
                                           ArrayRef<FloatType> types, int64_t vectorBits);

/// Per storage type and head dim: tensor cores for bf16, and for f16 when the
/// algorithm is online (its weights are bounded by 1; a plain normalizer's could
/// overflow f16), SIMT otherwise.
SmallVector<Attribute> defaultGpuSchedules(Algorithm algorithm, ArrayRef<FloatType> types,
                                           ArrayRef<int64_t> headDims);

/// The kernel of `module` that carries a `cpu_schedule` (`gpu`: a
/// `gpu_schedule`): the one the artifact is built from. A diagnostic naming the
/// pass to run when none does, or the candidates when several do.
FailureOr<KernelOp> scheduledKernel(ModuleOp module, bool gpu);

/// The element types of the kernel's CPU entry points: those of its generic and
/// linear schedules, in order.
SmallVector<FloatType> cpuEntryTypes(KernelOp kernel);

} // namespace mlir::attn

#endif
