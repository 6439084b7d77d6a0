//===- LoopBuilders.h - scf loops and branches from C++ lambdas ---*- C++ -*-===//
//
// The loop lowerings build their loops through these two helpers: the body
// lambdas use the same ImplicitLocOpBuilder, moved into the new block.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_CODEGEN_LOOPBUILDERS_H
#define ATTN_LIB_CODEGEN_LOOPBUILDERS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::attn {

/// scf.for over [lb, ub) by `step` (1 when null) carrying `inits`; `body`
/// returns the next values.
inline ValueRange buildLoop(ImplicitLocOpBuilder &b, Value lb, Value ub, ValueRange inits,
                            function_ref<SmallVector<Value>(Value, ValueRange)> body,
                            Value step = {}) {
  if (!step)
    step = arith::ConstantIndexOp::create(b, 1);
  auto forOp = scf::ForOp::create(b, lb, ub, step, inits,
                                  [&](OpBuilder &nested, Location, Value iv, ValueRange args) {
                                    OpBuilder::InsertionGuard guard(b);
                                    b.setInsertionPoint(nested.getInsertionBlock(),
                                                        nested.getInsertionPoint());
                                    scf::YieldOp::create(b, body(iv, args));
                                  });
  return forOp.getResults();
}

/// scf.if yielding `types`; each branch returns its values.
inline ValueRange buildBranch(ImplicitLocOpBuilder &b, Value cond, TypeRange types,
                              function_ref<SmallVector<Value>()> thenBody,
                              function_ref<SmallVector<Value>()> elseBody) {
  auto ifOp = scf::IfOp::create(b, types, cond, /*addThenBlock=*/true, /*addElseBlock=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(ifOp.thenBlock());
  scf::YieldOp::create(b, thenBody());
  b.setInsertionPointToEnd(ifOp.elseBlock());
  scf::YieldOp::create(b, elseBody());
  return ifOp.getResults();
}

} // namespace mlir::attn

#endif
