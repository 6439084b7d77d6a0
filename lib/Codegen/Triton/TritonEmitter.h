//===- TritonEmitter.h - a kernel as a Python module of Triton kernels -*- C++ -*-===//
//
// The GPU backend (DESIGN.md §4): a classified, derived kernel printed as one
// readable Python module. Each scalar function of the kernel's #attn.functions
// (ScalarFunctions.h) becomes a @triton.jit function over Triton tensors, and
// the compiler's kernel templates call them:
//
//   attn_fwd             per (query block, b·h): FlashAttention-2 shaped; fp32
//                        accumulators, online rescaling by exp2 (log2 e folded)
//                        for online normalizers, plain sums otherwise; saves
//                        row_max and row_sum (C, times e^-m online)
//   attn_bwd_preprocess  D_i = dO_i·O_i, and the offset region's dθ per row block
//   attn_bwd_dkdv        per (key block, b·h_kv): recomputes the scores of every
//                        query head of the GQA group, dK, dV and the pairs' dθ
//   attn_bwd_dq          per (query block, b·h): dQ
//
// The dθ of every program is written to its own slot; the launcher sums the
// slots in a fixed order, so parameter gradients are the same bits run to run.
// A mask of block sparsity `indices` gets tile_class (attn-analyze-block-
// sparsity's interval arithmetic over a tile): the loops skip the tiles it keeps
// no pair of and evaluate it only on those it does not keep whole.
// Tensor inputs are kernel arguments (pointer, extents, strides), read clamped;
// a learnable one's gradient goes to one slot of its size per program (each tile
// adding one sum per element it read, in order), summed by the launcher in a
// fixed order.
// Module constants describe the launch (KERNEL, PARAM_NAMES, SCHEDULES: the
// kernel's gpu_schedule, the tiles, warps and stages per chip, dtype, head dim;
// DECODE: when the decode forward runs; BACKWARD_PLAN: the backward's kernel order
// and tile states). A module holds only the kernels its launchers run: no decode
// forward where DECODE has no rows, no attn_bwd_preprocess where the backward runs
// rows first. runtime/python/attn/triton_backend.py launches it and holds no math.
//
// The cosine contraction contracts unit rows, normalised as each tile is loaded;
// dq and dk are chained back through the norms where they are stored.
// The bilinear contraction projects q' = q·W as q is loaded (W after the params in
// Params); dq = dq'·Wᵀ, and the dQ programs write dW = Σ qᵀ·dq' into their slots.
// A feature map (quadratic form) is applied to the tiles as loaded, and dq, dk
// are multiplied by φ' where they are stored.
// A scan normalizer (stick-breaking) walks each row's key tiles from the last to
// the first carrying S (RowEquations' scan*: each tile a chunk combined into the row,
// its pairs' S by a reverse cumsum); its attn_bwd_dq first computes D from the row's
// sums, then stores each row's S and B per key tile for attn_bwd_dkdv.
// Not covered yet, refused with a diagnostic naming the feature: the kernelised
// (linear-time) form, the additive contraction and learnable weights of a dot
// contraction.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_CODEGEN_TRITON_TRITONEMITTER_H
#define ATTN_LIB_CODEGEN_TRITON_TRITONEMITTER_H

#include "dialect/AttnOps.h"

#include "llvm/Support/raw_ostream.h"

namespace mlir::attn {

/// Prints `kernel` as a Python module of Triton kernels to `os`. The kernel must
/// be classified and derived (attn-classify-normalizer, attn-derive-backward);
/// fails with a diagnostic on the kernel, or on the op it cannot print.
LogicalResult emitTritonModule(KernelOp kernel, llvm::raw_ostream &os);

} // namespace mlir::attn

#endif
