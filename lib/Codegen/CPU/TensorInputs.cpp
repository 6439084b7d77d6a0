//===- TensorInputs.cpp - tensor inputs of the CPU entry points -----------===//
//
// The entry points receive their tensor inputs as an array of attn_table
// descriptors (runtime/include/attn/abi.h): each becomes a strided memref of
// the input's rank (tableType) that the scalar functions read through
// attn.table_load; a learnable input's gradient buffer becomes a flat memref
// the backward adds to. The table ops are expanded here after the entry points
// exist: indices clamped to [0, extent), one load per lane on vectors.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/CPU/CPUKernelBuilder.h"
#include "lib/Codegen/CPU/CPULowering.h"

#include "lib/Analysis/KernelSignature.h"

#include "attn/abi.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

/// The LLVM struct of an attn_table: data pointer, sizes, strides.
static LLVM::LLVMStructType attnTableType(MLIRContext *ctx) {
  auto array = LLVM::LLVMArrayType::get(IntegerType::get(ctx, 64), ATTN_MAX_TABLE_RANK);
  return LLVM::LLVMStructType::getLiteral(ctx, {LLVM::LLVMPointerType::get(ctx), array, array});
}

/// Descriptor `index` of the attn_table array at `pointer`, as a memref of
/// `type` (rank r, strided) over its data: the memref descriptor
/// {data, data, 0, sizes[0..r), strides[0..r)} cast to the memref, which the
/// LLVM lowering folds back to that struct. `flat`: one dimension of Π sizes
/// elements, stride 1 (a contiguous gradient buffer of the input's `rank`).
static Value tableMemRef(ImplicitLocOpBuilder &b, Value pointer, unsigned index, MemRefType type,
                         int64_t rank, bool flat) {
  MLIRContext *ctx = b.getContext();
  auto ptrType = LLVM::LLVMPointerType::get(ctx);
  Type i64 = b.getI64Type();
  LLVM::LLVMStructType table = attnTableType(ctx);
  Value at = LLVM::GEPOp::create(b, ptrType, table, pointer,
                                 ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(index)});
  Value descriptor = LLVM::LoadOp::create(b, table, at);
  Value data = LLVM::ExtractValueOp::create(b, descriptor, ArrayRef<int64_t>{0});
  auto dims = LLVM::LLVMArrayType::get(i64, type.getRank());
  auto memrefType = LLVM::LLVMStructType::getLiteral(ctx, {ptrType, ptrType, i64, dims, dims});
  Value memref = LLVM::PoisonOp::create(b, memrefType);
  auto insert = [&](Value value, ArrayRef<int64_t> position) {
    memref = LLVM::InsertValueOp::create(b, memref, value, position);
  };
  auto constant = [&](int64_t value) {
    return LLVM::ConstantOp::create(b, i64, b.getI64IntegerAttr(value)).getResult();
  };
  insert(data, {0});
  insert(data, {1});
  insert(constant(0), {2});
  if (flat) {
    Value elements = constant(1);
    for (int64_t d = 0; d < rank; ++d)
      elements = LLVM::MulOp::create(
          b, elements, LLVM::ExtractValueOp::create(b, descriptor, ArrayRef<int64_t>{1, d}));
    insert(elements, {3, 0});
    insert(constant(1), {4, 0});
  } else {
    for (int64_t d = 0; d < rank; ++d) {
      insert(LLVM::ExtractValueOp::create(b, descriptor, ArrayRef<int64_t>{1, d}), {3, d});
      insert(LLVM::ExtractValueOp::create(b, descriptor, ArrayRef<int64_t>{2, d}), {4, d});
    }
  }
  return UnrealizedConversionCastOp::create(b, type, memref).getResult(0);
}

void CPUKernelBuilder::loadTables(Value pointer) {
  tableValues.clear();
  for (auto [t, input] : llvm::enumerate(kernelInputs(kernel)))
    tableValues.push_back(
        tableMemRef(b, pointer, t, tableType(input, type), input.getRank(), /*flat=*/false));
}

void CPUKernelBuilder::loadTableGrads(Value pointer) {
  tableGradValues.clear();
  int64_t dynamic = ShapedType::kDynamic;
  auto flatType = MemRefType::get({dynamic}, type,
                                  StridedLayoutAttr::get(b.getContext(), dynamic, {dynamic}));
  for (auto [t, input] : llvm::enumerate(kernelInputs(kernel)))
    tableGradValues.push_back(input.getLearnable() ? tableMemRef(b, pointer, t, flatType,
                                                                 input.getRank(), /*flat=*/true)
                                                   : Value());
}

void CPUKernelBuilder::scatterTableGrad(unsigned input, Value position, Value value) {
  Value grad = tableGradValues[input];
  auto lanesType = dyn_cast<VectorType>(value.getType());
  if (!lanesType) {
    accumulate(grad, {position}, value);
    return;
  }
  // Lanes may read the same element: one read-modify-write per lane, in order.
  for (int64_t lane = 0; lane < lanesType.getNumElements(); ++lane)
    accumulate(grad, {vector::ExtractOp::create(b, position, ArrayRef<int64_t>{lane})},
               vector::ExtractOp::create(b, value, ArrayRef<int64_t>{lane}));
}

/// The table op `op` (attn.table_load or attn.table_position) on scalar indices
/// `indices`: each clamped to [0, extent), then the element or its row-major
/// position.
static Value scalarTableAccess(ImplicitLocOpBuilder &b, Operation *op, Value table,
                               ValueRange indices) {
  Value zero = arith::ConstantIndexOp::create(b, 0), one = arith::ConstantIndexOp::create(b, 1);
  SmallVector<Value> clamped;
  Value position = zero;
  for (auto [d, index] : llvm::enumerate(indices)) {
    Value extent = memref::DimOp::create(b, table, d);
    Value last = arith::SubIOp::create(b, extent, one);
    clamped.push_back(
        arith::MaxSIOp::create(b, arith::MinSIOp::create(b, index, last), zero).getResult());
    position = arith::AddIOp::create(b, arith::MulIOp::create(b, position, extent), clamped.back());
  }
  if (isa<TablePositionOp>(op))
    return position;
  return memref::LoadOp::create(b, table, clamped);
}

void mlir::attn::lowerTableAccesses(ModuleOp module) {
  SmallVector<Operation *> accesses;
  module.walk([&](Operation *op) {
    if (isa<TableLoadOp, TablePositionOp>(op))
      accesses.push_back(op);
  });
  for (Operation *op : accesses) {
    ImplicitLocOpBuilder b(op->getLoc(), op);
    Value table = op->getOperand(0);
    ValueRange indices = op->getOperands().drop_front();
    Type resultType = op->getResult(0).getType();
    Value result;
    if (auto lanes = dyn_cast<VectorType>(resultType)) {
      SmallVector<Value> elements;
      for (int64_t lane = 0; lane < lanes.getNumElements(); ++lane) {
        SmallVector<Value> at = llvm::map_to_vector(indices, [&](Value index) -> Value {
          return vector::ExtractOp::create(b, index, ArrayRef<int64_t>{lane});
        });
        elements.push_back(scalarTableAccess(b, op, table, at));
      }
      result = vector::FromElementsOp::create(b, lanes, elements);
    } else {
      result = scalarTableAccess(b, op, table, indices);
    }
    op->getResult(0).replaceAllUsesWith(result);
    op->erase();
  }
}
