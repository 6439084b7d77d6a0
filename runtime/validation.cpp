//===- validation.cpp - a call's arguments against its artifact ----------===//
//
// Every check of an entry point's tensors and options, before any kernel runs: bad
// input gets an error naming the argument, what was expected and what was given.
//
//===----------------------------------------------------------------------===//
#include "validation.h"
#include "internal.h"

#include <algorithm>
#include <functional>
#include <sstream>

namespace attn {
namespace detail {
namespace {

using torch::Tensor;

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
  return {p.key_positions(), "the positions up to k's last key: the largest key_start + Nk"};
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

/// The start positions `name` gives per batch entry: a dense int64 0-d or [B] tensor on
/// the CPU or q's device, every value >= 0.
std::vector<int64_t> batch_starts(const char *fn, const char *name, const Tensor &starts,
                                  const Tensor &q, int64_t B) {
  TORCH_CHECK(starts.layout() == torch::kStrided &&
                  (starts.device().is_cpu() || starts.device() == q.device()),
              fn, ": ", name, " must be a dense int64 tensor (0-d or [B]) on the CPU or the "
              "device of q, got a tensor on ", starts.device());
  TORCH_CHECK(starts.scalar_type() == torch::kLong, fn, ": ", name, " has dtype ",
              dtype_name(starts.scalar_type()), ", expected int64");
  TORCH_CHECK(starts.dim() == 0 || (starts.dim() == 1 && starts.size(0) == B), fn, ": ", name,
              " must be 0-d or have shape [B] = [", B, "], got shape ", shape_str(starts));
  const Tensor values = starts.to(torch::kCPU).reshape({-1}).expand({B}).contiguous();
  const int64_t *data = values.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    TORCH_CHECK(data[b] >= 0, fn, ": ", name, "[", b, "] = ", data[b],
                ", expected a position >= 0");
  return {data, data + B};
}

/// query_start (an int64 0-d or [B] tensor, default 0) and key_start (an int >= 0) or
/// key_starts (an int64 0-d or [B] tensor) into p; the backends that take no positions
/// (kernelised, the hand-built CUDA kernels) need 0.
void check_positions(const Library &lib, const char *fn, const Options &opts, const Tensor &q,
                     Problem &p) {
  auto given = [](const c10::optional<Tensor> &t) { return t.has_value() && t->defined(); };
  p.query_start = given(opts.query_start)
                      ? batch_starts(fn, "query_start", *opts.query_start, q, p.B)
                      : std::vector<int64_t>(static_cast<size_t>(p.B), 0);
  TORCH_CHECK(opts.key_start >= 0, fn, ": key_start = ", opts.key_start,
              ", expected a position >= 0");
  TORCH_CHECK(opts.key_start == 0 || !given(opts.key_starts), fn, ": key_start = ",
              opts.key_start, " and key_starts (a tensor) both given: pass the keys' start "
              "positions once, as an int (key_start) or per batch entry (key_starts)");
  p.key_start = given(opts.key_starts)
                    ? batch_starts(fn, "key_start", *opts.key_starts, q, p.B)
                    : std::vector<int64_t>(static_cast<size_t>(p.B), opts.key_start);
  auto nonzero = [](const std::vector<int64_t> &starts) {
    return std::any_of(starts.begin(), starts.end(), [](int64_t s) { return s != 0; });
  };
  const bool shifted = nonzero(p.query_start) || nonzero(p.key_start);
  TORCH_CHECK(!shifted || lib.manifest().splits.forward != SliceSplit::Whole, fn, ": kernel ",
              lib.manifest().kernel, " is kernelised (the linear-time form), which takes no "
              "query_start or key_start: call it with the whole sequence");
  TORCH_CHECK(!shifted || !p.cuda() || lib.triton(), fn, ": the hand-built GPU kernels of ",
              lib.path(), " take no query_start or key_start: compile with "
              "--gpu-backend=triton, or run on the CPU");
}

/// `values` as an int64 tensor on `device` without draining its stream: a copy from
/// pageable host memory first waits for the stream's work (CUDA's synchronisation rules),
/// which would serialise every call with the kernels before it. Equal values become a
/// fill, others an asynchronous copy from pinned memory.
Tensor device_int64(const std::vector<int64_t> &values, const torch::Device &device) {
  const auto int64 = torch::TensorOptions().dtype(torch::kLong);
  if (std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) == values.end())
    return torch::full({static_cast<int64_t>(values.size())}, values.empty() ? 0 : values[0],
                       int64.device(device));
  return torch::tensor(values, int64).pin_memory().to(device, /*non_blocking=*/true);
}

} // namespace

std::string shape_str(const Tensor &t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

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

Problem validate(const Library &lib, const char *fn, const Tensor &q, const Tensor &k,
                 const Tensor &v, const Tensor &params, const Options &opts,
                 bool whole_sequence_tables) {
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
    const char *tag = cuda_dtype_tag(dt);
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
    const std::string tag = cuda_dtype_tag(dt);
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
  if (cuda) { // the kernels always take key lengths: Nk per batch entry when none was given
    p.key_lengths = device_int64(p.kv_len, p.device);
    p.query_starts = device_int64(p.query_start, p.device);
    p.key_starts = device_int64(p.key_start, p.device);
  }
  return p;
}

/// Check a forward-produced or gradient tensor against the problem.
void check_aux(const Library &lib, const char *fn, const char *name, const Tensor &t,
               const Problem &p, std::vector<int64_t> shape, const char *shape_doc,
               bool row_stats) {
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

namespace {
/// Why an artifact has no partial calls (its manifest's splits.partial_calls is false),
/// in the words of its algorithm: the name explains the refusal, never decides it.
std::string without_partial_calls(const Manifest &m) {
  if (m.algorithm == "kernelised")
    return " is kernelised (linear attention): its forward has no partial state to merge "
           "(abi.h), and context parallelism for it needs prefix sums of psi(k) v^T across "
           "ranks, which attn does not implement; run it on the whole sequence";
  if (m.algorithm == "implicit")
    return " is implicit (its threshold tau_i is solved over all of a row's keys), so a key "
           "block has no partial state to merge; run it on the whole sequence";
  if (m.algorithm == "scan")
    return " is a scan (stick-breaking): the backward of a key block needs the suffix sums "
           "of the blocks after it, which no partial call carries (only the forward's keys "
           "split, within attn's own calls); run it on the whole sequence";
  return " takes no key blocks from its caller (its manifest's splits.partial_calls is "
         "false); run it on the whole sequence";
}
} // namespace

/// The checks of a key block's call: CPU code with split-K entry points, and a block
/// that leaves the row offset's share to another one not at key position 0 (its keys
/// are seen one index later, so the entry points get key_start - 1).
void check_block(const Library &lib, const char *fn, const Problem &p, bool row_offset) {
  TORCH_CHECK(!p.cuda(), fn, ": the GPU kernels have no partial (split-K) mode; run "
              "context parallelism on CPU tensors");
  TORCH_CHECK(lib.manifest().splits.partial_calls, fn, ": kernel ", lib.manifest().kernel,
              without_partial_calls(lib.manifest()));
  TORCH_CHECK(row_offset || std::all_of(p.key_start.begin(), p.key_start.end(),
                                       [](int64_t s) { return s > 0; }),
              fn, ": a block at key_start = 0 must take the "
              "row offset's share (row_offset=True): give it to each query row's block with "
              "the smallest key_start");
}

} // namespace detail
} // namespace attn
