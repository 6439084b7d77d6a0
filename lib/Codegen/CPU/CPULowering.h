//===- CPULowering.h - CPU forward/backward entry points ----------*- C++ -*-===//
#ifndef ATTN_LIB_CODEGEN_CPU_CPULOWERING_H
#define ATTN_LIB_CODEGEN_CPU_CPULOWERING_H

#include "dialect/AttnOps.h"

namespace mlir::attn {

/// Builds the ABI entry points (runtime/include/attn/abi.h) of `kernel`, which
/// has a cpu_schedule (attn-select-schedule), for the element types of that schedule, following
/// those schedules, from its instantiated scalar functions (attn-instantiate-functions). An
/// artifact holds one kernel.
LogicalResult lowerKernelToLoops(KernelOp kernel);

} // namespace mlir::attn

#endif
