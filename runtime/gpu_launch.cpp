//===- gpu_launch.cpp - a call's GPU kernels (the Triton backend) ---------===//
//
// The kernels and their parameters are the artifact's attn_triton_launch
// (triton_launch orders the arguments by name); tensors go with their strides. Buffers
// are allocated on q's device (the call's: cuda_launch_test runs this path with CPU
// tensors against a fake driver).
//
//===----------------------------------------------------------------------===//
#include "gpu_launch.h"
#include "cuda_driver.h"
#include "internal.h"

#include <algorithm>

namespace attn {
namespace detail {
namespace {

using torch::Tensor;

void add_strides(TritonArgs &args, const char *prefix, const char *last,
                 const Tensor &t) {
  const char *axes[4] = {"b", "h", nullptr, "d"};
  for (int64_t d = 0; d < 4; ++d)
    args[std::string("stride_") + prefix + (d == 2 ? last : axes[d])] = triton_int(t.stride(d));
}

/// What every kernel of a problem reads: q, k, v and their strides, params (float32,
/// at least one element), key lengths (int32) and the query and key starts (int64 [B]:
/// positions), the sizes and the score scale.
struct TritonProblem {
  Tensor params32, lengths32, query_starts64, key_starts64;
  std::vector<Tensor> tables; // as the kernels read them (float tables in float32)
  TritonSizes sizes;
  TritonArgs common;
};

TritonProblem triton_problem(const Library &lib, const Problem &p, const Tensor &q,
                             const Tensor &k, const Tensor &v, const Tensor &params,
                             const std::vector<Tensor> &inputs) {
  TritonProblem t;
  auto f32 = q.options().dtype(torch::kFloat);
  t.params32 = p.P ? params.to(f32).contiguous() : torch::zeros({1}, f32);
  t.lengths32 = p.key_lengths.to(torch::kInt);
  t.query_starts64 = p.query_starts.to(torch::kLong);
  t.key_starts64 = p.key_starts.to(torch::kLong);
  t.sizes = {p.B, p.H, p.H / p.group, p.Nq, p.Nk};
  auto &a = t.common;
  a["Q"] = triton_ptr(q);
  a["K"] = triton_ptr(k);
  a["V"] = triton_ptr(v);
  a["Params"] = triton_ptr(t.params32);
  a["KeyLengths"] = triton_ptr(t.lengths32);
  a["QueryStarts"] = triton_ptr(t.query_starts64);
  a["KeyStarts"] = triton_ptr(t.key_starts64);
  add_strides(a, "q", "m", q);
  add_strides(a, "k", "n", k);
  add_strides(a, "v", "n", v);
  a["H"] = triton_int(p.H);
  a["H_KV"] = triton_int(p.H / p.group);
  a["NQ"] = triton_int(p.Nq);
  a["NK"] = triton_int(p.Nk);
  a["HEAD_DIM"] = triton_int(p.d);
  a["HEAD_DIM_V"] = triton_int(p.dv);
  const auto &images = lib.triton()->images;
  const char *tag = cuda_dtype_tag(p.dtype);
  for (const TritonImage &image : images)
    if (image.dtype == tag && image.head_dim == p.d)
      a["scale"] = triton_float(image.scale); // one scale per head dim
  // The tables: pointer, extents and strides (a broadcast view goes as it is).
  for (const TritonInput &declared : lib.triton()->inputs) {
    const auto &manifest_inputs = lib.manifest().inputs;
    const auto it = std::find_if(manifest_inputs.begin(), manifest_inputs.end(),
                                 [&](const TensorInput &m) { return m.name == declared.name; });
    TORCH_CHECK(it != manifest_inputs.end(), "attn: artifact ", lib.path(),
                ": attn_triton_launch names the input ", declared.name,
                ", which its manifest does not declare");
    const Tensor &given = inputs[static_cast<size_t>(it - manifest_inputs.begin())];
    const torch::ScalarType element = declared.element == "fp32" ? torch::kFloat
                                      : declared.element == "i8"  ? torch::kChar
                                      : declared.element == "i32" ? torch::kInt
                                                                  : torch::kLong;
    const Tensor table = given.to(element);
    t.tables.push_back(table);
    a[declared.arg] = triton_ptr(table);
    for (int64_t d = 0; d < table.dim(); ++d) {
      a[declared.arg + "_n" + std::to_string(d)] = triton_int(table.size(d));
      a[declared.arg + "_s" + std::to_string(d)] = triton_int(table.stride(d));
    }
  }
  return t;
}

void launch_triton(const Library &lib, const Problem &p, TritonKernel kernel,
                   const TritonProblem &t, const TritonArgs &own, int64_t splits = 1) {
  TritonArgs args = t.common;
  for (const auto &[name, value] : own)
    args[name] = value;
  TritonSizes sizes = t.sizes;
  sizes.SPLITS = splits;
  triton_launch(lib, p.device, kernel, p.dtype, p.d, p.causal, sizes, args);
}

/// The decode forward's key chunks for the call, or none (attn_fwd runs it): the rule
/// with the launch description's "decode" and the tiles of the cubins the call runs.
std::optional<KeyChunks> decode_chunks(const Library &lib, const Problem &p) {
  const std::optional<TritonDecodeRule> &rule = lib.triton()->decode;
  if (!rule || p.Nq > rule->max_rows || p.Nk == 0) // before looking up images and SMs
    return std::nullopt;
  const TritonImage &forward =
      triton_image(lib, p.device, TritonKernel::Forward, p.dtype, p.d, p.causal);
  const TritonImage &split =
      triton_image(lib, p.device, TritonKernel::ForwardSplit, p.dtype, p.d, p.causal);
  return decode_key_chunks(p.Nq, p.Nk, p.group, p.B * (p.H / p.group), forward.block_m,
                           split.block_n, split.block_m, triton_sm_count(p.device.index()),
                           *rule);
}

} // namespace

std::optional<KeyChunks> decode_key_chunks(int64_t rows, int64_t keys, int64_t group,
                                           int64_t batch_kv_heads, int64_t block_m,
                                           int64_t block_n, int64_t decode_block_m,
                                           int64_t sm_count, const TritonDecodeRule &rule) {
  auto cdiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  if (rows > rule.max_rows || cdiv(rows, block_m) * batch_kv_heads * group >= sm_count)
    return std::nullopt; // attn_fwd's programs already fill the GPU
  const int64_t key_tiles = cdiv(keys, block_n);
  const int64_t programs = cdiv(group * rows, decode_block_m) * batch_kv_heads;
  const int64_t wanted = std::min(key_tiles, cdiv(rule.programs_per_sm * sm_count, programs));
  if (wanted < 2)
    return std::nullopt;
  const int64_t per_chunk = cdiv(key_tiles, wanted) * block_n;
  return KeyChunks{cdiv(keys, per_chunk), per_chunk};
}

std::tuple<Tensor, Tensor, Tensor> run_forward_triton(const Library &lib, const Problem &p,
                                                      const Tensor &q, const Tensor &k,
                                                      const Tensor &v, const Tensor &params,
                                                      const std::vector<Tensor> &inputs) {
  const TritonProblem t = triton_problem(lib, p, q, k, v, params, inputs);
  auto stats = q.options().dtype(torch::kFloat);
  Tensor out = torch::empty({p.B, p.H, p.Nq, p.dv}, q.options());
  Tensor row_max = torch::empty({p.B, p.H, p.Nq}, stats);
  Tensor row_sum = torch::empty({p.B, p.H, p.Nq}, stats);
  TritonArgs args{{"Out", triton_ptr(out)},
                          {"RowMax", triton_ptr(row_max)},
                          {"RowSum", triton_ptr(row_sum)}};
  add_strides(args, "o", "m", out);
  const std::optional<KeyChunks> chunks = decode_chunks(lib, p);
  if (!chunks) {
    launch_triton(lib, p, TritonKernel::Forward, t, args);
    return {out, row_max, row_sum};
  }
  // The decode forward: each chunk's partial row state (float32), then their merge.
  Tensor part_acc = torch::empty({chunks->count, p.B * p.H, p.Nq, p.dv}, stats);
  Tensor part_max = torch::empty({chunks->count, p.B * p.H, p.Nq}, stats);
  Tensor part_sum = torch::empty_like(part_max), part_count = torch::empty_like(part_max);
  args["PartAcc"] = triton_ptr(part_acc);
  args["PartMax"] = triton_ptr(part_max);
  args["PartSum"] = triton_ptr(part_sum);
  args["PartCount"] = triton_ptr(part_count);
  args["KEYS_PER_SPLIT"] = triton_int(chunks->keys);
  args["SPLITS"] = triton_int(chunks->count);
  launch_triton(lib, p, TritonKernel::ForwardSplit, t, args, chunks->count);
  launch_triton(lib, p, TritonKernel::ForwardMerge, t, args, chunks->count);
  return {out, row_max, row_sum};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, std::vector<Tensor>>
run_backward_triton(const Library &lib, const Problem &p, const Tensor &q, const Tensor &k,
                    const Tensor &v, const Tensor &params, const std::vector<Tensor> &inputs,
                    const Tensor &out, const Tensor &row_max_in, const Tensor &row_sum_in,
                    const Tensor &grad_out) {
  const TritonProblem t = triton_problem(lib, p, q, k, v, params, inputs);
  const TritonLaunch &launch = *lib.triton();
  const Tensor row_max = row_max_in.contiguous(), row_sum = row_sum_in.contiguous();
  auto f32 = q.options().dtype(torch::kFloat);
  const int64_t H_KV = p.H / p.group, P = std::max<int64_t>(p.P, 1);
  // One slot per program of the kernels that write them: their grids' tile counts
  // (attn_bwd_preprocess's rows are attn_bwd_dq's: the backward's tiles).
  const int64_t row_blocks =
      triton_grid(lib, triton_image(lib, p.device, TritonKernel::BackwardQueries,
                                                    p.dtype, p.d, p.causal),
                          t.sizes)[0];
  const int64_t key_blocks =
      triton_grid(lib, triton_image(lib, p.device, TritonKernel::BackwardKeys, p.dtype,
                                                    p.d, p.causal),
                          t.sizes)[0];
  Tensor delta = torch::empty({p.B, p.H, p.Nq}, f32);
  Tensor dq = torch::zeros_like(q), dk = torch::zeros_like(k), dv = torch::zeros_like(v);
  // One slot per program (and param, or table element): each program writes its own,
  // summed below in a fixed order, so the gradients are the same bits run to run.
  Tensor row_slots = torch::zeros({p.B * p.H, row_blocks, P}, f32);
  Tensor key_slots = torch::zeros({p.B * H_KV, key_blocks, P}, f32);
  TritonArgs shared{{"RowMax", triton_ptr(row_max)},
                            {"RowSum", triton_ptr(row_sum)},
                            {"Delta", triton_ptr(delta)},
                            {"DOut", triton_ptr(grad_out)}};
  add_strides(shared, "do", "m", grad_out);
  TritonArgs prep = shared, dkdv = shared, dqk = shared;
  prep["Out"] = triton_ptr(out);
  add_strides(prep, "o", "m", out);
  prep["DParamsRows"] = triton_ptr(row_slots);
  dkdv["DK"] = triton_ptr(dk);
  dkdv["DV"] = triton_ptr(dv);
  add_strides(dkdv, "dk", "n", dk);
  add_strides(dkdv, "dv", "n", dv);
  dkdv["DParamsKeys"] = triton_ptr(key_slots);
  dqk["DQ"] = triton_ptr(dq);
  dqk["DParamsRows"] = triton_ptr(row_slots); // the learnable weights' dW (dQ programs' share)
  add_strides(dqk, "dq", "m", dq);
  std::vector<std::pair<Tensor, Tensor>> table_slots; // (rows, keys) per learnable input
  for (size_t n = 0; n < launch.inputs.size(); ++n) {
    const TritonInput &declared = launch.inputs[n];
    if (!declared.learnable) {
      table_slots.emplace_back();
      continue;
    }
    const int64_t numel = t.tables[n].numel();
    table_slots.emplace_back(torch::zeros({p.B * p.H * row_blocks, numel}, f32),
                             torch::zeros({p.B * H_KV * key_blocks, numel}, f32));
    prep["d" + declared.arg] = triton_ptr(table_slots.back().first);
    dkdv["d" + declared.arg] = triton_ptr(table_slots.back().second);
  }
  // The launch description's backward (abi.h): rows first, attn_bwd_dq writes Delta and
  // the tile states (row states per key tile) that attn_bwd_dkdv then reads.
  std::vector<Tensor> tile_states;
  for (const std::string &name : launch.backward.tile_states) {
    tile_states.push_back(torch::zeros({p.B * p.H, key_blocks, p.Nq}, f32));
    dkdv[name] = dqk[name] = triton_ptr(tile_states.back());
  }
  if (launch.backward.rows_first) {
    launch_triton(lib, p, TritonKernel::BackwardQueries, t, dqk);
    launch_triton(lib, p, TritonKernel::BackwardKeys, t, dkdv);
  } else {
    launch_triton(lib, p, TritonKernel::BackwardPreprocess, t, prep);
    launch_triton(lib, p, TritonKernel::BackwardKeys, t, dkdv);
    launch_triton(lib, p, TritonKernel::BackwardQueries, t, dqk);
  }
  // Sums in float64 over a fixed shape: deterministic reductions.
  Tensor dparams = (row_slots.to(torch::kDouble).sum(c10::IntArrayRef{0, 1}) +
                    key_slots.to(torch::kDouble).sum(c10::IntArrayRef{0, 1}))
                       .narrow(0, 0, p.P)
                       .to(params.scalar_type());
  std::vector<Tensor> dinputs;
  const auto &manifest_inputs = lib.manifest().inputs;
  for (size_t n = 0; n < manifest_inputs.size(); ++n) {
    const auto it = std::find_if(launch.inputs.begin(), launch.inputs.end(),
                                 [&](const TritonInput &d) { return d.name == manifest_inputs[n].name; });
    const auto &[rows, keys] = table_slots[static_cast<size_t>(it - launch.inputs.begin())];
    dinputs.push_back(
        rows.defined()
            ? (rows.to(torch::kDouble).sum(0) + keys.to(torch::kDouble).sum(0))
                  .view(inputs[n].sizes())
                  .to(inputs[n].scalar_type())
            : torch::empty({0}, q.options()));
  }
  return {dq, dk, dv, dparams, dinputs};
}

} // namespace detail
} // namespace attn
