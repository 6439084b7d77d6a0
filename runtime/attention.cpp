//===- attention.cpp - validation, dispatch and autograd ------------------===//
//
// No attention math here: inputs are validated, memref descriptors are filled
// from tensor views, and the artifact's entry points are called in parallel.
//
//===----------------------------------------------------------------------===//
#include "attn/partial.h"
#include "attn/runtime.h"
#include "cuda_driver.h"
#include "internal.h"
#include "work_sharing.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <memory>
#include <sstream>

namespace attn {

namespace {

using torch::Tensor;

std::string join(const std::vector<std::string> &items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? " " : "") + items[i];
  return out;
}

std::string dtype_name(torch::ScalarType t) {
  switch (t) {
  case torch::kFloat:
    return "float32";
  case torch::kDouble:
    return "float64";
  case torch::kHalf:
    return "float16";
  case torch::kBFloat16:
    return "bfloat16";
  case torch::kLong:
    return "int64";
  case torch::kInt:
    return "int32";
  case torch::kChar:
    return "int8";
  default:
    return c10::toString(t);
  }
}

std::string shape_str(const Tensor &t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

std::string param_list(const Library &lib) {
  const auto &names = lib.manifest().param_names;
  if (names.empty())
    return "none";
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i ? ", " : "") + names[i];
    const auto &shape = lib.manifest().param_shapes[i];
    for (size_t e = 0; e < shape.size(); ++e)
      out += (e ? "x" : "[") + std::to_string(shape[e]) + (e + 1 == shape.size() ? "]" : "");
  }
  return out;
}

/// Everything the dispatch needs, established by validate().
struct Problem {
  int64_t B = 0, H = 0, Nq = 0, Nk = 0, d = 0, dv = 0, P = 0;
  /// Grouped-query attention: k and v have H / group heads, query head h reads key/value
  /// head h / group (1: as many heads as q).
  int64_t group = 1;
  torch::ScalarType dtype = torch::kFloat;
  torch::Device device{torch::kCPU};
  bool causal = false;
  std::vector<int64_t> kv_len; // [B]
  Tensor key_lengths;          // GPU only: kv_len as int64 [B] on the device
  /// The absolute positions of q's row 0 per batch entry ([B]) and of k's row 0.
  std::vector<int64_t> query_start;
  int64_t key_start = 0;
  Tensor query_starts; // GPU only: query_start as int64 [B] on the device

  /// The positions a tensor input's dim named Nq (Nk) spans: up to the call's last query (key).
  int64_t query_positions() const {
    return Nq + *std::max_element(query_start.begin(), query_start.end());
  }
  int64_t key_positions() const { return Nk + key_start; }
  /// 1: the backward sees every key one index later, at [1, kv_len + 1), so that no
  /// call has kv_begin = 0 and none takes the row offset's share (abi.h): a key block
  /// of context parallelism other than the one that takes it (attention_partial_backward).
  /// The entry points get key_start - key_shift: the regions still see key row r at
  /// position key_start + r.
  int64_t key_shift = 0;
  /// Context parallelism's blocks: a tensor input's dim named Nq or Nk may span more
  /// positions than the call's (the whole sequence's table), since a block's regions
  /// read it at both i and j.
  bool whole_sequence_tables = false;

  bool cuda() const { return device.is_cuda(); }
  /// The dtype of row_max / row_sum: q's on the CPU, float32 on the GPU (the GPU
  /// kernels accumulate in float32 whatever the input dtype).
  torch::ScalarType stats_dtype() const { return cuda() ? torch::kFloat : dtype; }

  /// The key/value head that query head h reads.
  int64_t kv_head(int64_t h) const { return h / group; }

  /// Sizes read off q [B, H, Nq, d], k [B, H_kv, Nk, d] and v [B, H_kv, Nk, dv].
  static Problem of(const Tensor &q, const Tensor &k, const Tensor &v) {
    Problem p;
    p.B = q.size(0);
    p.H = q.size(1);
    p.Nq = q.size(2);
    p.d = q.size(3);
    p.Nk = k.size(2);
    p.dv = v.size(3);
    p.group = k.size(1) > 0 && p.H >= k.size(1) && p.H % k.size(1) == 0 ? p.H / k.size(1) : 1;
    p.dtype = q.scalar_type();
    p.device = q.device();
    return p;
  }
};

void check_tensor(const Library &lib, const char *fn, const char *name, const Tensor &t,
                  const char *expected_shape) {
  TORCH_CHECK(t.defined(), fn, ": ", name, " is None (an undefined tensor), expected a tensor ",
              expected_shape);
  TORCH_CHECK(t.layout() == torch::kStrided, fn, ": ", name, " has layout ", t.layout(),
              ", expected a dense (strided) tensor ", expected_shape);
  const auto &devices = lib.manifest().devices;
  if (t.device().is_cpu()) {
    TORCH_CHECK(lib.has_device("cpu"), fn, ": ", name, " is a CPU tensor but artifact ",
                lib.path(), " has no CPU code (devices: ", join(devices), ")");
    return;
  }
  if (t.is_cuda()) {
    TORCH_CHECK(lib.has_device("cuda"), fn, ": ", name, " is on ", t.device(), " but artifact ",
                lib.path(), " was compiled without CUDA code (devices: ", join(devices),
                "); recompile with attn-compile --cuda-targets=sm_XY,... (e.g. "
                "--cuda-targets=sm_80,sm_90) or pass CPU tensors");
    return;
  }
  const char *expected = !lib.has_device("cuda")  ? "a CPU tensor"
                         : !lib.has_device("cpu") ? "a CUDA tensor"
                                                  : "a CPU or CUDA tensor";
  TORCH_CHECK(false, fn, ": ", name, " is on device ", t.device(), ", expected ", expected,
              " (artifact devices: ", join(devices), ")");
}

/// The dtypes of the artifact's GPU kernels, e.g. "f16 bf16 f32".
std::string cuda_dtypes(const Library &lib) {
  std::vector<std::string> tags;
  for (const auto &pair : lib.manifest().triton_kernels)
    if (std::find(tags.begin(), tags.end(), pair.first) == tags.end())
      tags.push_back(pair.first);
  return join(tags);
}

/// The head dims with a forward GPU kernel for dtype tag `tag`, e.g. "64 128".
std::string cuda_head_dims(const Library &lib, const std::string &tag) {
  std::vector<std::string> dims;
  for (const auto &[dtype, head_dim] : lib.manifest().triton_kernels)
    if (dtype == tag)
      dims.push_back(std::to_string(head_dim));
  return dims.empty() ? "none" : join(dims);
}

void check_rank(const char *fn, const char *name, const Tensor &t, int64_t rank,
                const char *expected_shape) {
  TORCH_CHECK(t.dim() == rank, fn, ": ", name, " must be a ", rank, "-D tensor ",
              expected_shape, ", got a ", t.dim(), "-D tensor of shape ", shape_str(t));
}

void check_dtype(const char *fn, const char *name, const Tensor &t, torch::ScalarType want,
                 const char *why) {
  TORCH_CHECK(t.scalar_type() == want, fn, ": ", name, " has dtype ", dtype_name(t.scalar_type()),
              ", expected ", dtype_name(want), " (", why, ")");
}

void check_same_size(const char *fn, const char *what, const char *a, int64_t va, const char *b,
                     int64_t vb, const Tensor &ta, const Tensor &tb) {
  TORCH_CHECK(va == vb, fn, ": ", what, " of ", a, " and ", b, " must agree, got ", va, " (", a,
              " has shape ", shape_str(ta), ") and ", vb, " (", b, " has shape ", shape_str(tb),
              ")");
}

/// "slopes float [?]": how an input line reads, for messages.
std::string input_doc(const TensorInput &input) {
  std::string extents;
  for (size_t d = 0; d < input.shape.size(); ++d)
    extents += (d ? ", " : "") + (!input.dims[d].empty() ? input.dims[d]
                                  : input.shape[d] < 0   ? std::string("?")
                                                         : std::to_string(input.shape[d]));
  return input.name + " (" + input.element + " [" + extents + "]" +
         (input.learnable ? ", learnable" : "") + ")";
}

/// The size of the call's dimension `name` (an extent an input line names) and what it is.
std::pair<int64_t, const char *> call_dim(const Problem &p, const std::string &name) {
  if (name == "B")
    return {p.B, "the batch size of q"};
  if (name == "H")
    return {p.H, "the heads of q"};
  if (name == "Hkv")
    return {p.H / p.group, "the heads of k and v"};
  if (name == "Nq")
    return {p.query_positions(), "the positions up to q's last query: the largest query_start + "
                                 "Nq"};
  return {p.key_positions(), "the positions up to k's last key: key_start + Nk"};
}

/// The tensor inputs against the manifest's `input` lines: count, device (q's),
/// rank, static and named extents, extents >= 1, dtype (float: q's).
void check_inputs(const Library &lib, const char *fn, const std::vector<Tensor> &inputs,
                  const Tensor &q, const Problem &p) {
  const auto &declared = lib.manifest().inputs;
  std::string all;
  for (const auto &input : declared)
    all += (all.empty() ? "" : ", ") + input_doc(input);
  TORCH_CHECK(inputs.size() == declared.size(), fn, ": kernel ", lib.manifest().kernel, " takes ",
              declared.size(), " tensor input(s)", declared.empty() ? "" : " (" + all + ")",
              ", got ", inputs.size());
  for (size_t n = 0; n < inputs.size(); ++n) {
    const TensorInput &want = declared[n];
    const Tensor &t = inputs[n];
    const std::string name = "input " + want.name;
    const std::string doc = input_doc(want);
    TORCH_CHECK(t.defined() && t.layout() == torch::kStrided, fn, ": ", name,
                " must be a dense tensor, expected ", doc);
    TORCH_CHECK(t.device() == q.device(), fn, ": ", name, " is on ", t.device(), ", expected ",
                q.device(), " (the device of q)");
    TORCH_CHECK(t.dim() == static_cast<int64_t>(want.shape.size()), fn, ": ", name, " must be a ",
                want.shape.size(), "-D tensor, expected ", doc, ", got shape ", shape_str(t));
    for (int64_t d = 0; d < t.dim(); ++d) {
      TORCH_CHECK(want.shape[d] < 0 || t.size(d) == want.shape[d], fn, ": ", name,
                  " has extent ", t.size(d), " in dim ", d, ", expected ", doc, ", got shape ",
                  shape_str(t));
      TORCH_CHECK(t.size(d) >= 1, fn, ": ", name, " has an empty dim ", d,
                  " (reads are clamped to the extents, which must be >= 1), got shape ",
                  shape_str(t));
      if (!want.dims[d].empty()) {
        const auto [size, what] = call_dim(p, want.dims[d]);
        const bool at_least =
            p.whole_sequence_tables && (want.dims[d] == "Nq" || want.dims[d] == "Nk");
        TORCH_CHECK(at_least ? t.size(d) >= size : t.size(d) == size, fn, ": ", name,
                    " has extent ", t.size(d), " in dim ", d, ", expected ",
                    at_least ? "at least " : "", want.dims[d], " = ", size, " (", what,
                    "; declared ", doc, "), got shape ", shape_str(t));
      }
    }
    const torch::ScalarType element = want.element == "float" ? q.scalar_type()
                                      : want.element == "i8"  ? torch::kChar
                                      : want.element == "i32" ? torch::kInt
                                                              : torch::kLong;
    const std::string why = want.element == "float" ? "a float input has the dtype of q"
                                                     : "the manifest's " + want.element;
    check_dtype(fn, name.c_str(), t, element, why.c_str());
  }
}

/// query_start (an int64 0-d or [B] tensor, default 0) and key_start (>= 0) into p;
/// the backends that take no positions (kernelised, the hand-built CUDA kernels) need 0.
void check_positions(const Library &lib, const char *fn, const Options &opts, const Tensor &q,
                     Problem &p) {
  p.query_start.assign(static_cast<size_t>(p.B), 0);
  if (opts.query_start.has_value() && opts.query_start->defined()) {
    const Tensor &qs = *opts.query_start;
    TORCH_CHECK(qs.layout() == torch::kStrided &&
                    (qs.device().is_cpu() || qs.device() == q.device()),
                fn, ": query_start must be a dense int64 tensor (0-d or [B]) on the CPU or the "
                "device of q, got a tensor on ", qs.device());
    TORCH_CHECK(qs.scalar_type() == torch::kLong, fn, ": query_start has dtype ",
                dtype_name(qs.scalar_type()), ", expected int64");
    TORCH_CHECK(qs.dim() == 0 || (qs.dim() == 1 && qs.size(0) == p.B), fn,
                ": query_start must be 0-d or have shape [B] = [", p.B, "], got shape ",
                shape_str(qs));
    const Tensor values = qs.to(torch::kCPU).reshape({-1}).expand({p.B}).contiguous();
    const int64_t *data = values.data_ptr<int64_t>();
    for (int64_t b = 0; b < p.B; ++b) {
      TORCH_CHECK(data[b] >= 0, fn, ": query_start[", b, "] = ", data[b],
                  ", expected a position >= 0");
      p.query_start[static_cast<size_t>(b)] = data[b];
    }
  }
  TORCH_CHECK(opts.key_start >= 0, fn, ": key_start = ", opts.key_start,
              ", expected a position >= 0");
  p.key_start = opts.key_start;
  const bool shifted = p.key_start != 0 || std::any_of(p.query_start.begin(), p.query_start.end(),
                                                       [](int64_t s) { return s != 0; });
  TORCH_CHECK(!shifted || lib.manifest().algorithm != "kernelised", fn, ": kernel ",
              lib.manifest().kernel, " is kernelised (the linear-time form), which takes no "
              "query_start or key_start: call it with the whole sequence");
  TORCH_CHECK(!shifted || !p.cuda() || lib.triton(), fn, ": the hand-built GPU kernels of ",
              lib.path(), " take no query_start or key_start: compile with "
              "--gpu-backend=triton, or run on the CPU");
}

/// The kernels always take key_lengths: Nk for every batch entry when none was given.
Tensor device_key_lengths(const Problem &p) {
  return torch::tensor(p.kv_len, torch::TensorOptions().dtype(torch::kLong)).to(p.device);
}

Problem validate(const Library &lib, const char *fn, const Tensor &q, const Tensor &k,
                 const Tensor &v, const Tensor &params, const Options &opts,
                 bool whole_sequence_tables = false) {
  check_tensor(lib, fn, "q", q, "[B, H, Nq, d]");
  check_tensor(lib, fn, "k", k, "[B, H_kv, Nk, d]");
  check_tensor(lib, fn, "v", v, "[B, H_kv, Nk, dv]");
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(), fn,
              ": q, k and v must be on the same device, got ", q.device(), ", ", k.device(), ", ",
              v.device());

  const auto dt = q.scalar_type();
  const auto &mdtypes = lib.manifest().dtypes;
  const bool cuda = q.is_cuda();
  if (cuda) {
    const char *tag = detail::cuda_dtype_tag(dt);
    const auto &pairs = lib.manifest().triton_kernels;
    const bool compiled = tag && std::any_of(pairs.begin(), pairs.end(),
                                             [&](const auto &pair) { return pair.first == tag; });
    TORCH_CHECK(compiled, fn, ": q has dtype ", dtype_name(dt), " but the GPU kernels of artifact ",
                lib.path(), " are for dtypes ", cuda_dtypes(lib),
                " only (f32 = float32, f16 = float16, bf16 = bfloat16; attn-compile "
                "--cuda-dtypes chooses them)");
  } else {
    TORCH_CHECK(dt == torch::kFloat || dt == torch::kDouble, fn, ": q has dtype ",
                dtype_name(dt), ", expected float32 or float64 on the CPU (artifact ",
                lib.path(), " dtypes: ", join(mdtypes), ")");
    TORCH_CHECK(lib.has_dtype(dt), fn, ": q has dtype ", dtype_name(dt), " but artifact ",
                lib.path(), " was compiled for dtypes ", join(mdtypes), " only",
                " (f32 = float32, f64 = float64)");
  }
  check_dtype(fn, "k", k, dt, "the dtype of q");
  check_dtype(fn, "v", v, dt, "the dtype of q");

  check_rank(fn, "q", q, 4, "[B, H, Nq, d]");
  check_rank(fn, "k", k, 4, "[B, H_kv, Nk, d]");
  check_rank(fn, "v", v, 4, "[B, H_kv, Nk, dv]");
  Problem p = Problem::of(q, k, v);
  check_same_size(fn, "batch size (dim 0)", "q", p.B, "k", k.size(0), q, k);
  check_same_size(fn, "batch size (dim 0)", "q", p.B, "v", v.size(0), q, v);
  check_same_size(fn, "head count (dim 1)", "k", k.size(1), "v", v.size(1), k, v);
  // 0 query heads against 2 is no group: H / H_kv would be 0 and nothing would divide by it.
  TORCH_CHECK(k.size(1) == p.H || (k.size(1) >= 1 && p.H >= k.size(1) && p.H % k.size(1) == 0),
              fn, ": q has ", p.H,
              " heads and k and v have ", k.size(1), " (dim 1): the query heads must be a "
              "multiple of the key/value heads (grouped-query attention: query head h reads "
              "key/value head h / (H / H_kv)), got q of shape ", shape_str(q), " and k of shape ",
              shape_str(k));
  check_same_size(fn, "head dim d (dim 3)", "q", p.d, "k", k.size(3), q, k);
  check_same_size(fn, "key count Nk (dim 2)", "k", p.Nk, "v", v.size(2), k, v);
  TORCH_CHECK(p.Nq >= 1, fn, ": q must have at least one query (Nq >= 1), got shape ",
              shape_str(q));
  TORCH_CHECK(p.Nk >= 1, fn, ": k and v must have at least one key (Nk >= 1), got k of shape ",
              shape_str(k));
  TORCH_CHECK(p.d >= 1, fn, ": head dim d must be >= 1, got q of shape ", shape_str(q));
  TORCH_CHECK(p.dv >= 1, fn, ": value dim dv must be >= 1, got v of shape ", shape_str(v));
  TORCH_CHECK(!lib.manifest().head_dim || p.d == lib.manifest().head_dim, fn, ": q has head dim ",
              p.d, " but kernel ", lib.manifest().kernel, " was compiled for head dim ",
              lib.manifest().head_dim, " (its weights' shapes fix it: ", param_list(lib), ")");
  if (cuda) {
    TORCH_CHECK(p.dv == p.d, fn, ": the GPU kernels need dv == d (v's head dim equal to q's "
                "and k's), got d = ", p.d, " and dv = ", p.dv);
    const std::string tag = detail::cuda_dtype_tag(dt);
    const auto &pairs = lib.manifest().triton_kernels;
    TORCH_CHECK(std::any_of(pairs.begin(), pairs.end(),
                            [&](const auto &pair) { return pair.first == tag && pair.second == p.d; }),
                fn, ": head dim d = ", p.d, " is not supported on the GPU by artifact ", lib.path(),
                " for ", dtype_name(dt), ": supported head dims: ", cuda_head_dims(lib, tag));
  }

  p.P = lib.num_params();
  if (params.defined()) {
    check_tensor(lib, fn, "params", params, "[P]");
    TORCH_CHECK(params.device() == q.device(), fn, ": params is on ", params.device(),
                ", expected ", q.device(), " (the device of q)");
    TORCH_CHECK(params.dim() == 1, fn, ": params must be a 1-D tensor [P] with P = ", p.P,
                " (", param_list(lib), "), got a ", params.dim(), "-D tensor of shape ",
                shape_str(params));
    TORCH_CHECK(params.numel() == p.P, fn, ": params has ", params.numel(),
                " elements, expected ", p.P, " (kernel ", lib.manifest().kernel,
                " parameters: ", param_list(lib), ")");
    if (!(cuda && params.scalar_type() == torch::kFloat))
      check_dtype(fn, "params", params, dt,
                  cuda ? "the dtype of q, or float32" : "the dtype of q");
  } else {
    TORCH_CHECK(p.P == 0, fn, ": params is None (an undefined tensor), expected a ", dtype_name(dt), " tensor [",
                p.P, "] (kernel ", lib.manifest().kernel, " parameters: ", param_list(lib),
                "; Library::initial_params() gives their initial values)");
  }

  check_positions(lib, fn, opts, q, p);
  p.whole_sequence_tables = whole_sequence_tables;
  check_inputs(lib, fn, opts.inputs, q, p);

  p.causal = opts.is_causal;
  p.kv_len.assign(static_cast<size_t>(p.B), p.Nk);
  if (opts.key_lengths.has_value() && opts.key_lengths->defined()) {
    const Tensor &kl = *opts.key_lengths;
    TORCH_CHECK(kl.layout() == torch::kStrided &&
                    (kl.device().is_cpu() || (cuda && kl.device() == q.device())),
                fn, ": key_lengths must be a dense int64 tensor [B] on the CPU",
                cuda ? " or on the device of q" : "", ", got a tensor on ", kl.device());
    TORCH_CHECK(kl.scalar_type() == torch::kLong, fn, ": key_lengths has dtype ",
                dtype_name(kl.scalar_type()), ", expected int64");
    TORCH_CHECK(kl.dim() == 1 && kl.size(0) == p.B, fn, ": key_lengths must have shape [B] = [",
                p.B, "], got shape ", shape_str(kl));
    Tensor klc = kl.to(torch::kCPU).contiguous(); // the range check reads the values
    const int64_t *data = klc.data_ptr<int64_t>();
    for (int64_t b = 0; b < p.B; ++b) {
      TORCH_CHECK(data[b] >= 0 && data[b] <= p.Nk, fn, ": key_lengths[", b, "] = ", data[b],
                  ", expected a value in [0, Nk] = [0, ", p.Nk, "]");
      p.kv_len[static_cast<size_t>(b)] = data[b];
    }
  }
  if (cuda) {
    p.key_lengths = device_key_lengths(p);
    p.query_starts =
        torch::tensor(p.query_start, torch::TensorOptions().dtype(torch::kLong)).to(p.device);
  }
  return p;
}

/// Check a forward-produced or gradient tensor against the problem.
void check_aux(const Library &lib, const char *fn, const char *name, const Tensor &t,
               const Problem &p, std::vector<int64_t> shape, const char *shape_doc,
               bool row_stats = false) {
  check_tensor(lib, fn, name, t, shape_doc);
  TORCH_CHECK(t.device() == p.device, fn, ": ", name, " is on ", t.device(), ", expected ",
              p.device, " (the device of q)");
  TORCH_CHECK(t.sizes() == c10::IntArrayRef(shape), fn, ": ", name, " must have shape ",
              c10::IntArrayRef(shape), " ", shape_doc, ", got ", shape_str(t));
  if (row_stats)
    check_dtype(fn, name, t, p.stats_dtype(),
                p.cuda() ? "row statistics are float32 on the GPU" : "the dtype of q");
  else
    check_dtype(fn, name, t, p.dtype, "the dtype of q");
}

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

} // namespace

int64_t forward_rows_per_call(int64_t heads, int64_t queries, int64_t threads) {
  const int64_t items_per_head = std::max<int64_t>(
      1, (kItemsPerThread * threads + heads - 1) / std::max<int64_t>(heads, 1));
  const int64_t blocks = (queries + items_per_head * kQueryBlock - 1) / (items_per_head * kQueryBlock);
  return std::max<int64_t>(1, blocks) * kQueryBlock;
}

namespace {
/// Splits per item for `items` items on `threads` threads, at most `most`: 1 when
/// there are kItemsPerThread items per thread already, else enough for that many.
/// Threads take the calls as they finish, so a thread on a busy core (or with the
/// costlier rows of a mask) takes fewer: halves, one per thread, had waited for it.
int64_t balanced_splits(int64_t items, int64_t most, int64_t threads) {
  if (items <= 0 || threads <= 1 || items >= kItemsPerThread * threads)
    return 1;
  return std::max<int64_t>(1, std::min((kItemsPerThread * threads + items - 1) / items, most));
}
} // namespace

int64_t backward_query_splits(int64_t heads, int64_t queries, int64_t threads) {
  return balanced_splits(heads, queries / kQueryBlock, threads);
}

int64_t key_splits(int64_t items, int64_t keys, int64_t threads) {
  return balanced_splits(items, keys / kKeyBlock, threads);
}

int64_t query_split_begin(int64_t split, int64_t splits, int64_t queries, int64_t kv_len,
                          bool causal) {
  if (split <= 0)
    return 0;
  if (split >= splits)
    return queries;
  // Keys row i visits: kv_len, or min(i + 1, kv_len) when causal. Rows [0, r) cost
  // work(r); the split starts at the first r with work(r) >= split/splits of the whole.
  auto work = [&](int64_t r) -> double {
    if (!causal)
      return static_cast<double>(r) * static_cast<double>(kv_len);
    const double ramp = static_cast<double>(std::min(r, kv_len));
    return ramp * (ramp + 1) / 2 + static_cast<double>(r - std::min(r, kv_len)) * kv_len;
  };
  if (kv_len <= 0)
    return split * queries / splits;
  const double target = work(queries) * static_cast<double>(split) / static_cast<double>(splits);
  int64_t lo = 0, hi = queries;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (work(mid) >= target)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

namespace {

/// Keys [begin, end) of chunk `split` of `splits` over kv_len keys: boundaries on
/// kKeyBlock multiples, the last chunk ending at kv_len.
std::pair<int64_t, int64_t> key_chunk(int64_t split, int64_t splits, int64_t kv_len) {
  const int64_t blocks = (kv_len + kKeyBlock - 1) / kKeyBlock;
  return {std::min(kv_len, split * blocks / splits * kKeyBlock),
          std::min(kv_len, (split + 1) * blocks / splits * kKeyBlock)};
}

// --- GPU -----------------------------------------------------------------------
//
// The kernels and their parameters are the artifact's attn_triton_launch
// (detail::triton_launch orders the arguments by name); tensors go with their strides.

using detail::triton_float;
using detail::triton_int;
using detail::triton_ptr;

void add_strides(detail::TritonArgs &args, const char *prefix, const char *last,
                 const Tensor &t) {
  const char *axes[4] = {"b", "h", nullptr, "d"};
  for (int64_t d = 0; d < 4; ++d)
    args[std::string("stride_") + prefix + (d == 2 ? last : axes[d])] = triton_int(t.stride(d));
}

/// What every kernel of a problem reads: q, k, v and their strides, params (float32,
/// at least one element), key lengths and query starts (int32), the key start, the
/// sizes and the score scale.
struct TritonProblem {
  Tensor params32, lengths32, query_starts32;
  std::vector<Tensor> tables; // as the kernels read them (float tables in float32)
  detail::TritonSizes sizes;
  detail::TritonArgs common;
};

TritonProblem triton_problem(const Library &lib, const Problem &p, const Tensor &q,
                             const Tensor &k, const Tensor &v, const Tensor &params,
                             const std::vector<Tensor> &inputs) {
  TritonProblem t;
  auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(p.device);
  t.params32 = p.P ? params.to(f32).contiguous() : torch::zeros({1}, f32);
  t.lengths32 = p.key_lengths.to(torch::kInt);
  t.query_starts32 = p.query_starts.to(torch::kInt);
  t.sizes = {p.B, p.H, p.H / p.group, p.Nq, p.Nk};
  auto &a = t.common;
  a["Q"] = triton_ptr(q);
  a["K"] = triton_ptr(k);
  a["V"] = triton_ptr(v);
  a["Params"] = triton_ptr(t.params32);
  a["KeyLengths"] = triton_ptr(t.lengths32);
  a["QueryStarts"] = triton_ptr(t.query_starts32);
  a["KEY_START"] = triton_int(p.key_start);
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
  const char *tag = detail::cuda_dtype_tag(p.dtype);
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

void launch_triton(const Library &lib, const Problem &p, const char *kernel,
                   const TritonProblem &t, const detail::TritonArgs &own) {
  detail::TritonArgs args = t.common;
  for (const auto &[name, value] : own)
    args[name] = value;
  detail::triton_launch(lib, p.device, kernel, p.dtype, p.d, p.causal, t.sizes, args);
}

std::tuple<Tensor, Tensor, Tensor> run_forward_triton(const Library &lib, const Problem &p,
                                                      const Tensor &q, const Tensor &k,
                                                      const Tensor &v, const Tensor &params,
                                                      const std::vector<Tensor> &inputs) {
  const TritonProblem t = triton_problem(lib, p, q, k, v, params, inputs);
  auto stats = torch::TensorOptions().dtype(torch::kFloat).device(p.device);
  Tensor out = torch::empty({p.B, p.H, p.Nq, p.dv}, q.options());
  Tensor row_max = torch::empty({p.B, p.H, p.Nq}, stats);
  Tensor row_sum = torch::empty({p.B, p.H, p.Nq}, stats);
  detail::TritonArgs args{{"Out", triton_ptr(out)},
                          {"RowMax", triton_ptr(row_max)},
                          {"RowSum", triton_ptr(row_sum)}};
  add_strides(args, "o", "m", out);
  launch_triton(lib, p, "attn_fwd", t, args);
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
  auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(p.device);
  const int64_t H_KV = p.H / p.group, P = std::max<int64_t>(p.P, 1);
  // One slot per program of the kernels that write them: their grids' tile counts.
  const int64_t row_blocks =
      detail::triton_grid(lib, detail::triton_image(lib, p.device, "attn_bwd_preprocess",
                                                    p.dtype, p.d, p.causal),
                          t.sizes)[0];
  const int64_t key_blocks =
      detail::triton_grid(lib, detail::triton_image(lib, p.device, "attn_bwd_dkdv", p.dtype,
                                                    p.d, p.causal),
                          t.sizes)[0];
  Tensor delta = torch::empty({p.B, p.H, p.Nq}, f32);
  Tensor dq = torch::zeros_like(q), dk = torch::zeros_like(k), dv = torch::zeros_like(v);
  // One slot per program (and param, or table element): each program writes its own,
  // summed below in a fixed order, so the gradients are the same bits run to run.
  Tensor row_slots = torch::zeros({p.B * p.H, row_blocks, P}, f32);
  Tensor key_slots = torch::zeros({p.B * H_KV, key_blocks, P}, f32);
  detail::TritonArgs shared{{"RowMax", triton_ptr(row_max)},
                            {"RowSum", triton_ptr(row_sum)},
                            {"Delta", triton_ptr(delta)},
                            {"DOut", triton_ptr(grad_out)}};
  add_strides(shared, "do", "m", grad_out);
  detail::TritonArgs prep = shared, dkdv = shared, dqk = shared;
  prep["Out"] = triton_ptr(out);
  add_strides(prep, "o", "m", out);
  prep["DParamsRows"] = triton_ptr(row_slots);
  dkdv["DK"] = triton_ptr(dk);
  dkdv["DV"] = triton_ptr(dv);
  add_strides(dkdv, "dk", "n", dk);
  add_strides(dkdv, "dv", "n", dv);
  dkdv["DParamsKeys"] = triton_ptr(key_slots);
  dqk["DQ"] = triton_ptr(dq);
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
  launch_triton(lib, p, "attn_bwd_preprocess", t, prep);
  launch_triton(lib, p, "attn_bwd_dkdv", t, dkdv);
  launch_triton(lib, p, "attn_bwd_dq", t, dqk);
  // Sums in float64 over a fixed shape: deterministic reductions.
  Tensor dparams = (row_slots.to(torch::kDouble).sum({0, 1}) +
                    key_slots.to(torch::kDouble).sum({0, 1}))
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

// --- CPU ---------------------------------------------------------------------

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
  detail::parallel_items(p.B * p.H * blocks, [&](int64_t item) {
    const int64_t bh = item / blocks, q_begin = item % blocks * rows;
    f(bh / p.H, bh % p.H, q_begin, std::min(p.Nq, q_begin + rows));
  });
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

std::tuple<Tensor, Tensor, Tensor> run_forward(const Library &lib, const Problem &p,
                                               const Tensor &q_in, const Tensor &k_in,
                                               const Tensor &v_in, const Tensor &params_in,
                                               const std::vector<Tensor> &inputs) {
  if (p.cuda())
    return run_forward_triton(lib, p, q_in, k_in, v_in, params_in, inputs);
  attn_forward_fn fn = lib.forward_fn(p.dtype);
  const Tensor q = unit_inner_stride(q_in), k = unit_inner_stride(k_in),
               v = unit_inner_stride(v_in), params = unit_inner_stride(params_in);
  const std::vector<attn_table> tables = tables_of(inputs);
  auto opts = torch::TensorOptions().dtype(p.dtype).device(q.device());
  Tensor out = torch::empty({p.B, p.H, p.Nq, p.dv}, opts);
  Tensor row_max = torch::empty({p.B, p.H, p.Nq}, opts);
  Tensor row_sum = torch::empty({p.B, p.H, p.Nq}, opts);

  const int64_t BH = p.B * p.H;
  // A kernelised artifact builds the key state Σ φ(k) vᵀ in every call (O(Nk·d·dv)):
  // one call per head keeps the whole forward linear in N.
  const int64_t rows_per_item = lib.manifest().algorithm == "kernelised"
                                    ? std::max<int64_t>(p.Nq, 1)
                                    : forward_rows_per_call(BH, p.Nq, at::get_num_threads());
  const int64_t nqb = (p.Nq + rows_per_item - 1) / rows_per_item;
  // Few calls for the threads (one long decoder step, Nq = 1): each call's keys in
  // `kv_splits` chunks, whose states the artifact's merge entry folds (abi.h).
  attn_merge_fn merge = lib.merge_fn(p.dtype);
  const int64_t kv_splits =
      merge && lib.manifest().algorithm != "kernelised"
          ? key_splits(BH * nqb, p.Nk, at::get_num_threads())
          : 1;
  Tensor o_parts, max_parts, sum_parts, count_parts; // [B, H, kv_splits·Nq(, dv)]
  if (kv_splits > 1) {
    o_parts = torch::empty({p.B, p.H, kv_splits * p.Nq, p.dv}, opts);
    max_parts = torch::empty({p.B, p.H, kv_splits * p.Nq}, opts);
    sum_parts = torch::empty_like(max_parts);
    count_parts = torch::empty_like(max_parts);
  }
  const attn_memref1d pm = memref_params(params);
  const attn_table *table_ptr = tables.empty() ? nullptr : tables.data();
  detail::parallel_items(BH * nqb * kv_splits, [&](int64_t item) {
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
    attn_memref2d qm = memref2d(q, b, h), km = memref2d(k, b, p.kv_head(h)),
                  vm = memref2d(v, b, p.kv_head(h));
    attn_memref1d prm = pm;
    const int64_t q_begin = qb * rows_per_item;
    const int64_t q_end = std::min(p.Nq, q_begin + rows_per_item);
    const int64_t kv_len = p.kv_len[static_cast<size_t>(b)];
    if (kv_splits == 1) {
      attn_memref2d om = memref2d(out, b, h);
      attn_memref1d mm = memref1d(row_max, b, h), sm = memref1d(row_sum, b, h);
      attn_memref1d unused{nullptr, nullptr, 0, {0}, {1}};
      fn(&qm, &km, &vm, &om, &mm, &sm, &unused, &prm, table_ptr, b, h, q_begin, q_end, 0,
         kv_len, p.causal ? 1 : 0, 0, p.query_start[static_cast<size_t>(b)], p.key_start);
      return;
    }
    const auto [kv_begin, kv_end] = key_chunk(split, kv_splits, kv_len);
    // This chunk's rows of the parts: [split·Nq, (split + 1)·Nq).
    auto chunk = [&](const Tensor &parts) { return parts.narrow(2, split * p.Nq, p.Nq); };
    attn_memref2d om = memref2d(chunk(o_parts), b, h);
    attn_memref1d mm = memref1d(chunk(max_parts), b, h), sm = memref1d(chunk(sum_parts), b, h),
                  cm = memref1d(chunk(count_parts), b, h);
    fn(&qm, &km, &vm, &om, &mm, &sm, &cm, &prm, table_ptr, b, h, q_begin, q_end, kv_begin,
       kv_end, p.causal ? 1 : 0, 1, p.query_start[static_cast<size_t>(b)], p.key_start);
  });
  if (kv_splits > 1)
    return run_merge(lib, p, params, inputs, o_parts, max_parts, sum_parts, count_parts);
  return {out, row_max, row_sum};
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

std::tuple<Tensor, Tensor, Tensor, Tensor, std::vector<Tensor>>
run_backward(const Library &lib, const Problem &p, const Tensor &q_in, const Tensor &k_in,
             const Tensor &v_in, const Tensor &params_in, const std::vector<Tensor> &inputs,
             const Tensor &out_in, const Tensor &row_max_in, const Tensor &row_sum_in,
             const Tensor &grad_out_in) {
  if (p.cuda())
    return run_backward_triton(lib, p, q_in, k_in, v_in, params_in, inputs, out_in, row_max_in,
                               row_sum_in, grad_out_in);
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
  // kv_begin), summed in chunk order. A kernelised backward takes whole slices.
  const int64_t BH = p.B * p.H;
  const int64_t threads = at::get_num_threads();
  const bool kernelised = lib.manifest().algorithm == "kernelised";
  const int64_t splits = kernelised ? 1 : backward_query_splits(BH, p.Nq, threads);
  const int64_t kv_splits = kernelised || splits > 1 ? 1 : key_splits(BH, p.Nk, threads);
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

  // The calls run in `chunks` fixed sets, each in order, kItemsPerThread per thread,
  // that threads take as they finish (a thread on a busy core takes fewer): in
  // rounds of `chunks` calls, chunk c takes the c-th call of even rounds and the
  // c-th from the end of odd ones, so a ramp of work (a causal mask) evens out. A
  // learnable input's gradient gets one zeroed buffer per chunk that its calls add
  // to (abi.h: dtables), summed in chunk order: the same bits every run with the
  // same thread count, whichever thread ran a chunk, and chunks × the input's size
  // of memory, never B·H·N².
  const int64_t chunks =
      std::max<int64_t>(1, std::min<int64_t>(kItemsPerThread * threads, calls));
  const auto &declared = lib.manifest().inputs;
  std::vector<std::vector<Tensor>> parts(static_cast<size_t>(chunks));
  std::vector<std::vector<attn_table>> dtables(static_cast<size_t>(chunks));
  for (auto [part, dtable] = std::pair(parts.begin(), dtables.begin()); part != parts.end();
       ++part, ++dtable)
    for (size_t n = 0; n < inputs.size(); ++n) {
      part->push_back(declared[n].learnable
                          ? torch::zeros(inputs[n].sizes(), opts)
                          : Tensor());
      dtable->push_back(part->back().defined() ? table_of(part->back()) : attn_table{});
    }

  const attn_memref1d pm = memref_params(params);
  auto call = [&](int64_t item, const attn_table *chunk_dtables) {
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
       &dkm, &dvm, &dpm, chunk_dtables, b, h, q_begin, q_end, kv_begin + p.key_shift,
       kv_end + p.key_shift, p.causal ? 1 : 0, p.query_start[static_cast<size_t>(b)],
       p.key_start - p.key_shift);
  };
  detail::parallel_items(chunks, [&](int64_t c) {
    const std::vector<attn_table> &chunk = dtables[static_cast<size_t>(c)];
    for (int64_t round = 0; round * chunks < calls; ++round) {
      const int64_t item = round * chunks + (round % 2 == 0 ? c : chunks - 1 - c);
      if (item < calls)
        call(item, chunk.empty() ? nullptr : chunk.data());
    }
  });
  // A learnable input's gradient; an empty [0] tensor for the others.
  std::vector<Tensor> dinputs;
  for (size_t n = 0; n < inputs.size(); ++n) {
    Tensor total = parts[0][n];
    for (int64_t c = 1; c < chunks && total.defined(); ++c)
      total.add_(parts[static_cast<size_t>(c)][n]);
    dinputs.push_back(total.defined() ? total : torch::empty({0}, opts));
  }
  Tensor dparams = dparams_parts.sum(0);
  return {sum_splits(dq_parts), sum_groups(sum_splits(dk_parts), p),
          sum_groups(sum_splits(dv_parts), p), dparams, dinputs};
}

// --- one key block of context parallelism (attn/partial.h) ---------------------

/// The checks of a key block's call: CPU code with split-K entry points, and a block
/// that leaves the row offset's share to another one not at key position 0 (its keys
/// are seen one index later, so the entry points get key_start - 1).
void check_block(const Library &lib, const char *fn, const Problem &p, bool row_offset) {
  TORCH_CHECK(!p.cuda(), fn, ": the GPU kernels have no partial (split-K) mode; run "
              "context parallelism on CPU tensors");
  TORCH_CHECK(lib.manifest().algorithm != "kernelised", fn, ": kernel ", lib.manifest().kernel,
              " is kernelised (linear attention): its forward has no partial state to merge "
              "(abi.h), and context parallelism for it needs prefix sums of psi(k) v^T across "
              "ranks, which attn does not implement; run it on the whole sequence");
  TORCH_CHECK(row_offset || p.key_start > 0, fn, ": a block at key_start = 0 must take the "
              "row offset's share (row_offset=True): give it to each query row's block with "
              "the smallest key_start");
}

std::tuple<Tensor, Tensor, Tensor, Tensor>
run_partial_forward(const Library &lib, const Problem &p, const Tensor &q_in, const Tensor &k_in,
                    const Tensor &v_in, const Tensor &params_in, const std::vector<Tensor> &inputs) {
  attn_forward_fn fn = lib.forward_fn(p.dtype);
  const Tensor q = unit_inner_stride(q_in), k = unit_inner_stride(k_in),
               v = unit_inner_stride(v_in), params = unit_inner_stride(params_in);
  const std::vector<attn_table> tables = tables_of(inputs);
  auto opts = torch::TensorOptions().dtype(p.dtype).device(q.device());
  Tensor out = torch::empty({p.B, p.H, p.Nq, p.dv}, opts);
  Tensor row_max = torch::empty({p.B, p.H, p.Nq}, opts);
  Tensor row_sum = torch::empty_like(row_max), row_count = torch::empty_like(row_max);
  const attn_memref1d pm = memref_params(params);
  for_each_query_block(p, [&](int64_t b, int64_t h, int64_t q_begin, int64_t q_end) {
    attn_memref2d qm = memref2d(q, b, h), km = memref2d(k, b, p.kv_head(h)),
                  vm = memref2d(v, b, p.kv_head(h)), om = memref2d(out, b, h);
    attn_memref1d mm = memref1d(row_max, b, h), sm = memref1d(row_sum, b, h),
                  cm = memref1d(row_count, b, h), prm = pm;
    fn(&qm, &km, &vm, &om, &mm, &sm, &cm, &prm, tables.empty() ? nullptr : tables.data(), b, h,
       q_begin, q_end, 0, p.kv_len[static_cast<size_t>(b)], p.causal ? 1 : 0, 1,
       p.query_start[static_cast<size_t>(b)], p.key_start);
  });
  return {out, row_max, row_sum, row_count};
}


Tensor empty_params(const Tensor &params, const Tensor &q) {
  if (params.defined())
    return params;
  return torch::empty({0}, q.options());
}


} // namespace

namespace detail {
Tensor checked_params(const Library &lib, const char *fn, const Tensor &q, const Tensor &k,
                      const Tensor &v, const Tensor &params, const Options &opts) {
  if (params.defined() && q.defined() && k.defined() && v.defined())
    return params;
  validate(lib, fn, q, k, v, params, opts);
  return empty_params(params, q);
}
} // namespace detail

Tensor attention(const std::shared_ptr<const Library> &lib, const Tensor &q, const Tensor &k,
                 const Tensor &v, const Tensor &params, const Options &opts) {
  TORCH_CHECK(lib, "attn::attention: lib is null, expected a Library from attn::Library::load");
  return detail::attention_op().call(lib->path(), q, k, v, params, opts.is_causal,
                                     opts.key_lengths, std::optional<at::TensorList>(opts.inputs),
                                     opts.query_start, opts.key_start);
}

std::tuple<Tensor, Tensor, Tensor> attention_forward(const std::shared_ptr<const Library> &lib,
                                                     const Tensor &q, const Tensor &k,
                                                     const Tensor &v, const Tensor &params,
                                                     const Options &opts) {
  TORCH_CHECK(lib, "attn::attention_forward: lib is null, expected a Library from "
                   "attn::Library::load");
  Problem p = validate(*lib, "attn::attention_forward", q, k, v, params, opts);
  torch::NoGradGuard no_grad;
  return run_forward(*lib, p, q, k, v, empty_params(params, q), opts.inputs);
}

std::tuple<Tensor, Tensor, Tensor, Tensor, std::vector<Tensor>>
attention_backward(const std::shared_ptr<const Library> &lib, const Tensor &q, const Tensor &k,
                   const Tensor &v, const Tensor &params, const Tensor &out,
                   const Tensor &row_max, const Tensor &row_sum, const Tensor &grad_out,
                   const Options &opts) {
  const char *fn = "attn::attention_backward";
  TORCH_CHECK(lib, fn, ": lib is null, expected a Library from attn::Library::load");
  Problem p = validate(*lib, fn, q, k, v, params, opts);
  check_aux(*lib, fn, "out", out, p, {p.B, p.H, p.Nq, p.dv}, "[B, H, Nq, dv]");
  check_aux(*lib, fn, "row_max", row_max, p, {p.B, p.H, p.Nq}, "[B, H, Nq]", true);
  check_aux(*lib, fn, "row_sum", row_sum, p, {p.B, p.H, p.Nq}, "[B, H, Nq]", true);
  check_aux(*lib, fn, "grad_out", grad_out, p, {p.B, p.H, p.Nq, p.dv}, "[B, H, Nq, dv]");
  torch::NoGradGuard no_grad;
  return run_backward(*lib, p, q, k, v, empty_params(params, q), opts.inputs, out, row_max,
                      row_sum, grad_out);
}

std::tuple<Tensor, Tensor, Tensor, Tensor>
attention_partial_forward(const std::shared_ptr<const Library> &lib, const Tensor &q,
                          const Tensor &k, const Tensor &v, const Tensor &params,
                          const Options &opts) {
  const char *fn = "attn::attention_partial_forward";
  TORCH_CHECK(lib, fn, ": lib is null, expected a Library from attn::Library::load");
  Problem p = validate(*lib, fn, q, k, v, params, opts, true);
  check_block(*lib, fn, p, true);
  torch::NoGradGuard no_grad;
  return run_partial_forward(*lib, p, q, k, v, empty_params(params, q), opts.inputs);
}

std::tuple<Tensor, Tensor, Tensor>
attention_merge(const std::shared_ptr<const Library> &lib, const Tensor &q, const Tensor &k,
                const Tensor &v, const Tensor &params, const Tensor &o_parts,
                const Tensor &max_parts, const Tensor &sum_parts, const Tensor &count_parts,
                const Options &opts) {
  const char *fn = "attn::attention_merge";
  TORCH_CHECK(lib, fn, ": lib is null, expected a Library from attn::Library::load");
  Problem p = validate(*lib, fn, q, k, v, params, opts, true);
  check_block(*lib, fn, p, true);
  check_tensor(*lib, fn, "o_parts", o_parts, "[B, H, S*Nq, dv]");
  const int64_t splits = o_parts.dim() == 4 && p.Nq > 0 ? o_parts.size(2) / p.Nq : 0;
  TORCH_CHECK(splits >= 1 && o_parts.size(2) == splits * p.Nq, fn,
              ": o_parts must have shape [B, H, S*Nq, dv] with S >= 1 (the S partial states "
              "of q's ", p.Nq, " rows, state s in rows [s*Nq, (s+1)*Nq)), got ",
              shape_str(o_parts));
  check_aux(*lib, fn, "o_parts", o_parts, p, {p.B, p.H, splits * p.Nq, p.dv}, "[B, H, S*Nq, dv]");
  for (const auto &[name, t] : {std::pair<const char *, const Tensor &>{"max_parts", max_parts},
                                {"sum_parts", sum_parts},
                                {"count_parts", count_parts}})
    check_aux(*lib, fn, name, t, p, {p.B, p.H, splits * p.Nq}, "[B, H, S*Nq]");
  torch::NoGradGuard no_grad;
  return run_merge(*lib, p, empty_params(params, q), opts.inputs, o_parts, max_parts, sum_parts,
                   count_parts);
}

std::tuple<Tensor, Tensor, Tensor, Tensor, std::vector<Tensor>>
attention_partial_backward(const std::shared_ptr<const Library> &lib, const Tensor &q,
                           const Tensor &k, const Tensor &v, const Tensor &params,
                           const Tensor &out, const Tensor &row_max, const Tensor &row_sum,
                           const Tensor &grad_out, const Options &opts, bool row_offset) {
  const char *fn = "attn::attention_partial_backward";
  TORCH_CHECK(lib, fn, ": lib is null, expected a Library from attn::Library::load");
  Problem p = validate(*lib, fn, q, k, v, params, opts, true);
  check_block(*lib, fn, p, row_offset);
  check_aux(*lib, fn, "out", out, p, {p.B, p.H, p.Nq, p.dv}, "[B, H, Nq, dv]");
  check_aux(*lib, fn, "row_max", row_max, p, {p.B, p.H, p.Nq}, "[B, H, Nq]", true);
  check_aux(*lib, fn, "row_sum", row_sum, p, {p.B, p.H, p.Nq}, "[B, H, Nq]", true);
  check_aux(*lib, fn, "grad_out", grad_out, p, {p.B, p.H, p.Nq, p.dv}, "[B, H, Nq, dv]");
  p.key_shift = row_offset ? 0 : 1;
  torch::NoGradGuard no_grad;
  return run_backward(*lib, p, q, k, v, empty_params(params, q), opts.inputs, out, row_max,
                      row_sum, grad_out);
}

} // namespace attn
