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

/// Where a block lies in the whole sequence: its first query's and first key's
/// positions. These calls do not yet pass them as the entry points' query_start /
/// key_start (attn-abi 8), so the entry points see block-local indices and the calls
/// refuse what that would get wrong: is_causal is allowed on a diagonal block only
/// (q_start == k_start; keys wholly before the queries go without it, keys wholly
/// after are skipped by the caller), and a kernel with a mask only at (0, 0). A
/// score or normalizer that reads the indices i, j itself (ALiBi, relative bias) sees
/// them block-local: not position-free, it is not shardable until the entry points
/// take absolute positions, which these calls will then pass through.
struct BlockPositions {
  int64_t q_start = 0;
  int64_t k_start = 0;
};

/// The forward's partial state of q's rows over the block's keys (abi.h, `partial`):
/// (o [B,H,Nq,dv] unnormalised Σ g·v, row_max [B,H,Nq] the shift, row_sum Σ h,
/// row_count the keys the mask kept); the row offset is left to attention_merge.
/// Shapes, dtypes and tensor inputs as attention_forward's, with k, v the key block.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor>
attention_partial_forward(const std::shared_ptr<const Library> &lib, const torch::Tensor &q,
                          const torch::Tensor &k, const torch::Tensor &v,
                          const torch::Tensor &params, const Options &opts = {},
                          const BlockPositions &at = {});

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
                const Options &opts = {}, const BlockPositions &at = {});

/// The backward over the key block given the merged O and row statistics: (dq, the
/// block's share; dk, dv of the block's keys; dparams and dinputs, its share). The
/// row offset's share goes to the call with row_offset = true: exactly one block per
/// query row must take it (a causal call must be that block).
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor,
           std::vector<torch::Tensor>>
attention_partial_backward(const std::shared_ptr<const Library> &lib, const torch::Tensor &q,
                           const torch::Tensor &k, const torch::Tensor &v,
                           const torch::Tensor &params, const torch::Tensor &out,
                           const torch::Tensor &row_max, const torch::Tensor &row_sum,
                           const torch::Tensor &grad_out, const Options &opts,
                           const BlockPositions &at, bool row_offset);

} // namespace attn

#endif
