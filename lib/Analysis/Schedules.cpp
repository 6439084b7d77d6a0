//===- Schedules.cpp - which loop schedules a kernel gets -----------------===//
#include "lib/Analysis/Schedules.h"

#include <algorithm>
#include <optional>

using namespace mlir;
using namespace mlir::attn;

/// AVX-512 has 32 vector registers, AVX2 and narrower 16.
static int64_t vectorRegisters(int64_t vectorBits) { return vectorBits >= 512 ? 32 : 16; }

SmallVector<Attribute> mlir::attn::defaultCpuSchedules(KernelOp kernel, Algorithm algorithm,
                                                       ArrayRef<FloatType> types,
                                                       int64_t vectorBits) {
  MLIRContext *ctx = kernel.getContext();
  // The linear form's work is O(N·d·dv) already. The additive contraction's tiles
  // contract its projected rows, as wide as v (`hidden`): no other width reaches them.
  // A scan visits a row's keys one at a time, last to first, and an implicit
  // normalizer's rows solve for τ_i over all their keys first (ScanLoops.cpp,
  // ThresholdLoops.cpp): generic loops only.
  bool tiles = algorithm != Algorithm::Kernelised && algorithm != Algorithm::Scan &&
               algorithm != Algorithm::Implicit;
  ScoreOp score = kernel.getScoreOp();
  std::optional<int64_t> onlyHeadDim;
  if (score && score.getContract() == ContractKind::Additive)
    onlyHeadDim = score.getHidden().value_or(0);
  SmallVector<Attribute> schedules;
  for (FloatType type : types) {
    schedules.push_back(CpuScheduleAttr::get(
        ctx, type, algorithm == Algorithm::Kernelised ? CpuVariant::Linear : CpuVariant::Generic, 0,
        0, 0, 0, 0, 0));
    int64_t lanes = vectorBits / type.getWidth();
    for (int64_t headDim : kTiledHeadDims) {
      if (!tiles || headDim % lanes != 0 || (onlyHeadDim && *onlyHeadDim != headDim))
        continue;
      // The forward's score tile (4 vectors per row) and its W·V accumulators
      // (as many, over a chunk of each output row) take half the registers: the
      // more rows, the fewer times each key and value row comes from L2.
      const int64_t forwardScoreVectors = 4;
      int64_t rows = std::clamp<int64_t>(vectorRegisters(vectorBits) / 2 / forwardScoreVectors, 1, 4);
      // The backward keeps no rows in registers across keys: its score and dP
      // tiles (2 vectors per row each) take half the registers, and its dK, dV
      // and dQ updates are GEMM-shaped loops over the block's rows and keys
      // that reuse each loaded row for every row (or key) of the block.
      // f64, which attn serves for precision rather than speed, gets half as
      // many rows: half the code, and the compile time, of its backward.
      const int64_t backwardScoreVectors = 2;
      int64_t backwardRows = vectorRegisters(vectorBits) / 2 / backwardScoreVectors;
      if (type.isF64())
        backwardRows /= 2;
      schedules.push_back(CpuScheduleAttr::get(
          ctx, type, CpuVariant::Tiled, headDim, lanes, rows, /*forwardKeys=*/forwardScoreVectors * lanes,
          /*backwardKeys=*/backwardScoreVectors * lanes, backwardRows));
      // Few query rows (a decoder step) against many keys: every key is read once
      // per row, straight from K, instead of packed into panels for a tile of
      // `rows` rows that would mostly repeat the last one. Not for f64, which
      // serves precision (its tiled forward is as exact): a quarter of an
      // artifact's compile time.
      if (!onlyHeadDim && !type.isF64())
        schedules.push_back(CpuScheduleAttr::get(ctx, type, CpuVariant::Decode, headDim, lanes,
                                                 kDecodeRows,
                                                 /*forwardKeys=*/forwardScoreVectors * lanes, 0, 0));
    }
  }
  return schedules;
}

CpuPairCost mlir::attn::cpuPairCost(CpuScheduleAttr schedule, Algorithm algorithm) {
  const double width = static_cast<double>(schedule.getType().getIntOrFloatBitWidth()) / 32;
  switch (schedule.getVariant()) {
  case CpuVariant::Tiled:
  case CpuVariant::Decode: {
    const double perLanes = 16.0 / static_cast<double>(std::max<int64_t>(schedule.getLanes(), 1));
    return {perLanes, perLanes};
  }
  case CpuVariant::Linear:
    // Its work is O(N·d·dv) per slice, not per pair: a per-pair estimate overstates
    // it, and the call keeps the threads it had before the manifest carried costs
    // (the reference rate per 4 bytes of element).
    return {width, width};
  case CpuVariant::Generic:
    break;
  }
  // The generic loops on one thread (bench/pair_costs.py, the run in bench/RESULTS.md:
  // f32, 8 heads, a decoder step of 1 × 1024 keys and a prompt of 64 × 256, d = 48 and
  // 64), ns per multiply-add on an AMD EPYC with AVX2, whose tiled loops ran a prompt
  // at 0.071 ns, 1.8 times the reference's 0.04 for 8 lanes; each factor is about
  // ns ÷ 0.02 ÷ 1.8. Softmax and tanhmax at d = 48: 0.93–1.23 forward, 0.51–1.08
  // backward; sparsemax and 1.5-entmax 0.53–0.79 forward, 0.20–0.77 backward (a
  // prompt's backward is the cheaper); stick-breaking's forward stops where the
  // survival underflows: 0.06–0.08 on a decoder step of random inputs, 0.17–0.19 on a
  // prompt; its backward 0.13–0.28. Not measured on AVX-512 or in f64 (taken as twice
  // f32, as the tiled loops are).
  switch (algorithm) {
  case Algorithm::Implicit:
    return {20 * width, 12 * width};
  case Algorithm::Scan:
    return {4 * width, 8 * width};
  default:
    return {30 * width, 20 * width};
  }
}

std::optional<int> mlir::attn::cudaChipVersion(StringRef chip) {
  int version = 0;
  if (!chip.consume_front("sm_") || chip.getAsInteger(10, version))
    return std::nullopt;
  return version;
}

GpuScheduleAttr mlir::attn::defaultGpuSchedule(StringRef chip, FloatType type, int64_t headDim,
                                               bool scan, unsigned learnableParams) {
  const int version = cudaChipVersion(chip).value_or(80);
  // A100 (sm_80) and Hopper have 164 / 228 KB of shared memory per block; sm_86 and
  // sm_89 about 100 KB.
  const bool largeSharedMemory = version == 80 || version >= 90;
  struct Tiles {
    int64_t blockM, blockN, warps, stages;
  } forward{64, 32, 4, 2}, backward{32, 32, 4, 1};
  if (!type.isF32() && headDim <= 128) {
    if (headDim <= 64)
      forward = {128, 64, 4, 3};
    else
      forward = largeSharedMemory ? Tiles{128, 64, 8, version >= 90 ? 3 : 2} : Tiles{64, 64, 4, 2};
    backward = {64, 64, headDim <= 64 ? 4 : 8, 2};
    // ptxas, MultiMax (8 params): dK/dV spilled 2.8–3.1 KB at 64 × 64 on sm_90 and 2.8 KB
    // on sm_80. sm_90 at 32 × 64, eight warps: 0 B (dK/dV keeps wgmma; dQ mma.sync,
    // 0–24 B); sm_80 there: 12.8 KB at d = 64 (ptxas held 32 registers), 0 B at 32 × 32.
    if (learnableParams >= kManyParamGradients)
      backward = version >= 90 ? Tiles{32, 64, 8, 2} : Tiles{32, 32, 4, 2};
  }
  if (scan && !type.isF32()) {
    int64_t warps = headDim <= 64 ? 4 : 8;
    forward = {64, 32, warps, 2};
    backward = {32, 32, warps, 2};
  }
  return GpuScheduleAttr::get(type.getContext(), chip, type, headDim, forward.blockM,
                              forward.blockN, forward.warps, forward.stages, backward.blockM,
                              backward.blockN, backward.warps, backward.stages);
}

FailureOr<KernelOp> mlir::attn::scheduledKernel(ModuleOp module, bool gpu) {
  StringRef attribute = gpu ? "gpu_schedule" : "cpu_schedule";
  SmallVector<KernelOp> kernels;
  for (KernelOp kernel : module.getOps<KernelOp>())
    if (gpu ? static_cast<bool>(kernel.getGpuSchedule())
            : static_cast<bool>(kernel.getCpuSchedule()))
      kernels.push_back(kernel);
  if (kernels.size() == 1)
    return kernels.front();
  if (kernels.empty())
    return module.emitError() << "no attn.kernel has a " << attribute << "; run "
                              << (gpu ? "attn-select-gpu-schedule" : "attn-select-schedule")
                              << " first";
  InFlightDiagnostic diag = module.emitError() << "an artifact holds one kernel; " << kernels.size()
                                               << " kernels have a " << attribute;
  for (KernelOp kernel : kernels)
    diag.attachNote(kernel.getLoc()) << "@" << kernel.getSymName();
  return failure();
}

SmallVector<FloatType> mlir::attn::cpuEntryTypes(KernelOp kernel) {
  SmallVector<FloatType> types;
  if (ArrayAttr schedules = kernel.getCpuScheduleAttr())
    for (auto schedule : schedules.getAsRange<CpuScheduleAttr>())
      if (schedule.getVariant() == CpuVariant::Generic ||
          schedule.getVariant() == CpuVariant::Linear)
        types.push_back(cast<FloatType>(schedule.getType()));
  return types;
}
