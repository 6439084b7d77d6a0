//===- AttnDialect.cpp - the attn dialect ---------------------------------===//
#include "dialect/AttnDialect.h"
#include "dialect/AttnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::attn;

#include "dialect/AttnDialect.cpp.inc"
#include "dialect/AttnEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "dialect/AttnAttrs.cpp.inc"

void AttnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/AttnOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/AttnAttrs.cpp.inc"
      >();
}

LogicalResult AttnDialect::verifyOperationAttribute(Operation *op, NamedAttribute attribute) {
  if (attribute.getName() != kEntryAttrName)
    return op->emitError() << "unknown attn attribute '" << attribute.getName()
                           << "' on an operation (expected '" << kEntryAttrName << "')";
  auto entry = dyn_cast<EntryAttr>(attribute.getValue());
  if (!entry)
    return op->emitError() << "'" << kEntryAttrName << "' must be an #attn.entry, got "
                           << attribute.getValue();
  // The C interface lowering copies the attribute onto the llvm.func it makes; the
  // checks below are for the func.func that attn-lower-to-loops generated.
  if (isa<LLVM::LLVMFuncOp>(op))
    return success();
  auto function = dyn_cast<func::FuncOp>(op);
  if (!function)
    return op->emitError() << "'" << kEntryAttrName << "' belongs on a func.func, found on "
                           << op->getName();
  auto memref = function.getNumArguments()
                    ? dyn_cast<MemRefType>(function.getArgumentTypes().front())
                    : MemRefType();
  if (!memref || memref.getElementType() != entry.getType())
    return op->emitError() << "a " << stringifyEntryRole(entry.getRole()) << " entry point on "
                           << entry.getType() << " must take a memref of " << entry.getType()
                           << " first (abi.h), got "
                           << (function.getNumArguments() ? function.getArgumentTypes().front()
                                                          : Type());
  // Once attn-erase-declarations has run the kernel is gone; until
  // then it must be one of the module's.
  auto module = op->getParentOfType<ModuleOp>();
  if (module && !module.getOps<KernelOp>().empty() &&
      !module.lookupSymbol<KernelOp>(entry.getKernel()))
    return op->emitError() << "'" << kEntryAttrName << "' names " << entry.getKernel()
                           << ", which is not an attn.kernel of the module";
  return success();
}
