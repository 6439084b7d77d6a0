//===- AttnDialect.h - the attn dialect -------------------------*- C++ -*-===//
#ifndef ATTN_DIALECT_ATTNDIALECT_H
#define ATTN_DIALECT_ATTNDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Dialect.h"

#include "dialect/AttnDialect.h.inc"

#endif
