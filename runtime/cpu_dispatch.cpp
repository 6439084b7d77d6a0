//===- cpu_dispatch.cpp - a call's CPU entry points, in parallel ----------===//
//
// Memref descriptors are filled from tensor views, and the artifact's entry points
// are called over the work items of the split policy (work_split.h) on the runtime's
// threads (work_sharing.h). No attention math here.
//
//===----------------------------------------------------------------------===//
#include "cpu_dispatch.h"
#include "internal.h"
#include "work_sharing.h"
#include "work_split.h"

#include <ATen/Parallel.h>

#include <algorithm>

namespace attn {
namespace detail {
namespace {

using torch::Tensor;

// --- memref descriptors --------------------------------------------------

/// Every memref handed to a kernel has unit stride in its last dimension (other
/// strides are passed as they are: a [B, N, H, d] tensor viewed as [B, H, N, d] goes
/// without a copy). abi.h allows any strides, but vectorised kernels load whole rows
/// (MLIR's vector.load needs a unit innermost stride); a view whose last dimension is
/// strided (a transpose of the last two dims, an expanded dO) is copied here, so a
/// kernel specialised to unit inner stride can never read the wrong elements.
Tensor unit_inner_stride(const Tensor &t) {
  if (!t.defined() || t.dim() == 0 || t.size(-1) <= 1 || t.stride(-1) == 1)
    return t;
  return t.contiguous();
}

char *slice_ptr(const Tensor &t, int64_t b, int64_t h) {
  return static_cast<char *>(t.data_ptr()) +
         (b * t.stride(0) + h * t.stride(1)) * static_cast<int64_t>(t.element_size());
}

/// The [dim2, dim3] matrix of a [B, H, *, *] tensor at (b, h).
attn_memref2d memref2d(const Tensor &t, int64_t b, int64_t h) {
  void *ptr = slice_ptr(t, b, h);
  return attn_memref2d{ptr, ptr, 0, {t.size(2), t.size(3)}, {t.stride(2), t.stride(3)}};
}

/// `m` with its rows seen `shift` indices later: row r at index r + shift. The
/// descriptor's offset moves back (never read: the caller starts at index `shift`).
attn_memref2d shifted(attn_memref2d m, int64_t shift) {
  m.offset -= shift * m.strides[0];
  m.sizes[0] += shift;
  return m;
}

/// The [dim2] vector of a [B, H, *] tensor at (b, h).
attn_memref1d memref1d(const Tensor &t, int64_t b, int64_t h) {
  void *ptr = slice_ptr(t, b, h);
  return attn_memref1d{ptr, ptr, 0, {t.size(2)}, {t.stride(2)}};
}

/// A [P] vector (undefined or empty when P == 0).
attn_memref1d memref_params(const Tensor &t) {
  if (!t.defined() || t.numel() == 0)
    return attn_memref1d{nullptr, nullptr, 0, {0}, {1}};
  void *ptr = t.data_ptr();
  return attn_memref1d{ptr, ptr, 0, {t.size(0)}, {t.stride(0)}};
}

/// The attn_table descriptor of a tensor input (abi.h): its first element, extents
/// and strides (0 for a broadcast dim: no copy).
attn_table table_of(const Tensor &t) {
  attn_table table{};
  table.data = t.data_ptr();
  for (int64_t d = 0; d < t.dim(); ++d) {
    table.sizes[d] = t.size(d);
    table.strides[d] = t.stride(d);
  }
  return table;
}

std::vector<attn_table> tables_of(const std::vector<Tensor> &inputs) {
  std::vector<attn_table> tables;
  for (const Tensor &t : inputs)
    tables.push_back(table_of(t));
  return tables;
}

/// Threads for a call estimated at `one_thread_nanos`, of LibTorch's intra-op count.
int64_t threads_for(double one_thread_nanos) {
  return threads_worth(one_thread_nanos, at::get_num_threads(), min_thread_work_nanos());
}

/// The sizes of `p`, its multiply-adds at the reference cost.
CallSize sizes_of(const Problem &p) {
  CallSize size;
  size.heads = p.B * p.H;
  size.queries = p.Nq;
  size.keys = p.Nk;
  size.d = p.d;
  size.dv = p.dv;
  size.element_bytes = static_cast<int64_t>(c10::elementSize(p.dtype));
  size.causal = p.causal;
  return size;
}

/// The sizes of `p` and what its multiply-adds cost in the schedule that runs its
/// `backward` (else forward) calls.
CallSize call_size(const Library &lib, const Problem &p, bool backward) {
  CallSize size = sizes_of(p);
  size.multiply_add_cost = cpu_pair_cost(lib, p.dtype, p.d, p.dv, backward);
  return size;
}

/// f(b, h, q_begin, q_end) for every block of forward_rows_per_call rows of every
/// (batch, head) slice, on `threads` threads.
template <class F> void for_each_query_block(const Problem &p, int64_t threads, const F &f) {
  const int64_t rows = forward_rows_per_call(p.B * p.H, p.Nq, threads);
  const int64_t blocks = (p.Nq + rows - 1) / rows;
  parallel_items(p.B * p.H * blocks, threads, [&](int64_t item) {
    const int64_t bh = item / blocks, q_begin = item % blocks * rows;
    f(bh / p.H, bh % p.H, q_begin, std::min(p.Nq, q_begin + rows));
  });
}

/// A forward's entry point, operands as it takes them (unit inner stride, tables) and
/// outputs: out [B, H, Nq, dv], row_max and row_sum [B, H, Nq], not yet written.
struct ForwardCall {
  attn_forward_fn fn;
  Tensor q, k, v, params;
  std::vector<attn_table> tables;
  Tensor out, row_max, row_sum;

  const attn_table *table_data() const { return tables.empty() ? nullptr : tables.data(); }
};

ForwardCall forward_call(const Library &lib, const Problem &p, const Tensor &q,
                         const Tensor &k, const Tensor &v, const Tensor &params,
                         const std::vector<Tensor> &inputs) {
  auto opts = torch::TensorOptions().dtype(p.dtype).device(p.device);
  return {lib.forward_fn(p.dtype),
          unit_inner_stride(q),
          unit_inner_stride(k),
          unit_inner_stride(v),
          unit_inner_stride(params),
          tables_of(inputs),
          torch::empty({p.B, p.H, p.Nq, p.dv}, opts),
          torch::empty({p.B, p.H, p.Nq}, opts),
          torch::empty({p.B, p.H, p.Nq}, opts)};
}

/// [B, H, N, E] per query head -> [B, H / group, N, E]: the gradient of a key/value head
/// is the sum over the query heads that read it, added in head order (the same bits
/// every run).
Tensor sum_groups(const Tensor &per_query_head, const Problem &p) {
  if (p.group == 1)
    return per_query_head;
  const Tensor grouped = per_query_head.view(
      {p.B, p.H / p.group, p.group, per_query_head.size(2), per_query_head.size(3)});
  Tensor total = grouped.select(2, 0).clone();
  for (int64_t g = 1; g < p.group; ++g)
    total.add_(grouped.select(2, g));
  return total;
}

/// [splits, ...] -> [...]: the per-split partial gradients added in split order.
Tensor sum_splits(const Tensor &parts) {
  Tensor total = parts[0];
  for (int64_t s = 1; s < parts.size(0); ++s)
    total.add_(parts[s]);
  return total;
}

} // namespace

double cpu_pair_cost(const Library &lib, torch::ScalarType dtype, int64_t d, int64_t dv,
                     bool backward) {
  const char *tag = dtype_tag(dtype);
  return pair_cost(lib.manifest().cpu_cost, tag ? tag : "", d, dv,
                   static_cast<int64_t>(c10::elementSize(dtype)), backward);
}

/// The S partial states [B, H, S·Nq(, dv)] folded and finished by the artifact's merge
/// (abi.h, attn_merge_T): split-K within one call, and context parallelism.
std::tuple<Tensor, Tensor, Tensor>
run_merge(const Library &lib, const Problem &p, const Tensor &params_in,
          const std::vector<Tensor> &inputs, const Tensor &o_parts_in, const Tensor &max_parts_in,
          const Tensor &sum_parts_in, const Tensor &count_parts_in) {
  attn_merge_fn merge = lib.merge_fn(p.dtype);
  const Tensor params = unit_inner_stride(params_in), o_parts = unit_inner_stride(o_parts_in),
               max_parts = unit_inner_stride(max_parts_in),
               sum_parts = unit_inner_stride(sum_parts_in),
               count_parts = unit_inner_stride(count_parts_in);
  const std::vector<attn_table> tables = tables_of(inputs);
  auto opts = torch::TensorOptions().dtype(p.dtype).device(p.device);
  Tensor out = torch::empty({p.B, p.H, p.Nq, p.dv}, opts);
  Tensor row_max = torch::empty({p.B, p.H, p.Nq}, opts), row_sum = torch::empty_like(row_max);
  const attn_memref1d pm = memref_params(params);
  const int64_t threads =
      threads_for(merge_nanos(sizes_of(p), o_parts.size(2) / std::max<int64_t>(p.Nq, 1)));
  for_each_query_block(p, threads, [&](int64_t b, int64_t h, int64_t q_begin, int64_t q_end) {
    attn_memref2d opm = memref2d(o_parts, b, h), om = memref2d(out, b, h);
    attn_memref1d mpm = memref1d(max_parts, b, h), spm = memref1d(sum_parts, b, h),
                  cpm = memref1d(count_parts, b, h), mm = memref1d(row_max, b, h),
                  sm = memref1d(row_sum, b, h), prm = pm;
    merge(&opm, &mpm, &spm, &cpm, &om, &mm, &sm, &prm, tables.empty() ? nullptr : tables.data(),
          b, h, q_begin, q_end, p.query_start[static_cast<size_t>(b)]);
  });
  return {out, row_max, row_sum};
}

std::tuple<Tensor, Tensor, Tensor> run_forward_cpu(const Library &lib, const Problem &p,
                                                   const Tensor &q_in, const Tensor &k_in,
                                                   const Tensor &v_in, const Tensor &params_in,
                                                   const std::vector<Tensor> &inputs) {
  const ForwardCall fwd = forward_call(lib, p, q_in, k_in, v_in, params_in, inputs);
  const auto opts = fwd.out.options();

  const int64_t BH = p.B * p.H;
  const int64_t threads = threads_for(forward_nanos(call_size(lib, p, /*backward=*/false)));
  const ForwardSplit plan = forward_split(lib.manifest().splits.forward, BH, p.Nq, p.Nk, threads);
  const int64_t rows_per_item = plan.rows_per_call, kv_splits = plan.key_chunks;
  const int64_t nqb = (p.Nq + rows_per_item - 1) / rows_per_item;
  Tensor o_parts, max_parts, sum_parts, count_parts; // [B, H, kv_splits·Nq(, dv)]
  if (kv_splits > 1) {
    o_parts = torch::empty({p.B, p.H, kv_splits * p.Nq, p.dv}, opts);
    max_parts = torch::empty({p.B, p.H, kv_splits * p.Nq}, opts);
    sum_parts = torch::empty_like(max_parts);
    count_parts = torch::empty_like(max_parts);
  }
  const attn_memref1d pm = memref_params(fwd.params);
  parallel_items(BH * nqb * kv_splits, threads, [&](int64_t item) {
    const int64_t split = item % kv_splits, call = item / kv_splits;
    int64_t bh, qb;
    if (p.causal) { // heaviest query blocks (most unmasked keys) first
      qb = nqb - 1 - call / BH;
      bh = call % BH;
    } else { // all blocks of one head together: K/V stay in cache
      bh = call / nqb;
      qb = call % nqb;
    }
    const int64_t b = bh / p.H, h = bh % p.H;
    attn_memref2d qm = memref2d(fwd.q, b, h), km = memref2d(fwd.k, b, p.kv_head(h)),
                  vm = memref2d(fwd.v, b, p.kv_head(h));
    attn_memref1d prm = pm;
    const int64_t q_begin = qb * rows_per_item;
    const int64_t q_end = std::min(p.Nq, q_begin + rows_per_item);
    const int64_t kv_len = p.kv_len[static_cast<size_t>(b)];
    if (kv_splits == 1) {
      attn_memref2d om = memref2d(fwd.out, b, h);
      attn_memref1d mm = memref1d(fwd.row_max, b, h), sm = memref1d(fwd.row_sum, b, h);
      attn_memref1d unused{nullptr, nullptr, 0, {0}, {1}};
      fwd.fn(&qm, &km, &vm, &om, &mm, &sm, &unused, &prm, fwd.table_data(), b, h, q_begin, q_end, 0,
             kv_len, p.causal ? 1 : 0, 0, p.query_start[static_cast<size_t>(b)],
             p.key_start[static_cast<size_t>(b)]);
      return;
    }
    const auto [kv_begin, kv_end] = key_chunk(split, kv_splits, kv_len);
    // This chunk's rows of the parts: [split·Nq, (split + 1)·Nq).
    auto chunk = [&](const Tensor &parts) { return parts.narrow(2, split * p.Nq, p.Nq); };
    attn_memref2d om = memref2d(chunk(o_parts), b, h);
    attn_memref1d mm = memref1d(chunk(max_parts), b, h), sm = memref1d(chunk(sum_parts), b, h),
                  cm = memref1d(chunk(count_parts), b, h);
    fwd.fn(&qm, &km, &vm, &om, &mm, &sm, &cm, &prm, fwd.table_data(), b, h, q_begin, q_end,
           kv_begin, kv_end, p.causal ? 1 : 0, 1, p.query_start[static_cast<size_t>(b)],
           p.key_start[static_cast<size_t>(b)]);
  });
  if (kv_splits > 1)
    return run_merge(lib, p, fwd.params, inputs, o_parts, max_parts, sum_parts, count_parts);
  return {fwd.out, fwd.row_max, fwd.row_sum};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, std::vector<Tensor>>
run_backward_cpu(const Library &lib, const Problem &p, const Tensor &q_in, const Tensor &k_in,
                 const Tensor &v_in, const Tensor &params_in, const std::vector<Tensor> &inputs,
                 const Tensor &out_in, const Tensor &row_max_in, const Tensor &row_sum_in,
                 const Tensor &grad_out_in) {
  attn_backward_fn fn = lib.backward_fn(p.dtype);
  const Tensor q = unit_inner_stride(q_in), k = unit_inner_stride(k_in),
               v = unit_inner_stride(v_in), params = unit_inner_stride(params_in),
               out = unit_inner_stride(out_in), row_max = unit_inner_stride(row_max_in),
               row_sum = unit_inner_stride(row_sum_in),
               grad_out = unit_inner_stride(grad_out_in);
  const std::vector<attn_table> tables = tables_of(inputs);
  auto opts = torch::TensorOptions().dtype(p.dtype).device(q.device());
  // A slice's queries are split into `splits` calls when B·H alone would leave
  // threads idle; each split adds its share to its own dk, dv and dparams buffers
  // (abi.h, q_begin), summed below in split order. Too few queries for that (a
  // decoder step): each call's keys are split into `kv_splits` chunks instead, each
  // writing its keys' dk, dv rows and its share of dq to its own dq buffer (abi.h,
  // kv_begin), summed in chunk order. SliceSplit::Whole: one call per slice.
  const int64_t BH = p.B * p.H;
  const int64_t threads = threads_for(backward_nanos(call_size(lib, p, /*backward=*/true)));
  const BackwardSplit plan = backward_split(lib.manifest().splits.backward, BH, p.Nq, p.Nk, threads);
  const int64_t splits = plan.query_splits, kv_splits = plan.key_chunks;
  // The calls overwrite dq's rows [q_begin, q_end) and dk's and dv's rows
  // [kv_begin, kv_len) (abi.h), which together cover every row but the keys past
  // a batch entry's kv_len: only those are zeroed here (zeroing the whole buffers
  // was a second pass over a decoder step's largest outputs).
  // dk and dv per query head: with grouped-query attention the `group` heads that
  // read one key/value head write their own, summed below in head order.
  Tensor dq_parts = torch::empty({kv_splits, p.B, p.H, p.Nq, p.d}, opts);
  Tensor dk_parts = torch::empty({splits, p.B, p.H, p.Nk, p.d}, opts);
  Tensor dv_parts = torch::empty({splits, p.B, p.H, p.Nk, p.dv}, opts);
  for (int64_t b = 0; b < p.B; ++b) {
    const int64_t kv_len = p.kv_len[static_cast<size_t>(b)];
    if (kv_len < p.Nk)
      for (const Tensor &parts : {dk_parts, dv_parts})
        parts.select(1, b).narrow(2, kv_len, p.Nk - kv_len).zero_();
  }
  // One row of partial parameter gradients per call, summed afterwards.
  const int64_t calls = BH * splits * kv_splits;
  Tensor dparams_parts = torch::zeros({calls, p.P}, opts);

  // The calls run in fixed sets (backward_call_sets, call_in_set) that threads take as
  // they finish. A learnable input's gradient gets one zeroed buffer per set that its
  // calls add to (abi.h: dtables), summed in set order: the same bits every run with
  // the same thread count, whichever thread ran a set, and sets × the input's size of
  // memory, never B·H·N².
  const int64_t sets = backward_call_sets(calls, threads);
  const auto &declared = lib.manifest().inputs;
  std::vector<std::vector<Tensor>> parts(static_cast<size_t>(sets));
  std::vector<std::vector<attn_table>> dtables(static_cast<size_t>(sets));
  for (auto [part, dtable] = std::pair(parts.begin(), dtables.begin()); part != parts.end();
       ++part, ++dtable)
    for (size_t n = 0; n < inputs.size(); ++n) {
      part->push_back(declared[n].learnable
                          ? torch::zeros(inputs[n].sizes(), opts)
                          : Tensor());
      dtable->push_back(part->back().defined() ? table_of(part->back()) : attn_table{});
    }

  const attn_memref1d pm = memref_params(params);
  auto call = [&](int64_t item, const attn_table *set_dtables) {
    const int64_t bh = item / (splits * kv_splits), split = item / kv_splits % splits,
                  kv_split = item % kv_splits;
    const int64_t b = bh / p.H, h = bh % p.H;
    const int64_t kv_len = p.kv_len[static_cast<size_t>(b)];
    const int64_t q_begin = query_split_begin(split, splits, p.Nq, kv_len, p.causal);
    const int64_t q_end = query_split_begin(split + 1, splits, p.Nq, kv_len, p.causal);
    const auto [kv_begin, kv_end] = key_chunk(kv_split, kv_splits, kv_len);
    const Tensor dk_part = dk_parts[split], dv_part = dv_parts[split];
    attn_memref2d qm = memref2d(q, b, h), km = shifted(memref2d(k, b, p.kv_head(h)), p.key_shift),
                  vm = shifted(memref2d(v, b, p.kv_head(h)), p.key_shift),
                  om = memref2d(out, b, h), dom = memref2d(grad_out, b, h),
                  dqm = memref2d(dq_parts[kv_split], b, h),
                  dkm = shifted(memref2d(dk_part, b, h), p.key_shift),
                  dvm = shifted(memref2d(dv_part, b, h), p.key_shift);
    attn_memref1d mm = memref1d(row_max, b, h), sm = memref1d(row_sum, b, h), prm = pm;
    attn_memref1d dpm{nullptr, nullptr, 0, {p.P}, {1}};
    if (p.P > 0) {
      void *ptr = static_cast<char *>(dparams_parts.data_ptr()) +
                  item * p.P * static_cast<int64_t>(dparams_parts.element_size());
      dpm.allocated = dpm.aligned = ptr;
    }
    fn(&qm, &km, &vm, &om, &dom, &mm, &sm, &prm, tables.empty() ? nullptr : tables.data(), &dqm,
       &dkm, &dvm, &dpm, set_dtables, b, h, q_begin, q_end, kv_begin + p.key_shift,
       kv_end + p.key_shift, p.causal ? 1 : 0, p.query_start[static_cast<size_t>(b)],
       p.key_start[static_cast<size_t>(b)] - p.key_shift);
  };
  parallel_items(sets, threads, [&](int64_t set) {
    const std::vector<attn_table> &set_dtables = dtables[static_cast<size_t>(set)];
    for (int64_t round = 0; round * sets < calls; ++round) {
      const int64_t item = call_in_set(set, sets, round);
      if (item < calls)
        call(item, set_dtables.empty() ? nullptr : set_dtables.data());
    }
  });
  // A learnable input's gradient; an empty [0] tensor for the others.
  std::vector<Tensor> dinputs;
  for (size_t n = 0; n < inputs.size(); ++n) {
    Tensor total = parts[0][n];
    for (int64_t set = 1; set < sets && total.defined(); ++set)
      total.add_(parts[static_cast<size_t>(set)][n]);
    dinputs.push_back(total.defined() ? total : torch::empty({0}, opts));
  }
  Tensor dparams = dparams_parts.sum(0);
  return {sum_splits(dq_parts), sum_groups(sum_splits(dk_parts), p),
          sum_groups(sum_splits(dv_parts), p), dparams, dinputs};
}

std::tuple<Tensor, Tensor, Tensor, Tensor>
run_partial_forward(const Library &lib, const Problem &p, const Tensor &q_in, const Tensor &k_in,
                    const Tensor &v_in, const Tensor &params_in,
                    const std::vector<Tensor> &inputs) {
  const ForwardCall fwd = forward_call(lib, p, q_in, k_in, v_in, params_in, inputs);
  Tensor row_count = torch::empty_like(fwd.row_max);
  const attn_memref1d pm = memref_params(fwd.params);
  const int64_t threads = threads_for(forward_nanos(call_size(lib, p, /*backward=*/false)));
  for_each_query_block(p, threads, [&](int64_t b, int64_t h, int64_t q_begin, int64_t q_end) {
    attn_memref2d qm = memref2d(fwd.q, b, h), km = memref2d(fwd.k, b, p.kv_head(h)),
                  vm = memref2d(fwd.v, b, p.kv_head(h)), om = memref2d(fwd.out, b, h);
    attn_memref1d mm = memref1d(fwd.row_max, b, h), sm = memref1d(fwd.row_sum, b, h),
                  cm = memref1d(row_count, b, h), prm = pm;
    fwd.fn(&qm, &km, &vm, &om, &mm, &sm, &cm, &prm, fwd.table_data(), b, h, q_begin, q_end, 0,
           p.kv_len[static_cast<size_t>(b)], p.causal ? 1 : 0, 1,
           p.query_start[static_cast<size_t>(b)], p.key_start[static_cast<size_t>(b)]);
  });
  return {fwd.out, fwd.row_max, fwd.row_sum, row_count};
}

} // namespace detail
} // namespace attn
