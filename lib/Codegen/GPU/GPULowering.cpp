//===- GPULowering.cpp - CUDA kernels of an attn.kernel -------------------===//
//
// SIMT kernels, one warp per row: a block of kWarpsPerBlock warps handles
// kWarpsPerBlock query rows (forward, backward_prep, backward_dq) or key rows
// (backward_dkdv) of one (batch, head). Lane l owns the columns l, l + 32, ...
// of its row; a dot product over the head dim is a lane-local partial sum and
// a gpu.shuffle xor butterfly, after which every lane holds the score, so the
// normaliser state (running max, Σ h, count) is warp-uniform and the control
// flow per key is uniform within a warp. The other operand's rows are staged
// in shared memory, kStagedRows at a time, converted to f32 (and through the
// feature map), by the whole block between two barriers. Arithmetic is f32
// whatever the storage type; the scalar functions of attn-derive-backward are
// inlined at their call sites, so CPU and GPU evaluate the same expressions.
//
// f16/bf16 kernels (online normalizers, or bf16) run every product on tensor
// cores instead (FlashAttention-2 style): 4 warps of 16 rows, tiles of the other
// operand in shared memory in the storage type, mma.sync m16n8k16 with f32
// accumulators, the score-shaped accumulators reused as A fragments (P, dS),
// row max and sums over the 4 lanes of a fragment row with gpu.shuffle. Forward:
// S = φ(Q)·φ(K)ᵀ, O += P·V. backward_dq: S, dP = dO·Vᵀ, dQ += dS·φ(K).
// backward_dkdv (keys as rows): Sᵀ = φ(K)·φ(Q)ᵀ, dPᵀ = V·dOᵀ, dV += Pᵀ·dO,
// dK += dSᵀ·φ(Q). backward_prep stays SIMT.
//
// Global tensors are contiguous [B, H, N, D] (statistics [B, H, N]) and arrive
// as bare !llvm.ptr<1> device pointers; element (b, h, n, c) is at
// ((b·H + h)·N + n)·D + c.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/GPU/GPULowering.h"
#include "lib/Codegen/GPU/GPUKernelBuilder.h"

#include "lib/Analysis/KernelSignature.h"
#include "lib/Analysis/NormalizerAnalysis.h"
#include "lib/Analysis/Schedules.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <cmath>

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cuda;

gpu::GPUFuncOp GPUKernelBuilder::createKernel(StringRef role, unsigned firstScalar,
                                              unsigned numArgs, ArrayRef<int64_t> tiles,
                                              unsigned vectors, int64_t tileRows, int64_t threads,
                                              Type sharedType, int64_t sharedPad) {
  MLIRContext *ctx = b.getContext();
  SmallVector<Type> inputs(firstScalar, ptrType);
  inputs.append(numArgs - firstScalar, b.getI64Type());
  SmallVector<Type> workgroup;
  for (int64_t rows : tiles)
    workgroup.push_back(MemRefType::get({rows, headDim + sharedPad}, sharedType ? sharedType : f32,
                                        MemRefLayoutAttrInterface(), sharedSpace));
  // One f32 entry per staged row.
  for (unsigned v = 0; v < vectors; ++v)
    workgroup.push_back(MemRefType::get({tiles.empty() ? kStagedRows : tiles.front()}, f32,
                                        MemRefLayoutAttrInterface(), sharedSpace));
  std::string name =
      ("attn_" + role + "_" + elementTypeName(storage) + "_d" + Twine(headDim)).str();
  auto function = gpu::GPUFuncOp::create(b, name, FunctionType::get(ctx, inputs, {}), workgroup);
  function->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  function.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({static_cast<int32_t>(threads), 1, 1}));
  function->setAttr("attn.role", b.getStringAttr(role));
  function->setAttr("attn.dtype", b.getStringAttr(elementTypeName(storage)));
  function->setAttr("attn.head_dim", b.getI64IntegerAttr(headDim));
  function->setAttr("attn.tile", b.getI64IntegerAttr(tileRows));

  b.setInsertionPointToStart(&function.getBody().front());
  blockThreads = threads;
  arguments.assign(function.getArguments().begin(),
                   function.getArguments().begin() + inputs.size());
  sharedTiles.assign(function.getWorkgroupAttributions().begin(),
                     function.getWorkgroupAttributions().begin() + tiles.size());
  sharedVectors.assign(function.getWorkgroupAttributions().begin() + tiles.size(),
                       function.getWorkgroupAttributions().end());
  thread = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  lane = arith::RemUIOp::create(b, thread, index(kWarpSize));
  warp = arith::DivUIOp::create(b, thread, index(kWarpSize));
  tileBase = mulIndex(gpu::BlockIdOp::create(b, gpu::Dimension::x), index(tileRows));
  batch = gpu::BlockIdOp::create(b, gpu::Dimension::z);
  Value head = gpu::BlockIdOp::create(b, gpu::Dimension::y);
  // The heads count is always the first scalar argument.
  batchHead = addIndex(mulIndex(batch, toIndex(arguments[firstScalar])), head);
  std::optional<double> fixed = fixedScoreScale(kernel);
  scale = constant(fixed ? *fixed : 1.0 / std::sqrt(static_cast<double>(headDim)));
  return function;
}

void GPUKernelBuilder::readProblem(Value params, Value keyLengths, Value nq, Value nk,
                                   Value causal) {
  queries = toIndex(nq);
  keys = toIndex(nk);
  keyBounds.kvEnd = minIndex(
      toIndex(LLVM::LoadOp::create(b, b.getI64Type(), element(keyLengths, batch, b.getI64Type()))),
      keys);
  keyBounds.isCausal = arith::CmpIOp::create(b, arith::CmpIPredicate::ne, causal,
                                             arith::ConstantIntOp::create(b, 0, 64));
  paramValues.clear();
  for (unsigned p = 0, e = kernelParamNames(kernel).size(); p < e; ++p)
    paramValues.push_back(loadF32(params, index(p)));
  math.emplace(b, MathSetup{normalizer, online, &fns, CallStyle::Inline}, paramValues);
}

GPUKernelBuilder::KernelArgs GPUKernelBuilder::forwardArgs() {
  ArrayRef<Value> a = arguments;
  readProblem(a[ATTN_CUDA_FORWARD_PARAMS], a[ATTN_CUDA_FORWARD_KEY_LENGTHS],
              a[ATTN_CUDA_FORWARD_NQ], a[ATTN_CUDA_FORWARD_NK], a[ATTN_CUDA_FORWARD_CAUSAL]);
  KernelArgs args;
  args.q = a[ATTN_CUDA_FORWARD_Q];
  args.k = a[ATTN_CUDA_FORWARD_K];
  args.v = a[ATTN_CUDA_FORWARD_V];
  args.o = a[ATTN_CUDA_FORWARD_O];
  args.rowMax = a[ATTN_CUDA_FORWARD_ROW_MAX];
  args.rowSum = a[ATTN_CUDA_FORWARD_ROW_SUM];
  return args;
}

GPUKernelBuilder::KernelArgs GPUKernelBuilder::dqArgs() {
  ArrayRef<Value> a = arguments;
  readProblem(a[ATTN_CUDA_DQ_PARAMS], a[ATTN_CUDA_DQ_KEY_LENGTHS], a[ATTN_CUDA_DQ_NQ],
              a[ATTN_CUDA_DQ_NK], a[ATTN_CUDA_DQ_CAUSAL]);
  KernelArgs args;
  args.q = a[ATTN_CUDA_DQ_Q];
  args.k = a[ATTN_CUDA_DQ_K];
  args.v = a[ATTN_CUDA_DQ_V];
  args.dOut = a[ATTN_CUDA_DQ_DOUT];
  args.rowMax = a[ATTN_CUDA_DQ_ROW_MAX];
  args.rowSum = a[ATTN_CUDA_DQ_ROW_SUM];
  args.delta = a[ATTN_CUDA_DQ_DELTA];
  args.dq = a[ATTN_CUDA_DQ_DQ];
  return args;
}

GPUKernelBuilder::KernelArgs GPUKernelBuilder::dkdvArgs() {
  ArrayRef<Value> a = arguments;
  readProblem(a[ATTN_CUDA_DKDV_PARAMS], a[ATTN_CUDA_DKDV_KEY_LENGTHS], a[ATTN_CUDA_DKDV_NQ],
              a[ATTN_CUDA_DKDV_NK], a[ATTN_CUDA_DKDV_CAUSAL]);
  KernelArgs args;
  args.q = a[ATTN_CUDA_DKDV_Q];
  args.k = a[ATTN_CUDA_DKDV_K];
  args.v = a[ATTN_CUDA_DKDV_V];
  args.dOut = a[ATTN_CUDA_DKDV_DOUT];
  args.rowMax = a[ATTN_CUDA_DKDV_ROW_MAX];
  args.rowSum = a[ATTN_CUDA_DKDV_ROW_SUM];
  args.delta = a[ATTN_CUDA_DKDV_DELTA];
  args.dk = a[ATTN_CUDA_DKDV_DK];
  args.dv = a[ATTN_CUDA_DKDV_DV];
  args.dParams = a[ATTN_CUDA_DKDV_DPARAMS];
  return args;
}

GPUKernelBuilder::BlockRow GPUKernelBuilder::blockRow(Value unclamped, Value rows) {
  BlockRow row;
  row.valid = less(unclamped, rows);
  row.index = minIndex(unclamped, arith::SubIOp::create(b, rows, index(1)));
  row.base = rowOffset(rows, row.index, headDim);
  return row;
}

SmallVector<GPUKernelBuilder::BlockRow, 2> GPUKernelBuilder::fragmentRows(Value rows) {
  Value warpFirst = addIndex(tileBase, mulIndex(warp, index(16)));
  SmallVector<BlockRow, 2> fragment;
  for (int64_t half = 0; half < 2; ++half)
    fragment.push_back(blockRow(addIndex(warpFirst, addIndex(group, index(8 * half))), rows));
  return fragment;
}

void GPUKernelBuilder::stageRows(Value tile, Value source, Value rows, Value first, Value limit,
                                 function_ref<Value(Value)> transform) {
  auto tileType = cast<MemRefType>(tile.getType());
  Type element = tileType.getElementType();
  buildLoop(
      b, thread, index(tileType.getDimSize(0) * headDim), {},
      [&](Value e, ValueRange) -> SmallVector<Value> {
        Value r = arith::DivUIOp::create(b, e, index(headDim));
        Value c = arith::RemUIOp::create(b, e, index(headDim));
        Value row = addIndex(first, r);
        Value valid = less(row, limit);
        Value x =
            loadStored(source, addIndex(rowOffset(rows, select(valid, row, first), headDim), c));
        Value staged = select(valid, transform(x), constant(0.0));
        if (element != f32)
          staged = arith::TruncFOp::create(b, element, staged);
        memref::StoreOp::create(b, staged, tile, ValueRange{r, c});
        return {};
      },
      index(blockThreads));
}

/// Fails unless the kernel's score is one the GPU lowering implements: a dot or
/// scaled_dot contraction without learnable weights or row inputs.
static LogicalResult checkContractSupported(KernelOp kernel, StringRef lowering) {
  ScoreOp score = kernel.getScoreOp();
  if (!score)
    return success();
  ContractKind contract = score.getContract();
  if (contract != ContractKind::Dot && contract != ContractKind::ScaledDot)
    return kernel.emitOpError() << "uses contract " << stringifyContractKind(contract) << " (score "
                                << kernel.getScoreAttr() << "), which the " << lowering
                                << " lowering does not support yet; supported: dot, scaled_dot";
  if (score.getNumWeights() != 0)
    return kernel.emitOpError() << "has a score with learnable weights (score "
                                << kernel.getScoreAttr() << "), which the " << lowering
                                << " lowering does not support yet";
  if (score.getNumRowInputs() != 0)
    return kernel.emitOpError() << "has a score with row inputs (score " << kernel.getScoreAttr()
                                << "), which the " << lowering << " lowering does not support yet";
  return success();
}

std::optional<int> mlir::attn::cudaChipVersion(StringRef chip) {
  int version;
  if (!chip.consume_front("sm_"))
    return std::nullopt;
  // Architecture-specific variants (sm_90a, sm_100f) share the number's rules.
  chip = chip.rtrim("abcdefghijklmnopqrstuvwxyz");
  if (chip.getAsInteger(10, version))
    return std::nullopt;
  return version;
}

LogicalResult mlir::attn::checkGpuSchedule(KernelOp kernel, GpuScheduleAttr schedule) {
  Type type = schedule.getType();
  if (!type.isF32() && !type.isF16() && !type.isBF16())
    return kernel.emitOpError() << "has a GPU schedule for " << type
                                << "; CUDA kernels exist for f16, bf16 and f32 storage";
  if (!llvm::is_contained(kGpuHeadDims, schedule.getHeadDim()))
    return kernel.emitOpError() << "head dim " << schedule.getHeadDim()
                                << " is not supported on GPU; supported: 32, 64, 128";
  if (schedule.getVariant() == GpuVariant::TensorCore && type.isF32())
    return kernel.emitOpError("has a tensor_core schedule for f32 storage; tensor cores take "
                              "f16 or bf16");
  return success();
}

LogicalResult mlir::attn::lowerKernelToGPU(KernelOp kernel, ArrayRef<std::string> chips) {
  FailureOr<Algorithm> algorithm = requireAlgorithm(kernel);
  if (failed(algorithm) || failed(checkContractSupported(kernel, "GPU")))
    return failure();
  ArrayAttr schedules = kernel.getGpuScheduleAttr();
  assert(schedules && "the kernel is scheduled (scheduledKernel)");
  for (auto schedule : schedules.getAsRange<GpuScheduleAttr>())
    if (failed(checkGpuSchedule(kernel, schedule)))
      return failure();
  MLIRContext *ctx = kernel.getContext();
  SmallVector<Attribute> targets;
  for (const std::string &chip : chips) {
    std::optional<int> version = cudaChipVersion(chip);
    if (!version || *version < 80)
      return kernel.emitOpError()
             << "CUDA target '" << chip
             << "' is not supported; expected sm_XY with XY >= 80 (sm_80, sm_90, ...)";
    targets.push_back(NVVM::NVVMTargetAttr::get(ctx, /*optLevel=*/3, "nvptx64-nvidia-cuda", chip));
  }
  ModuleOp module = kernel->getParentOfType<ModuleOp>();
  if (module.lookupSymbol(kCudaModuleName))
    return kernel.emitOpError() << "the module already holds gpu.module @" << kCudaModuleName
                                << "; an artifact holds the CUDA kernels of one kernel";
  // Every storage type computes in f32.
  FailureOr<ScalarFunctions> fns = lookupScalarFunctions(kernel, Float32Type::get(ctx));
  if (failed(fns))
    return failure();
  bool online = *algorithm == Algorithm::Online;

  ImplicitLocOpBuilder b(kernel.getLoc(), ctx);
  b.setInsertionPointToEnd(module.getBody());
  auto gpuModule = gpu::GPUModuleOp::create(
      b, kCudaModuleName, targets.empty() ? ArrayAttr() : b.getArrayAttr(targets));
  for (auto schedule : schedules.getAsRange<GpuScheduleAttr>()) {
    GPUKernelBuilder builder(kernel, *fns, online, cast<FloatType>(schedule.getType()),
                             schedule.getHeadDim(), b);
    bool tensorCores = schedule.getVariant() == GpuVariant::TensorCore;
    for (void (GPUKernelBuilder::*build)() :
         {tensorCores ? &GPUKernelBuilder::buildTensorCoreForward : &GPUKernelBuilder::buildForward,
          &GPUKernelBuilder::buildBackwardPrep,
          tensorCores ? &GPUKernelBuilder::buildTensorCoreBackwardDkDv
                      : &GPUKernelBuilder::buildBackwardDkDv,
          tensorCores ? &GPUKernelBuilder::buildTensorCoreBackwardDq
                      : &GPUKernelBuilder::buildBackwardDq}) {
      b.setInsertionPointToEnd(gpuModule.getBody());
      (builder.*build)();
    }
  }
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
  return success();
}
