//===- AttnOps.h - attn dialect ops ------------------------------*- C++ -*-===//
#ifndef ATTN_DIALECT_ATTNOPS_H
#define ATTN_DIALECT_ATTNOPS_H

#include "dialect/AttnDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialect/AttnEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/AttnAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialect/AttnOps.h.inc"

#endif
