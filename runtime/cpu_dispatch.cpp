//===- cpu_dispatch.cpp - a call's CPU entry points, in parallel ----------===//
//
// Memref descriptors are filled from tensor views, and the artifact's entry points
// are called over the work items of the split policy (work_split.h) on the runtime's
// threads (work_sharing.h). No attention math here.
//
//===----------------------------------------------------------------------===//
#include "cpu_dispatch.h"
#include "work_sharing.h"
#include "work_split.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>

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

/// f(b, h, q_begin, q_end) for every block of forward_rows_per_call rows of every
/// (batch, head) slice, in parallel.
template <class F> void for_each_query_block(const Problem &p, const F &f) {
  const int64_t rows = forward_rows_per_call(p.B * p.H, p.Nq, at::get_num_threads());
  const int64_t blocks = (p.Nq + rows - 1) / rows;
  parallel_items(p.B * p.H * blocks, [&](int64_t item) {
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
  for_each_query_block(p, [&](int64_t b, int64_t h, int64_t q_begin, int64_t q_end) {
    attn_memref2d opm = memref2d(o_parts, b, h), om = memref2d(out, b, h);
    attn_memref1d mpm = memref1d(max_parts, b, h), spm = memref1d(sum_parts, b, h),
                  cpm = memref1d(count_parts, b, h), mm = memref1d(row_max, b, h),
                  sm = memref1d(row_sum, b, h), prm = pm;
    merge(&opm, &mpm, &spm, &cpm, &om, &mm, &sm, &prm, tables.empty() ? nullptr : tables.data(),
          b, h, q_begin, q_end, p.query_start[static_cast<size_t>(b)]);
  });
  return {out, row_max, row_sum};
}

namespace {

/// Rows [begin, begin + count) of `m` (a row count of its own, the same strides).
attn_memref2d row_range(attn_memref2d m, int64_t begin, int64_t count) {
  m.offset += begin * m.strides[0];
  m.sizes[0] = count;
  return m;
}
attn_memref1d row_range(attn_memref1d m, int64_t begin, int64_t count) {
  m.offset += begin * m.strides[0];
  m.sizes[0] = count;
  return m;
}

/// One copy of what a forward's items write: out, row_max and row_sum [B, H, Nq(, dv)];
/// with split-K, the partial states [B, H, S·Nq(, dv)] instead, chunk s at rows s·Nq,
/// and their counts.
struct ForwardOutputs {
  Tensor out, max, sum, count;
};

/// A forward's items (b, h, query block, key chunk) and the copies of their outputs
/// (parallel_items_backed_up), owned here so that a helper still running an item after
/// the call returned reads and writes live memory (the artifact's code stays mapped:
/// loaded libraries are never closed).
struct ForwardItems {
  struct Region {
    int64_t b, h, q_begin, q_end, split;
  };

  Region region(int64_t item) const {
    const int64_t split = item % kv_splits, call = item / kv_splits;
    int64_t bh, qb;
    if (p.causal) { // heaviest query blocks (most unmasked keys) first
      qb = nqb - 1 - call / BH;
      bh = call % BH;
    } else { // all blocks of one head together: K/V stay in cache
      bh = call / nqb;
      qb = call % nqb;
    }
    const int64_t q_begin = qb * rows_per_item;
    return {bh / p.H, bh % p.H, q_begin, std::min(p.Nq, q_begin + rows_per_item), split};
  }

  /// The rows of (b, h) in `outputs` that item `r` writes begin here: its chunk's.
  int64_t first_row(const Region &r) const { return kv_splits > 1 ? r.split * p.Nq : 0; }

  void run(int64_t item, int copy) const {
    const Region r = region(item);
    const ForwardOutputs &o = copies[static_cast<size_t>(copy)];
    const int64_t kv_head = p.kv_head(r.h), first = first_row(r);
    attn_memref2d qm = memref2d(fwd.q, r.b, r.h), km = memref2d(fwd.k, r.b, kv_head),
                  vm = memref2d(fwd.v, r.b, kv_head),
                  om = row_range(memref2d(o.out, r.b, r.h), first, p.Nq);
    attn_memref1d mm = row_range(memref1d(o.max, r.b, r.h), first, p.Nq),
                  sm = row_range(memref1d(o.sum, r.b, r.h), first, p.Nq),
                  cm = o.count.defined() ? row_range(memref1d(o.count, r.b, r.h), first, p.Nq)
                                         : attn_memref1d{nullptr, nullptr, 0, {0}, {1}},
                  prm = memref_params(fwd.params);
    const int64_t kv_len = p.kv_len[static_cast<size_t>(r.b)];
    const auto [kv_begin, kv_end] =
        kv_splits > 1 ? key_chunk(r.split, kv_splits, kv_len) : std::pair<int64_t, int64_t>(0, kv_len);
    fwd.fn(&qm, &km, &vm, &om, &mm, &sm, &cm, &prm, fwd.table_data(), r.b, r.h, r.q_begin,
           r.q_end, kv_begin, kv_end, p.causal ? 1 : 0, kv_splits > 1 ? 1 : 0,
           p.query_start[static_cast<size_t>(r.b)], p.key_start[static_cast<size_t>(r.b)]);
  }

  ForwardCall fwd;
  std::vector<Tensor> inputs; // what fwd.tables points into
  Problem p;
  int64_t BH, rows_per_item, nqb, kv_splits;
  std::array<ForwardOutputs, 2> copies;
};

} // namespace

std::tuple<Tensor, Tensor, Tensor> run_forward_cpu(const Library &lib, const Problem &p,
                                                   const Tensor &q_in, const Tensor &k_in,
                                                   const Tensor &v_in, const Tensor &params_in,
                                                   const std::vector<Tensor> &inputs) {
  auto work = std::make_shared<ForwardItems>();
  ForwardItems &w = *work;
  w.fwd = forward_call(lib, p, q_in, k_in, v_in, params_in, inputs);
  w.inputs = inputs;
  w.p = p;
  w.BH = p.B * p.H;
  const ForwardSplit plan =
      forward_split(lib.manifest().splits.forward, w.BH, p.Nq, p.Nk, at::get_num_threads());
  w.rows_per_item = plan.rows_per_call;
  w.kv_splits = plan.key_chunks;
  w.nqb = (p.Nq + w.rows_per_item - 1) / w.rows_per_item;
  // Few calls for the threads (a decoder step): each call's keys in chunks whose
  // partial states the merge folds. Every item writes only its rows, in either of two
  // copies: the caller may rerun an item a descheduled helper holds into copy 1.
  const auto opts = w.fwd.out.options();
  const int64_t items = w.BH * w.nqb * w.kv_splits;
  const bool backups = item_threads(items) > 1; // else copy 1 is never written
  for (ForwardOutputs &copy : w.copies) {
    if (w.kv_splits == 1 && &copy == &w.copies[0]) {
      copy = {w.fwd.out, w.fwd.row_max, w.fwd.row_sum, Tensor()};
      continue;
    }
    if (&copy == &w.copies[1] && !backups)
      break;
    const int64_t rows = w.kv_splits * p.Nq;
    copy.out = torch::empty({p.B, p.H, rows, p.dv}, opts);
    copy.max = torch::empty({p.B, p.H, rows}, opts);
    copy.sum = torch::empty_like(copy.max);
    if (w.kv_splits > 1)
      copy.count = torch::empty_like(copy.max);
  }
  const std::vector<int> won = parallel_items_backed_up(
      items, std::make_shared<const BackedUpItem>([work](int64_t item, int copy) { work->run(item, copy); }));
  // Where any item finished in copy 1, the result is copy 1 with the other items' rows
  // copied in from copy 0 (finished: no helper writes them any more); copy 0 as a whole
  // may still be written by a late helper.
  const bool any_backup = std::any_of(won.begin(), won.end(), [](int copy) { return copy != 0; });
  const ForwardOutputs &result = w.copies[any_backup ? 1 : 0];
  if (any_backup)
    for (size_t item = 0; item < won.size(); ++item) {
      if (won[item] != 0)
        continue;
      const ForwardItems::Region r = w.region(static_cast<int64_t>(item));
      const int64_t begin = w.first_row(r) + r.q_begin, rows = r.q_end - r.q_begin;
      for (auto [dst, src] : {std::pair(result.out, w.copies[0].out),
                              std::pair(result.max, w.copies[0].max),
                              std::pair(result.sum, w.copies[0].sum),
                              std::pair(result.count, w.copies[0].count)})
        if (dst.defined())
          dst[r.b][r.h].narrow(0, begin, rows).copy_(src[r.b][r.h].narrow(0, begin, rows));
    }
  if (w.kv_splits == 1)
    return {result.out, result.max, result.sum};
  return run_merge(lib, p, w.fwd.params, inputs, result.out, result.max, result.sum, result.count);
}

namespace {

/// The [dim4, dim5] matrix of a [copies, L, B, H, *, *] tensor at (copy, l, b, h):
/// pointer arithmetic only, since a backed-up item may not call ATen.
attn_memref2d memref2d(const Tensor &t, int64_t copy, int64_t l, int64_t b, int64_t h) {
  char *ptr = static_cast<char *>(t.data_ptr()) +
              (copy * t.stride(0) + l * t.stride(1) + b * t.stride(2) + h * t.stride(3)) *
                  static_cast<int64_t>(t.element_size());
  return attn_memref2d{ptr, ptr, 0, {t.size(4), t.size(5)}, {t.stride(4), t.stride(5)}};
}

/// A backward's calls (run_backward_cpu): what each reads and writes, in two copies of
/// every output (parallel_items_backed_up runs a set of calls into either), owned here
/// so that a helper still running a set after the call returned touches live memory.
struct BackwardCalls {
  /// What call `item` computes: slice (b, h), query split and rows, key chunk and keys.
  struct Region {
    int64_t b, h, split, kv_split, q_begin, q_end, kv_begin, kv_end;
  };

  Region region(int64_t item) const {
    Region r;
    const int64_t bh = item / (splits * kv_splits);
    r.b = bh / p.H;
    r.h = bh % p.H;
    r.split = item / kv_splits % splits;
    r.kv_split = item % kv_splits;
    const int64_t kv_len = p.kv_len[static_cast<size_t>(r.b)];
    r.q_begin = query_split_begin(r.split, splits, p.Nq, kv_len, p.causal);
    r.q_end = query_split_begin(r.split + 1, splits, p.Nq, kv_len, p.causal);
    std::tie(r.kv_begin, r.kv_end) = key_chunk(r.kv_split, kv_splits, kv_len);
    return r;
  }

  /// Set `set`'s calls, in round order, into copy `copy` of the outputs.
  void run_set(int64_t set, int copy) const {
    const std::vector<attn_table> &set_dtables =
        dtables[static_cast<size_t>(copy)][static_cast<size_t>(set)];
    for (int64_t round = 0; round * sets < calls; ++round) {
      const int64_t item = call_in_set(set, sets, round);
      if (item < calls)
        run_call(item, copy, set_dtables.empty() ? nullptr : set_dtables.data());
    }
  }

  void run_call(int64_t item, int copy, const attn_table *set_dtables) const {
    const Region r = region(item);
    const int64_t kv_head = p.kv_head(r.h);
    attn_memref2d qm = memref2d(q, r.b, r.h), km = shifted(memref2d(k, r.b, kv_head), p.key_shift),
                  vm = shifted(memref2d(v, r.b, kv_head), p.key_shift),
                  om = memref2d(out, r.b, r.h), dom = memref2d(grad_out, r.b, r.h),
                  dqm = memref2d(dq_parts, copy, r.kv_split, r.b, r.h),
                  dkm = shifted(memref2d(dk_parts, copy, r.split, r.b, r.h), p.key_shift),
                  dvm = shifted(memref2d(dv_parts, copy, r.split, r.b, r.h), p.key_shift);
    attn_memref1d mm = memref1d(row_max, r.b, r.h), sm = memref1d(row_sum, r.b, r.h),
                  prm = memref_params(params);
    attn_memref1d dpm{nullptr, nullptr, 0, {p.P}, {1}};
    if (p.P > 0) {
      void *ptr = static_cast<char *>(dparams_parts.data_ptr()) +
                  (copy * calls + item) * p.P * static_cast<int64_t>(dparams_parts.element_size());
      dpm.allocated = dpm.aligned = ptr;
    }
    fn(&qm, &km, &vm, &om, &dom, &mm, &sm, &prm, tables.empty() ? nullptr : tables.data(), &dqm,
       &dkm, &dvm, &dpm, set_dtables, r.b, r.h, r.q_begin, r.q_end, r.kv_begin + p.key_shift,
       r.kv_end + p.key_shift, p.causal ? 1 : 0, p.query_start[static_cast<size_t>(r.b)],
       p.key_start[static_cast<size_t>(r.b)] - p.key_shift);
  }

  attn_backward_fn fn;
  Tensor q, k, v, params, out, row_max, row_sum, grad_out;
  std::vector<Tensor> inputs; // what `tables` points into
  std::vector<attn_table> tables;
  Problem p;
  int64_t splits, kv_splits, calls, sets;
  /// [2, kv_splits, B, p.H, p.Nq, d], [2, splits, B, p.H, Nk, d(v)], [2, calls, p.P].
  Tensor dq_parts, dk_parts, dv_parts, dparams_parts;
  /// Per copy and set, a learnable input's gradient buffer (undefined for the others)
  /// and its descriptor.
  std::vector<std::vector<std::vector<Tensor>>> dinput_parts;
  std::vector<std::vector<std::vector<attn_table>>> dtables;
};

} // namespace

std::tuple<Tensor, Tensor, Tensor, Tensor, std::vector<Tensor>>
run_backward_cpu(const Library &lib, const Problem &p, const Tensor &q_in, const Tensor &k_in,
                 const Tensor &v_in, const Tensor &params_in, const std::vector<Tensor> &inputs,
                 const Tensor &out_in, const Tensor &row_max_in, const Tensor &row_sum_in,
                 const Tensor &grad_out_in) {
  auto opts = torch::TensorOptions().dtype(p.dtype).device(q_in.device());
  auto work = std::make_shared<BackwardCalls>();
  BackwardCalls &w = *work;
  w.fn = lib.backward_fn(p.dtype);
  w.q = unit_inner_stride(q_in);
  w.k = unit_inner_stride(k_in);
  w.v = unit_inner_stride(v_in);
  w.params = unit_inner_stride(params_in);
  w.out = unit_inner_stride(out_in);
  w.row_max = unit_inner_stride(row_max_in);
  w.row_sum = unit_inner_stride(row_sum_in);
  w.grad_out = unit_inner_stride(grad_out_in);
  w.inputs = inputs;
  w.tables = tables_of(inputs);
  w.p = p;
  // A slice's queries are split into `splits` calls when B·H alone would leave
  // threads idle; each split adds its share to its own dk, dv and dparams buffers
  // (abi.h, q_begin), summed below in split order. Too few queries for that (a
  // decoder step): each call's keys are split into `kv_splits` chunks instead, each
  // writing its keys' dk, dv rows and its share of dq to its own dq buffer (abi.h,
  // kv_begin), summed in chunk order. SliceSplit::Whole: one call per slice.
  const int64_t BH = p.B * p.H;
  const int64_t threads = at::get_num_threads();
  const BackwardSplit plan = backward_split(lib.manifest().splits.backward, BH, p.Nq, p.Nk, threads);
  w.splits = plan.query_splits;
  w.kv_splits = plan.key_chunks;
  w.calls = BH * w.splits * w.kv_splits;
  // The calls run in fixed sets (backward_call_sets, call_in_set) that threads take as
  // they finish, and the caller reruns a set an overdue helper holds into the outputs'
  // second copy (parallel_items_backed_up).
  w.sets = backward_call_sets(w.calls, threads);
  const int64_t copies_written = item_threads(w.sets) > 1 ? 2 : 1; // copy 1: backups only
  // The calls overwrite dq's rows [q_begin, q_end) and dk's and dv's rows
  // [kv_begin, kv_len) (abi.h), which together cover every row but the keys past
  // a batch entry's kv_len: only those are zeroed here (zeroing the whole buffers
  // was a second pass over a decoder step's largest outputs).
  // dk and dv per query head: with grouped-query attention the `group` heads that
  // read one key/value head write their own, summed below in head order.
  w.dq_parts = torch::empty({copies_written, w.kv_splits, p.B, p.H, p.Nq, p.d}, opts);
  w.dk_parts = torch::empty({copies_written, w.splits, p.B, p.H, p.Nk, p.d}, opts);
  w.dv_parts = torch::empty({copies_written, w.splits, p.B, p.H, p.Nk, p.dv}, opts);
  auto zero_past_kv_len = [&](const Tensor &parts) { // [splits, B, H, Nk, *]
    for (int64_t b = 0; b < p.B; ++b) {
      const int64_t kv_len = p.kv_len[static_cast<size_t>(b)];
      if (kv_len < p.Nk)
        parts.select(1, b).narrow(2, kv_len, p.Nk - kv_len).zero_();
    }
  };
  for (const Tensor &parts : {w.dk_parts, w.dv_parts})
    zero_past_kv_len(parts[0]);
  // One row of partial parameter gradients per call, summed afterwards.
  w.dparams_parts = torch::zeros({copies_written, w.calls, p.P}, opts);
  // A learnable input's gradient gets one zeroed buffer per set (and copy) that its
  // calls add to (abi.h: dtables), summed in set order: the same bits every run with
  // the same thread count, whichever thread ran a set, and sets × the input's size of
  // memory, never B·H·N².
  const auto &declared = lib.manifest().inputs;
  w.dinput_parts.resize(2);
  w.dtables.resize(2);
  for (int copy = 0; copy < copies_written; ++copy)
    for (int64_t set = 0; set < w.sets; ++set) {
      std::vector<Tensor> &part = w.dinput_parts[copy].emplace_back();
      std::vector<attn_table> &dtable = w.dtables[copy].emplace_back();
      for (size_t n = 0; n < inputs.size(); ++n) {
        part.push_back(declared[n].learnable ? torch::zeros(inputs[n].sizes(), opts) : Tensor());
        dtable.push_back(part.back().defined() ? table_of(part.back()) : attn_table{});
      }
    }

  const std::vector<int> copies = parallel_items_backed_up(
      w.sets, std::make_shared<const BackedUpItem>(
                  [work](int64_t set, int copy) { work->run_set(set, copy); }));

  // Where any set finished in copy 1, the result is copy 1 with the other sets' calls'
  // rows copied in from copy 0 (finished: no helper writes them any more); copy 0 as a
  // whole may still be written by a late helper.
  const int result = std::any_of(copies.begin(), copies.end(), [](int copy) { return copy != 0; });
  Tensor dq_parts = w.dq_parts[result], dk_parts = w.dk_parts[result],
         dv_parts = w.dv_parts[result], dparams_parts = w.dparams_parts[result];
  if (result == 1) {
    zero_past_kv_len(dk_parts);
    zero_past_kv_len(dv_parts);
    for (int64_t set = 0; set < w.sets; ++set) {
      if (copies[static_cast<size_t>(set)] != 0)
        continue;
      for (int64_t round = 0; round * w.sets < w.calls; ++round) {
        const int64_t item = call_in_set(set, w.sets, round);
        if (item >= w.calls)
          continue;
        const BackwardCalls::Region r = w.region(item);
        auto rows = [&](const Tensor &parts, int64_t l, int64_t begin, int64_t end) {
          return parts[l][r.b][r.h].narrow(0, begin, end - begin);
        };
        rows(dq_parts, r.kv_split, r.q_begin, r.q_end)
            .copy_(rows(w.dq_parts[0], r.kv_split, r.q_begin, r.q_end));
        rows(dk_parts, r.split, r.kv_begin, r.kv_end)
            .copy_(rows(w.dk_parts[0], r.split, r.kv_begin, r.kv_end));
        rows(dv_parts, r.split, r.kv_begin, r.kv_end)
            .copy_(rows(w.dv_parts[0], r.split, r.kv_begin, r.kv_end));
        dparams_parts[item].copy_(w.dparams_parts[0][item]);
      }
    }
  }
  // A learnable input's gradient; an empty [0] tensor for the others.
  std::vector<Tensor> dinputs;
  for (size_t n = 0; n < inputs.size(); ++n) {
    Tensor total;
    for (int64_t set = 0; set < w.sets; ++set) {
      const Tensor &part =
          w.dinput_parts[copies[static_cast<size_t>(set)]][static_cast<size_t>(set)][n];
      if (!part.defined())
        break;
      total = set == 0 ? part : total.add_(part);
    }
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
  for_each_query_block(p, [&](int64_t b, int64_t h, int64_t q_begin, int64_t q_end) {
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
