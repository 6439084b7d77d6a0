//===- ScalarOps.h - the scalar builders of the CPU code generators -*- C++ -*-===//
//
// Internal to lib/Codegen/CPU: constants, memref loads and stores, float
// arithmetic (with the generator's fast-math flags) and scf loops on one float
// type, shared by CPUKernelBuilder and the linear form.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_CODEGEN_CPU_SCALAROPS_H
#define ATTN_LIB_CODEGEN_CPU_SCALAROPS_H

#include "lib/Codegen/LoopBuilders.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir::attn::cpu {

class ScalarOps {
protected:
  ScalarOps(ImplicitLocOpBuilder &b, FloatType type,
            arith::FastMathFlags flags = arith::FastMathFlags::none)
      : b(b), type(type), flags(flags) {}

  Value constant(double value) {
    return arith::ConstantOp::create(b, type, b.getFloatAttr(type, value));
  }
  Value index(int64_t value) { return arith::ConstantIndexOp::create(b, value); }
  Value load(Value memref, ValueRange indices) {
    return memref::LoadOp::create(b, memref, indices);
  }
  void store(Value value, Value memref, ValueRange indices) {
    memref::StoreOp::create(b, value, memref, indices);
  }
  /// memref[indices] += delta.
  void accumulate(Value memref, ValueRange indices, Value delta) {
    store(add(load(memref, indices), delta), memref, indices);
  }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, x, y, flags); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, x, y, flags); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, x, y, flags); }
  Value dim(Value memref, int64_t d) { return memref::DimOp::create(b, memref, d); }
  Value indexToFloat(Value i) {
    return arith::UIToFPOp::create(b, type, arith::IndexCastOp::create(b, b.getI64Type(), i));
  }
  ValueRange loop(Value lb, Value ub, ValueRange inits,
                  function_ref<SmallVector<Value>(Value, ValueRange)> body, Value step = {}) {
    return buildLoop(b, lb, ub, inits, body, step);
  }

  ImplicitLocOpBuilder &b;
  FloatType type;
  arith::FastMathFlags flags;
};

} // namespace mlir::attn::cpu

#endif
