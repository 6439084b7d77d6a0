//===- partial.h - one query block against one key block (context parallelism) -===//
//
// The pieces of ring attention (docs/context-parallel.md): a rank runs its queries
// against one key block at a time, keeps each block's partial row state, merges the
// states once it has seen every block, and in backward runs each key block again
// with the merged row statistics. They are the artifact's split-K entry points
// (attn/abi.h: the forward's `partial` mode, attn_merge_T, the backward's key range)
// on separate tensors, so the blocks can live on different ranks.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_PARTIAL_H
#define ATTN_PARTIAL_H

#include "attn/runtime.h"

namespace attn {

// Where a block lies in the sequence is the Options' query_start and key_start
// (absolute positions, docs/decoding.md): every region sees the whole sequence's i and
// j, is_causal keeps j <= i there, and a tensor input's dims named Nq and Nk may span
// more positions than the block's (the whole sequence's table; at least the positions
// up to the block's last query and key), since a block's regions read it at both.

/// The forward's partial state of q's rows over the block's keys (abi.h, `partial`):
/// (o [B,H,Nq,dv] unnormalised Σ g·v, row_max [B,H,Nq] the shift, row_sum Σ h,
/// row_count the keys the mask kept); the row offset is left to attention_merge.
/// Shapes, dtypes and tensor inputs as attention_forward's, with k, v the key block.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor>
attention_partial_forward(const std::shared_ptr<const Library> &lib, const torch::Tensor &q,
                          const torch::Tensor &k, const torch::Tensor &v,
                          const torch::Tensor &params, const Options &opts = {});

/// The S partial states of q's rows folded in state order and finished like the
/// forward (the row offset once, C, O/C): (O, row_max, row_sum) as attention_forward
/// returns them over all the states' keys. o_parts [B,H,S·Nq,dv] holds state s in rows
/// [s·Nq, (s+1)·Nq), max_parts, sum_parts, count_parts [B,H,S·Nq] likewise. q, k, v and
/// opts are those of any one state's call (the merge reads params and the tables'
/// row-offset entries; k and v only fix the shapes the tables are checked against).
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor>
attention_merge(const std::shared_ptr<const Library> &lib, const torch::Tensor &q,
                const torch::Tensor &k, const torch::Tensor &v, const torch::Tensor &params,
                const torch::Tensor &o_parts, const torch::Tensor &max_parts,
                const torch::Tensor &sum_parts, const torch::Tensor &count_parts,
                const Options &opts = {});

/// The backward over the key block given the merged O and row statistics: (dq, the
/// block's share; dk, dv of the block's keys; dparams and dinputs, its share). The
/// row offset's share goes to the call with row_offset = true: exactly one block per
/// query row must take it, and a block at key_start = 0 must be that one.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor,
           std::vector<torch::Tensor>>
attention_partial_backward(const std::shared_ptr<const Library> &lib, const torch::Tensor &q,
                           const torch::Tensor &k, const torch::Tensor &v,
                           const torch::Tensor &params, const torch::Tensor &out,
                           const torch::Tensor &row_max, const torch::Tensor &row_sum,
                           const torch::Tensor &grad_out, const Options &opts,
                           bool row_offset);

} // namespace attn

#endif
