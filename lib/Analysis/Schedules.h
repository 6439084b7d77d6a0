//===- Schedules.h - which loop schedules a kernel gets ----------*- C++ -*-===//
//
// The default choices of attn-select-schedule (CPU) and attn-select-gpu-schedule
// (the Triton kernels on CUDA), recorded on the kernel as #attn.cpu_schedule / #attn.gpu_schedule
// attributes that the lowerings read. A test or a tuner may write its own
// attributes instead; the lowerings check what they are given.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_ANALYSIS_SCHEDULES_H
#define ATTN_LIB_ANALYSIS_SCHEDULES_H

#include "dialect/AttnOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>

namespace mlir::attn {

/// Head dims that get a register-blocked CPU schedule by default.
constexpr int64_t kTiledHeadDims[] = {32, 64, 128};

/// The most query rows of a forward call that the decode schedule serves (the
/// tiled schedule takes calls of more).
constexpr int64_t kDecodeRows = 16;

/// Head dims the GPU (Triton) kernels are compiled for: a tile's head-dim axis is the
/// next power of two, and beyond 256 the accumulators no longer fit in registers.
constexpr int64_t kGpuHeadDims[] = {16, 32, 64, 96, 128, 256};

/// The CUDA chips the GPU kernels are compiled for when none are named.
constexpr const char *kDefaultCudaTargets[] = {"sm_80", "sm_90"};

/// Per element type of `types`: `linear` for a kernelised kernel, else
/// `generic`; then, unless kernelised, a `tiled` schedule for each head dim of
/// kTiledHeadDims (for the additive contraction only its hidden width) that vectors of `vectorBits` bits divide: rows per
/// block such that the output accumulators fill at most 16 vector registers (at
/// most 4 rows), keys per block 4 vectors (forward) and 2 (backward); beside each
/// tiled schedule of a dot-product score below f64, a `decode` one for forward
/// calls of at most kDecodeRows rows.
SmallVector<Attribute> defaultCpuSchedules(KernelOp kernel, Algorithm algorithm,
                                           ArrayRef<FloatType> types, int64_t vectorBits);

/// The Triton schedule of storage `type` and `headDim` on CUDA `chip` (sm_XY):
/// tiles, warps and stages sized so that the forward's Q tile and `num_stages` K/V
/// tiles fit the chip's shared memory (A100 and Hopper: 128 × 64 tiles for 16-bit
/// storage up to d = 128, eight warps beyond d = 64; sm_86/89: 64 × 64) and the
/// backward's five live tiles fit the registers (64 × 64, 32 × 32 from d = 256);
/// f32 storage, whose dots run on FMA units, gets 64 × 32 forward tiles. A scan's
/// kernels hold more [rows, keys] tiles (reverse cumsums, e^S, w·dP): 64 × 32 forward
/// and 32 × 32 backward tiles, eight warps beyond d = 64, without spills on sm_90
/// (docs/gpu.md). A kernel with at least kManyParamGradients learnable params sums a
/// [rows, keys] gradient term per param in dK/dV's tiles: 32 × 64 backward tiles with
/// eight warps on Hopper, 32 × 32 with four before it (MultiMax's eight params spilled
/// 2.8–3.1 KB at 64 × 64).
GpuScheduleAttr defaultGpuSchedule(StringRef chip, FloatType type, int64_t headDim,
                                   bool scan = false, unsigned learnableParams = 0);

/// Learnable params from which a kernel's backward gets the narrower tiles above.
constexpr unsigned kManyParamGradients = 4;

/// What a (query, key) pair's multiply-adds cost on one thread in a CPU schedule,
/// relative to the runtime's reference (runtime/work_split.h, kNanosPerMultiplyAdd: an
/// f32 multiply-add of the tiled loops on 16-lane vectors); the manifest's cpu_cost,
/// from which the runtime estimates a call's one-thread time and so how many threads
/// the call is worth. Coarse by design: a factor of two either way moves the thread
/// count of few calls.
struct CpuPairCost {
  double forward = 1, backward = 1;
};

/// The cost of `schedule` for a kernel classified as `algorithm` (a decode schedule's
/// rows cost what its tiled schedule's do).
CpuPairCost cpuPairCost(CpuScheduleAttr schedule, Algorithm algorithm);

/// XY of a CUDA chip name sm_XY, else std::nullopt.
std::optional<int> cudaChipVersion(StringRef chip);
/// The kernel of `module` that carries a `cpu_schedule` (`gpu`: a
/// `gpu_schedule`): the one the artifact is built from. A diagnostic naming the
/// pass to run when none does, or the candidates when several do.
FailureOr<KernelOp> scheduledKernel(ModuleOp module, bool gpu);

/// The element types of the kernel's CPU entry points: those of its generic and
/// linear schedules, in order.
SmallVector<FloatType> cpuEntryTypes(KernelOp kernel);

} // namespace mlir::attn

#endif
