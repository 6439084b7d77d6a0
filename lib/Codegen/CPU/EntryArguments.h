//===- EntryArguments.h - the CPU entry points' arguments by name -*- C++ -*-===//
//
// Internal to lib/Codegen/CPU: the arguments of the forward and backward entry
// points of runtime/include/attn/abi.h, read by their ATTN_FORWARD_* /
// ATTN_BACKWARD_* positions once, for every schedule.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_CODEGEN_CPU_ENTRYARGUMENTS_H
#define ATTN_LIB_CODEGEN_CPU_ENTRYARGUMENTS_H

#include "attn/abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::attn::cpu {

/// A forward entry's arguments; batch, head, qBegin, qEnd, kvBegin, queryStart and
/// keyStart as index, partial as i1; tables the !llvm.ptr to the attn_table descriptors.
struct ForwardArgs {
  Value q, k, v, o, rowMax, rowSum, rowCount, params, tables, batch, head, qBegin, qEnd, kvBegin,
      kvLen, causal, partial, queryStart, keyStart;
};

inline ForwardArgs forwardArguments(ImplicitLocOpBuilder &b, ValueRange args) {
  auto toIndex = [&](Value i64) {
    return arith::IndexCastOp::create(b, b.getIndexType(), i64).getResult();
  };
  return {args[ATTN_FORWARD_Q],
          args[ATTN_FORWARD_K],
          args[ATTN_FORWARD_V],
          args[ATTN_FORWARD_O],
          args[ATTN_FORWARD_ROW_MAX],
          args[ATTN_FORWARD_ROW_SUM],
          args[ATTN_FORWARD_ROW_COUNT],
          args[ATTN_FORWARD_PARAMS],
          args[ATTN_FORWARD_TABLES],
          toIndex(args[ATTN_FORWARD_BATCH]),
          toIndex(args[ATTN_FORWARD_HEAD]),
          toIndex(args[ATTN_FORWARD_Q_BEGIN]),
          toIndex(args[ATTN_FORWARD_Q_END]),
          toIndex(args[ATTN_FORWARD_KV_BEGIN]),
          args[ATTN_FORWARD_KV_LEN],
          args[ATTN_FORWARD_CAUSAL],
          arith::CmpIOp::create(b, arith::CmpIPredicate::ne, args[ATTN_FORWARD_PARTIAL],
                                arith::ConstantIntOp::create(b, 0, 64)),
          toIndex(args[ATTN_FORWARD_QUERY_START]),
          toIndex(args[ATTN_FORWARD_KEY_START])};
}

/// A backward entry's arguments; batch, head, qBegin, qEnd, kvBegin, queryStart and keyStart as
/// index; tables and dTables the !llvm.ptr to attn_table descriptors.
struct BackwardArgs {
  Value q, k, v, o, dOut, rowMax, rowSum, params, tables, dq, dk, dv, dParams, dTables, batch,
      head, qBegin, qEnd, kvBegin, kvLen, causal, queryStart, keyStart;
};

inline BackwardArgs backwardArguments(ImplicitLocOpBuilder &b, ValueRange args) {
  auto toIndex = [&](Value i64) {
    return arith::IndexCastOp::create(b, b.getIndexType(), i64).getResult();
  };
  return {args[ATTN_BACKWARD_Q],           args[ATTN_BACKWARD_K],
          args[ATTN_BACKWARD_V],           args[ATTN_BACKWARD_O],
          args[ATTN_BACKWARD_DOUT],        args[ATTN_BACKWARD_ROW_MAX],
          args[ATTN_BACKWARD_ROW_SUM],     args[ATTN_BACKWARD_PARAMS],
          args[ATTN_BACKWARD_TABLES],      args[ATTN_BACKWARD_DQ],
          args[ATTN_BACKWARD_DK],          args[ATTN_BACKWARD_DV],
          args[ATTN_BACKWARD_DPARAMS],     args[ATTN_BACKWARD_DTABLES],
          toIndex(args[ATTN_BACKWARD_BATCH]), toIndex(args[ATTN_BACKWARD_HEAD]),
          toIndex(args[ATTN_BACKWARD_Q_BEGIN]), toIndex(args[ATTN_BACKWARD_Q_END]),
          toIndex(args[ATTN_BACKWARD_KV_BEGIN]), args[ATTN_BACKWARD_KV_LEN],
          args[ATTN_BACKWARD_CAUSAL],      toIndex(args[ATTN_BACKWARD_QUERY_START]),
          toIndex(args[ATTN_BACKWARD_KEY_START])};
}

} // namespace mlir::attn::cpu

#endif
