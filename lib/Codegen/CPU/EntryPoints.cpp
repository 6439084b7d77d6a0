//===- EntryPoints.cpp - CPU entry points and their dispatch --------------===//
//
// One call handles one (batch, head) slice. Every entry point of the ABI
// (runtime/include/attn/abi.h) is a dispatch: to a register-blocked tiled
// specialisation when the head dim has one and the rows are contiguous, else to
// the generic loops; kernelised kernels run the linear-time form instead, and
// scores that transform rows (cosine, bilinear, additive, projections) wrap
// either in a row transform.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/CPU/CPUKernelBuilder.h"
#include "lib/Codegen/CPU/CPULowering.h"
#include "lib/Codegen/CPU/LinearAttention.h"

#include "lib/Analysis/KernelSignature.h"
#include "lib/Analysis/KernelSplits.h"
#include "lib/Analysis/NormalizerAnalysis.h"
#include "lib/Analysis/Schedules.h"

#include "attn/abi.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

CPUKernelBuilder::CPUKernelBuilder(KernelOp kernel, Algorithm algorithm, FloatType type,
                                   CpuVariant fallback, ArrayRef<CpuScheduleAttr> tiles,
                                   ImplicitLocOpBuilder &b)
    : ScalarOps(b, type), kernel(kernel), normalizer(kernel.getNormalizerOp()),
      score(kernel.getScoreOp()), fallback(fallback), tiles(tiles),
      online(algorithm == Algorithm::Online), scan(algorithm == Algorithm::Scan),
      implicit(algorithm == Algorithm::Implicit) {
  MLIRContext *ctx = kernel.getContext();
  int64_t dyn = ShapedType::kDynamic;
  matrixType = MemRefType::get({dyn, dyn}, type, StridedLayoutAttr::get(ctx, dyn, {dyn, dyn}));
  rowMajorType = MemRefType::get({dyn, dyn}, type, StridedLayoutAttr::get(ctx, dyn, {dyn, 1}));
  vectorType = MemRefType::get({dyn}, type, StridedLayoutAttr::get(ctx, dyn, {dyn}));
}

LogicalResult CPUKernelBuilder::resolveFunctions() {
  FailureOr<ScalarFunctions> scalars = lookupScalarFunctions(kernel, type);
  if (failed(scalars))
    return failure();
  fns = std::move(*scalars);
  for (CpuScheduleAttr tile : tiles) {
    if (lanewiseFunctions.count(tile.getLanes()))
      continue;
    FailureOr<ScalarFunctions> vectors = lookupScalarFunctions(kernel, type, tile.getLanes());
    if (failed(vectors))
      return failure();
    lanewiseFunctions[tile.getLanes()] = std::move(*vectors);
  }
  return success();
}

void CPUKernelBuilder::useLanes(CpuScheduleAttr tile) {
  lanes = tile.getLanes();
  laneType = VectorType::get({lanes}, type);
  lanewise = lanewiseFunctions.lookup(lanes);
}

SmallVector<Type> CPUKernelBuilder::forwardInputs(MemRefType matrix) {
  SmallVector<Type> inputs(ATTN_FORWARD_NUM_ARGS, matrix);
  for (int vector : {ATTN_FORWARD_ROW_MAX, ATTN_FORWARD_ROW_SUM, ATTN_FORWARD_ROW_COUNT,
                     ATTN_FORWARD_PARAMS})
    inputs[vector] = vectorType;
  inputs[ATTN_FORWARD_TABLES] = LLVM::LLVMPointerType::get(b.getContext());
  for (int scalar : {ATTN_FORWARD_BATCH, ATTN_FORWARD_HEAD, ATTN_FORWARD_Q_BEGIN,
                     ATTN_FORWARD_Q_END, ATTN_FORWARD_KV_BEGIN, ATTN_FORWARD_KV_LEN,
                     ATTN_FORWARD_CAUSAL, ATTN_FORWARD_PARTIAL, ATTN_FORWARD_QUERY_START,
                     ATTN_FORWARD_KEY_START})
    inputs[scalar] = b.getI64Type();
  return inputs;
}

SmallVector<Type> CPUKernelBuilder::backwardInputs(MemRefType matrix) {
  SmallVector<Type> inputs(ATTN_BACKWARD_NUM_ARGS, matrix);
  for (int vector :
       {ATTN_BACKWARD_ROW_MAX, ATTN_BACKWARD_ROW_SUM, ATTN_BACKWARD_PARAMS, ATTN_BACKWARD_DPARAMS})
    inputs[vector] = vectorType;
  for (int pointer : {ATTN_BACKWARD_TABLES, ATTN_BACKWARD_DTABLES})
    inputs[pointer] = LLVM::LLVMPointerType::get(b.getContext());
  for (int scalar :
       {ATTN_BACKWARD_BATCH, ATTN_BACKWARD_HEAD, ATTN_BACKWARD_Q_BEGIN, ATTN_BACKWARD_Q_END,
        ATTN_BACKWARD_KV_BEGIN, ATTN_BACKWARD_KV_LEN, ATTN_BACKWARD_CAUSAL,
        ATTN_BACKWARD_QUERY_START, ATTN_BACKWARD_KEY_START})
    inputs[scalar] = b.getI64Type();
  return inputs;
}

Block *CPUKernelBuilder::privateFunction(StringRef name, ArrayRef<Type> inputs) {
  auto function = func::FuncOp::create(b, name, FunctionType::get(kernel.getContext(), inputs, {}));
  function.setPrivate();
  return function.addEntryBlock();
}

Block *CPUKernelBuilder::entryPoint(StringRef name, ArrayRef<Type> inputs, EntryRole role) {
  MLIRContext *ctx = kernel.getContext();
  auto function = func::FuncOp::create(b, name, FunctionType::get(ctx, inputs, {}));
  function->setAttr("llvm.emit_c_interface", UnitAttr::get(ctx));
  function->setAttr(AttnDialect::kEntryAttrName,
                    EntryAttr::get(ctx, role, type, FlatSymbolRefAttr::get(kernel.getSymNameAttr())));
  return function.addEntryBlock();
}

ForwardArgs CPUKernelBuilder::beginForward(StringRef name, MemRefType matrix, bool lanewiseMath) {
  Block *entry = privateFunction(name, forwardInputs(matrix));
  b.setInsertionPointToStart(entry);
  ForwardArgs args = forwardArguments(b, entry->getArguments());
  loadTables(args.tables);
  prologue(args.q, args.k, args.params, args.batch, args.head, args.kvLen, args.causal,
           args.queryStart, args.keyStart, lanewiseMath);
  return args;
}

BackwardArgs CPUKernelBuilder::beginBackward(StringRef name, MemRefType matrix, bool lanewiseMath) {
  Block *entry = privateFunction(name, backwardInputs(matrix));
  b.setInsertionPointToStart(entry);
  BackwardArgs args = backwardArguments(b, entry->getArguments());
  loadTables(args.tables);
  loadTableGrads(args.dTables);
  prologue(args.q, args.k, args.params, args.batch, args.head, args.kvLen, args.causal,
           args.queryStart, args.keyStart, lanewiseMath);
  return args;
}

void CPUKernelBuilder::finishRow(const ForwardArgs &args, Value i, const RowState &state,
                                 function_ref<void(Value)> writeOutput) {
  branch(
      args.partial, {},
      [&]() -> SmallVector<Value> {
        writeOutput(Value());
        store(state.max, args.rowMax, {i});
        store(state.sum.sum, args.rowSum, {i});
        store(state.count, args.rowCount, {i});
        return {};
      },
      [&]() -> SmallVector<Value> {
        finalizeRow(i, state, args.rowMax, args.rowSum, writeOutput);
        return {};
      });
}

void CPUKernelBuilder::finalizeRow(Value i, const RowState &state, Value rowMax, Value rowSum,
                                   function_ref<void(Value)> writeOutput) {
  RowAlgorithm rows(b, *scalarMath);
  RowAlgorithm::RowResult result = rows.finalize(state, rowAt(i));
  writeOutput(result.outputScale);
  store(rows.rowMax(result), rowMax, {i});
  store(rows.rowSum(result), rowSum, {i});
}

void CPUKernelBuilder::setUpRowMath(Value params, Value batch, Value head, Value queryStart,
                                    Value keyStart) {
  paramsBuffer = params;
  batchIndex = batch;
  headIndex = head;
  queryPosition = queryStart;
  keyPosition = keyStart;
  paramValues.clear();
  for (unsigned p = 0, e = kernelParamNames(kernel).size(); p < e; ++p)
    paramValues.push_back(load(params, {index(p)}));
  scalarMath.emplace(b, MathSetup{normalizer, online, &fns}, paramValues, tableValues);
}

void CPUKernelBuilder::prologue(Value q, Value k, Value params, Value batch, Value head,
                                Value kvLen, Value causal, Value queryStart, Value keyStart,
                                bool lanewiseMath) {
  setUpRowMath(params, batch, head, queryStart, keyStart);
  headDim = dim(q, 1);
  if (std::optional<double> fixed = fixedScoreScale(kernel))
    scale = constant(*fixed);
  else {
    Value d = arith::IndexCastOp::create(b, b.getI64Type(), headDim);
    scale = math::RsqrtOp::create(b, arith::SIToFPOp::create(b, type, d));
  }
  Value kv = arith::IndexCastOp::create(b, b.getIndexType(), kvLen);
  keys.kvEnd = arith::MinSIOp::create(b, kv, dim(k, 0));
  keys.isCausal = arith::CmpIOp::create(b, arith::CmpIPredicate::ne, causal,
                                        arith::ConstantIntOp::create(b, 0, 64));
  keys.positionShift = arith::SubIOp::create(b, queryStart, keyStart);
  laneMath.reset();
  if (lanewiseMath) {
    SmallVector<Value> paramLanes =
        llvm::map_to_vector(paramValues, [&](Value p) { return splat(p); });
    laneMath.emplace(b, MathSetup{normalizer, online, &lanewise}, paramLanes, tableValues);
  }
}

void CPUKernelBuilder::buildKernelised(StringRef name, bool forward) {
  OpBuilder::InsertionGuard guard(b);
  std::optional<ForwardArgs> forwardArgs;
  std::optional<BackwardArgs> backwardArgs;
  if (forward)
    forwardArgs = beginForward(name, matrixType, /*lanewiseMath=*/false);
  else
    backwardArgs = beginBackward(name, matrixType, /*lanewiseMath=*/false);
  // Reassociation lets LLVM vectorise the linear form's dot-product and axpy
  // loops over d and dv (and contract their multiply-adds into FMAs).
  AttentionMath linearMath(
      b,
      MathSetup{normalizer, online, &fns, CallStyle::Call,
                arith::FastMathFlags::reassoc | arith::FastMathFlags::contract},
      paramValues, tableValues);
  // A kernelised kernel's mask region, if any, is causal (KernelisedAnalysis).
  Value causal = fns.mask ? arith::ConstantIntOp::create(b, 1, 1).getResult() : keys.isCausal;
  LinearForm form{type, linearMath, scale, keys.kvEnd, causal};
  if (forward)
    buildLinearForward(b, form, *forwardArgs);
  else
    buildLinearBackward(b, form, *backwardArgs);
  func::ReturnOp::create(b);
}

void CPUKernelBuilder::buildForwardEntry() {
  std::string entryName = ATTN_FORWARD_SYMBOL_PREFIX + elementTypeName(type);
  bool transformed = transformsRows(/*querySide=*/true);
  std::string kernelName = transformed ? entryName + ".inner" : entryName;
  if (fallback == CpuVariant::Linear)
    buildKernelised(kernelName + ".generic", /*forward=*/true);
  else if (scan)
    buildScanForward(kernelName + ".generic");
  else if (implicit)
    buildThresholdForward(kernelName + ".generic");
  else
    buildForward(kernelName + ".generic");
  for (CpuScheduleAttr tile : tiles)
    buildTiledForward(tiledName(kernelName, tile), tile);
  buildDispatch(kernelName, forwardInputs(matrixType), /*isPublic=*/!transformed,
                /*forward=*/true);
  if (transformed)
    buildTransformedForward(entryName);
}

void CPUKernelBuilder::buildBackwardEntry() {
  std::string entryName = ATTN_BACKWARD_SYMBOL_PREFIX + elementTypeName(type);
  bool transformed = transformsRows(/*querySide=*/true);
  std::string kernelName = transformed ? entryName + ".inner" : entryName;
  if (fallback == CpuVariant::Linear)
    buildKernelised(kernelName + ".generic", /*forward=*/false);
  else if (scan)
    buildScanBackward(kernelName + ".generic");
  else if (implicit)
    buildThresholdBackward(kernelName + ".generic");
  else
    buildBackward(kernelName + ".generic");
  for (CpuScheduleAttr tile : tiles)
    if (tile.getVariant() == CpuVariant::Tiled)
      buildTiledBackward(tiledName(kernelName, tile), tile);
  buildDispatch(kernelName, backwardInputs(matrixType), /*isPublic=*/!transformed,
                /*forward=*/false);
  if (transformed)
    buildTransformedBackward(entryName);
}

void CPUKernelBuilder::buildMergeEntry() {
  SmallVector<Type> inputs(ATTN_MERGE_NUM_ARGS, vectorType);
  for (int matrix : {ATTN_MERGE_O_PARTS, ATTN_MERGE_O})
    inputs[matrix] = matrixType;
  inputs[ATTN_MERGE_TABLES] = LLVM::LLVMPointerType::get(b.getContext());
  for (int scalar : {ATTN_MERGE_BATCH, ATTN_MERGE_HEAD, ATTN_MERGE_Q_BEGIN, ATTN_MERGE_Q_END,
                     ATTN_MERGE_QUERY_START})
    inputs[scalar] = b.getI64Type();
  Block *entry = entryPoint(ATTN_MERGE_SYMBOL_PREFIX + elementTypeName(type), inputs, EntryRole::Merge);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  ValueRange args = entry->getArguments();
  auto toIndex = [&](int position) {
    return arith::IndexCastOp::create(b, b.getIndexType(), args[position]).getResult();
  };
  Value oParts = args[ATTN_MERGE_O_PARTS], o = args[ATTN_MERGE_O];
  loadTables(args[ATTN_MERGE_TABLES]);
  // The merge reads rows only: no key position.
  setUpRowMath(args[ATTN_MERGE_PARAMS], toIndex(ATTN_MERGE_BATCH), toIndex(ATTN_MERGE_HEAD),
               toIndex(ATTN_MERGE_QUERY_START), Value());

  if (scan) {
    mergeScanRows(toIndex(ATTN_MERGE_Q_BEGIN), toIndex(ATTN_MERGE_Q_END), oParts,
                  args[ATTN_MERGE_MAX_PARTS], o, args[ATTN_MERGE_ROW_MAX], args[ATTN_MERGE_ROW_SUM]);
    func::ReturnOp::create(b);
    return;
  }
  Value queries = dim(o, 0), valueDim = dim(o, 1);
  Value splits = arith::DivUIOp::create(b, dim(oParts, 0), queries);
  // Partial states carry no error term (abi.h: row_max, row_sum, row_count).
  RowAlgorithm rows(b, *scalarMath, RowStateLayout(type, /*compensated=*/false, type));
  loop(toIndex(ATTN_MERGE_Q_BEGIN), toIndex(ATTN_MERGE_Q_END), {},
       [&](Value i, ValueRange) -> SmallVector<Value> {
         zeroRow(o, i, valueDim);
         // The splits' partial states combined in split order, O in place.
         ValueRange row = loop(
             index(0), splits, rows.stateLayout().pack(rows.initial(rowAt(i))),
             [&](Value split, ValueRange acc) -> SmallVector<Value> {
               Value at = arith::AddIOp::create(b, arith::MulIOp::create(b, split, queries), i);
               RowState part{load(args[ATTN_MERGE_MAX_PARTS], {at}),
                             {load(args[ATTN_MERGE_SUM_PARTS], {at}), Value()},
                             load(args[ATTN_MERGE_COUNT_PARTS], {at})};
               RowAlgorithm::Combined step = rows.combine(rows.stateLayout().unpack(acc), part);
               loop(index(0), valueDim, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
                 store(rows.combineOutput(step, load(o, {i, c}), load(oParts, {at, c})), o, {i, c});
                 return {};
               });
               return rows.stateLayout().pack(step.state);
             });
         finalizeRow(i, rows.stateLayout().unpack(row), args[ATTN_MERGE_ROW_MAX],
                     args[ATTN_MERGE_ROW_SUM], [&](Value outputScale) {
                       loop(index(0), valueDim, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
                         store(mul(load(o, {i, c}), outputScale), o, {i, c});
                         return {};
                       });
                     });
         return {};
       });
  func::ReturnOp::create(b);
}

std::string CPUKernelBuilder::tiledName(StringRef entryName, CpuScheduleAttr tile) {
  return (entryName + ".d" + Twine(tile.getHeadDim()) +
          (tile.getVariant() == CpuVariant::Decode ? ".decode" : ""))
      .str();
}

void CPUKernelBuilder::buildDispatch(StringRef entryName, ArrayRef<Type> inputs, bool isPublic,
                                     bool forward) {
  Block *entry = isPublic ? entryPoint(entryName, inputs,
                                       forward ? EntryRole::Forward : EntryRole::Backward)
                          : privateFunction(entryName, inputs);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  SmallVector<Value> args(entry->getArguments());
  static_assert(int(ATTN_FORWARD_Q) == int(ATTN_BACKWARD_Q) &&
                    int(ATTN_FORWARD_V) == int(ATTN_BACKWARD_V),
                "the dispatch reads q and v at the same positions in both directions");
  Value headDim = dim(args[ATTN_FORWARD_Q], 1), valueDim = dim(args[ATTN_FORWARD_V], 1);
  Value eligible = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, headDim, valueDim);
  SmallVector<unsigned> matrices;
  for (auto [position, type] : llvm::enumerate(inputs)) {
    if (type != matrixType)
      continue;
    matrices.push_back(position);
    Value unit =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, innerStride(args[position]), index(1));
    eligible = arith::AndIOp::create(b, eligible, unit);
  }

  SmallVector<CpuScheduleAttr> tiled;
  for (CpuScheduleAttr tile : tiles)
    if (tile.getVariant() == CpuVariant::Tiled)
      tiled.push_back(tile);
  // The forward's decode schedule of a head dim, if any (checkCpuSchedules: at
  // most one, beside a tiled one), takes calls of at most its `rows` rows.
  auto decodeFor = [&](int64_t tileDim) -> CpuScheduleAttr {
    if (forward)
      for (CpuScheduleAttr tile : tiles)
        if (tile.getVariant() == CpuVariant::Decode && tile.getHeadDim() == tileDim)
          return tile;
    return {};
  };
  std::function<void(unsigned)> emitCase = [&](unsigned next) {
    if (next == tiled.size()) {
      func::CallOp::create(b, (entryName + ".generic").str(), TypeRange{}, args);
      return;
    }
    int64_t tileDim = tiled[next].getHeadDim();
    Value matches = arith::AndIOp::create(
        b, eligible, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, headDim, index(tileDim)));
    auto ifOp = scf::IfOp::create(b, matches, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard caseGuard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    SmallVector<Value> operands(args);
    for (unsigned position : matrices)
      operands[position] = asRowMajor(args[position]);
    auto callTile = [&](CpuScheduleAttr tile) {
      func::CallOp::create(b, tiledName(entryName, tile), TypeRange{}, operands);
    };
    if (CpuScheduleAttr decode = decodeFor(tileDim)) {
      Value callRows = arith::SubIOp::create(b, args[ATTN_FORWARD_Q_END], args[ATTN_FORWARD_Q_BEGIN]);
      Value fewRows = arith::CmpIOp::create(
          b, arith::CmpIPredicate::sle, callRows,
          arith::ConstantIntOp::create(b, decode.getRows(), 64));
      auto ifFew = scf::IfOp::create(b, fewRows, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard rowsGuard(b);
      b.setInsertionPoint(ifFew.thenBlock()->getTerminator());
      callTile(decode);
      b.setInsertionPoint(ifFew.elseBlock()->getTerminator());
      callTile(tiled[next]);
    } else {
      callTile(tiled[next]);
    }
    b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    emitCase(next + 1);
  };
  emitCase(0);
  func::ReturnOp::create(b);
}

Value CPUKernelBuilder::asRowMajor(Value matrix) {
  auto metadata = memref::ExtractStridedMetadataOp::create(b, matrix);
  OpFoldResult unit = b.getIndexAttr(1);
  return memref::ReinterpretCastOp::create(
      b, rowMajorType, metadata.getBaseBuffer(), OpFoldResult(metadata.getOffset()),
      ArrayRef<OpFoldResult>{metadata.getSizes()[0], metadata.getSizes()[1]},
      ArrayRef<OpFoldResult>{metadata.getStrides()[0], unit});
}

/// Checks the kernel's #attn.cpu_schedule entries against what the CPU lowering
/// builds: f32/f64, one generic or linear schedule per type (linear only for a
/// kernelised kernel), at most one tiled schedule per head dim, and at most one
/// decode schedule per head dim, beside a tiled one, for a dot-product score.
static LogicalResult checkCpuSchedules(KernelOp kernel, Algorithm algorithm) {
  ArrayAttr schedules = kernel.getCpuScheduleAttr();
  assert(schedules && "the kernel is scheduled (scheduledKernel)");
  for (auto schedule : schedules.getAsRange<CpuScheduleAttr>()) {
    Type type = schedule.getType();
    if (!type.isF32() && !type.isF64())
      return kernel.emitOpError() << "has a CPU schedule for " << type
                                  << "; CPU entry points exist for f32 and f64";
    if (algorithm == Algorithm::Scan && schedule.getVariant() != CpuVariant::Generic)
      return kernel.emitOpError() << "has a " << stringifyCpuVariant(schedule.getVariant())
                                  << " schedule but a scan normalizer; a scan runs in the "
                                     "generic loops only";
    if (schedule.getVariant() == CpuVariant::Linear && algorithm != Algorithm::Kernelised)
      return kernel.emitOpError() << "has a linear schedule but its algorithm is "
                                  << stringifyAlgorithm(algorithm)
                                  << "; the linear form needs a kernelised kernel";
    if (schedule.getLanes() > 0 && algorithm == Algorithm::Implicit)
      return kernel.emitOpError() << "has a " << stringifyCpuVariant(schedule.getVariant())
                                  << " schedule but its algorithm is implicit; an implicit "
                                     "normalizer runs the generic schedule only";
    const bool decode = schedule.getVariant() == CpuVariant::Decode;
    if (decode && kernel.getScoreOp() &&
        kernel.getScoreOp().getContract() == ContractKind::Additive)
      return kernel.emitOpError() << "has a decode schedule for head dim "
                                  << schedule.getHeadDim()
                                  << " but an additive score; the decode schedule reads "
                                     "dot-product scores only";
    // One generic or linear schedule per type, one tiled (and one decode)
    // schedule per head dim.
    unsigned fallbacks = 0;
    bool tiledBeside = false;
    for (auto other : schedules.getAsRange<CpuScheduleAttr>()) {
      if (other.getType() != type)
        continue;
      bool sameDim = other.getHeadDim() == schedule.getHeadDim();
      if (other.getVariant() == schedule.getVariant() && other != schedule && sameDim &&
          (decode || schedule.getVariant() == CpuVariant::Tiled))
        return kernel.emitOpError() << "has two " << stringifyCpuVariant(schedule.getVariant())
                                    << " schedules for head dim " << schedule.getHeadDim()
                                    << " at " << type;
      tiledBeside |= other.getVariant() == CpuVariant::Tiled && sameDim;
      fallbacks += other.getVariant() == CpuVariant::Generic ||
                   other.getVariant() == CpuVariant::Linear;
    }
    if (decode && !tiledBeside)
      return kernel.emitOpError() << "has a decode schedule for head dim "
                                  << schedule.getHeadDim() << " at " << type
                                  << " but no tiled schedule for it; calls of more rows and "
                                     "the backward need one";
    if (fallbacks != 1)
      return kernel.emitOpError() << "needs one generic or linear schedule for " << type
                                  << " (for any head dim and stride), has " << fallbacks;
  }
  return success();
}

LogicalResult mlir::attn::lowerKernelToLoops(KernelOp kernel) {
  FailureOr<Algorithm> algorithm = requireAlgorithm(kernel);
  if (failed(algorithm) || failed(checkCpuSchedules(kernel, *algorithm)))
    return failure();
  ModuleOp module = kernel->getParentOfType<ModuleOp>();
  ImplicitLocOpBuilder b(kernel.getLoc(), module.getContext());
  for (FloatType type : cpuEntryTypes(kernel)) {
    CpuVariant fallback = CpuVariant::Generic;
    SmallVector<CpuScheduleAttr> tiles;
    for (auto schedule : kernel.getCpuScheduleAttr().getAsRange<CpuScheduleAttr>()) {
      if (schedule.getType() != type)
        continue;
      if (schedule.getLanes() > 0) // tiled and decode
        tiles.push_back(schedule);
      else
        fallback = schedule.getVariant();
    }
    CPUKernelBuilder builder(kernel, *algorithm, type, fallback, tiles, b);
    if (failed(builder.resolveFunctions()))
      return failure();
    b.setInsertionPointToEnd(module.getBody());
    builder.buildForwardEntry();
    // The forward's key chunks, which the manifest's splits promise, need a merge.
    if (kernelSplits(kernel, *algorithm).hasMerge())
      builder.buildMergeEntry();
    builder.buildBackwardEntry();
  }
  lowerTableAccesses(module);
  return success();
}
