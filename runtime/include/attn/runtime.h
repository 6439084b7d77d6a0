//===- runtime.h - LibTorch runtime for attn-compile artifacts --*- C++ -*-===//
//
// Loads artifacts produced by `attn-compile` (the C ABI in attn/abi.h), validates
// their manifest and calls their entry points from LibTorch, with autograd.
//
// The runtime holds no attention math: it validates inputs, loads artifacts and
// dispatches / parallelises calls (at::parallel_for) to the artifact's kernels.
// Every bad input raises c10::Error (a RuntimeError in Python) naming the argument,
// what was expected and what was found.
//
// The same library registers TORCH_LIBRARY(attn) ops (runtime/ops.cpp), with CPU, CUDA
// and Autograd kernels and fake implementations in the Python module attn.ops:
//   attention(str artifact, Tensor q, Tensor k, Tensor v, Tensor params,
//             bool is_causal=False, Tensor? key_lengths=None, Tensor[]? inputs=None,
//             Tensor? query_start=None, int key_start=0, Tensor? key_starts=None)
//       -> Tensor                                   O; differentiable (attention() below)
//   attention_forward(...the same...) -> (Tensor, Tensor, Tensor)   O, row_max, row_sum
//   attention_backward(str artifact, Tensor q, Tensor k, Tensor v, Tensor params,
//                      Tensor out, Tensor row_max, Tensor row_sum, Tensor grad_out,
//                      bool is_causal=False, Tensor? key_lengths=None,
//                      Tensor[]? inputs=None, Tensor? query_start=None, int key_start=0,
//                      Tensor? key_starts=None)
//       -> (Tensor, Tensor, Tensor, Tensor, Tensor[]) dq, dk, dv, dparams, dinputs (one per
//          input; a non-learnable input's is an empty tensor)
//   attention_weights(str artifact, Tensor q, Tensor k, Tensor params,
//                     bool is_causal=False, Tensor? key_lengths=None,
//                     Tensor[]? inputs=None, Tensor? query_start=None, int key_start=0,
//                     Tensor? key_starts=None)
//       -> Tensor
//   key_lengths_from_padding(Tensor key_padding_mask, SymInt keys) -> Tensor
//   keep_from_bias(Tensor bias, str argument, str kernel) -> Tensor  (modules.h)
//   manifest(str artifact) -> str
// attention's Autograd kernel calls attention_forward and, in backward,
// attention_backward through the dispatcher (what torch.compile's AOTAutograd traces);
// the other ops are not differentiable.
//
// CUDA tensors (artifacts compiled with `attn-compile --cuda-targets=sm_80,...`): the
// runtime loads the CUDA driver at first use (dlopen "libcuda.so.1", no CUDA headers or
// libraries at build time, so it builds against any LibTorch, CPU-only included), loads
// the artifact's Triton cubin for the device (exact sm_XY, else the highest same-major
// cubin with a lower minor) once per (artifact, device, cubin), and launches it as the
// artifact's attn_triton_launch describes (abi.h) on PyTorch's current CUDA stream (obtained through the stable C
// shim aoti_torch_get_current_cuda_stream of libtorch_cuda, PyTorch >= 2.3). On the GPU:
// dtypes float32/float16/bfloat16 (as compiled), dv == d, the head dims compiled for;
// params may be q's dtype or float32; row_max/row_sum are float32; key_lengths may be a
// CPU or same-device int64 tensor.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_H
#define ATTN_RUNTIME_H

// torch/types.h (torch::Tensor, dtypes) and not torch/torch.h: every file of the
// runtime includes this, and torch.h (nn, optim, data) takes twice as long to parse.
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "attn/abi.h"

namespace attn {

/// The Triton kernels of an artifact's GPU code, by role; their names (abi.h) appear only
/// in the launch description, read once into this type.
enum class TritonKernel {
  Forward,
  ForwardSplit,
  ForwardMerge,
  BackwardPreprocess,
  BackwardKeys,
  BackwardQueries
};
inline constexpr TritonKernel kTritonKernels[] = {
    TritonKernel::Forward,      TritonKernel::ForwardSplit,       TritonKernel::ForwardMerge,
    TritonKernel::BackwardPreprocess, TritonKernel::BackwardKeys, TritonKernel::BackwardQueries};
/// Its name in the launch description: attn_fwd, attn_fwd_split, attn_fwd_merge,
/// attn_bwd_preprocess, attn_bwd_dkdv, attn_bwd_dq.
const char *triton_kernel_name(TritonKernel kernel);
/// The kernel a launch description names; nullopt for a name no kernel has.
std::optional<TritonKernel> triton_kernel_named(const std::string &name);
/// Its cubins' variants: full and causal, or any (it does not depend on is_causal).
std::vector<const char *> triton_variants(TritonKernel kernel);
/// The variant a call with `causal` runs.
const char *triton_variant(TritonKernel kernel, bool causal);

/// One cubin of the GPU kernels (attn-compile --cuda-targets: the Triton backend), as the
/// artifact's launch description attn_triton_launch (JSON, written by python -m
/// attn.triton_aot) states it.
struct TritonImage {
  std::string symbol;   // the embedded cubin: attn_triton_<chip>_<dtype>_d<hd>_<variant>_<kernel>
  std::string chip;     // sm_80, sm_90, ...
  std::string dtype;    // f32 | f16 | bf16
  int64_t head_dim = 0; // d (== dv)
  std::string variant;  // full | causal | any (a kernel that does not depend on is_causal)
  TritonKernel kernel = TritonKernel::Forward;
  std::string function; // the kernel's name in the cubin
  /// (name, Triton type: *bf16, *fp32, *i32, i32, fp32, ...) in launch order; Triton's
  /// global and profile scratch pointers follow them.
  std::vector<std::pair<std::string, std::string>> parameters;
  int64_t block_m = 0, block_n = 0; // its tiles: the grid rules' BLOCK_M / BLOCK_N
  int64_t num_warps = 0, shared_bytes = 0;
  int64_t global_scratch_size = 0, global_scratch_align = 1, profile_scratch_size = 0;
  std::string grid;  // the grid rule, e.g. "(cdiv(NQ, BLOCK_M), B * H)"
  double scale = 0;  // the `scale` argument for this head dim
  const void *data = nullptr; // the cubin bytes
  int64_t size = 0;
};

/// One entry of the launch description's "inputs": a tensor input as the Triton
/// kernels take it (pointer `arg`, extents arg_n<d>, strides arg_s<d>; learnable ones
/// a gradient slot pointer d<arg>).
struct TritonInput {
  std::string name, arg;
  std::string element; // fp32 | i8 | i32 | i64
  bool learnable = false;
};

/// The artifact's attn_triton_launch.
/// When a forward runs the decode kernels (attn_fwd_split, attn_fwd_merge) instead of
/// attn_fwd: the launch description's "decode" (the emitted module's DECODE).
struct TritonDecodeRule {
  int64_t max_rows = 0;        // at most this many query rows
  int64_t programs_per_sm = 0; // key chunks for about this many programs per SM
};

/// How the backward kernels run: the launch description's "backward" (as {false, {}}
/// where it has none).
struct TritonBackwardPlan {
  /// attn_bwd_dq before attn_bwd_dkdv, and no attn_bwd_preprocess: attn_bwd_dq writes
  /// Delta itself (a scan, an implicit normalizer).
  bool rows_first = false;
  /// Parameters of attn_bwd_dq and attn_bwd_dkdv that each take a float32
  /// [B·H, cdiv(NK, BLOCK_N), NQ] buffer of zeros (a scan's per-tile row states).
  std::vector<std::string> tile_states;
};

struct TritonLaunch {
  std::string ptxas_version;
  /// Absent in an artifact without the decode kernels: every forward runs attn_fwd.
  std::optional<TritonDecodeRule> decode;
  TritonBackwardPlan backward;
  std::vector<TritonInput> inputs;
  std::vector<TritonImage> images;
};

/// One entry of the manifest's `inputs` (attn/manifest.schema.json): a tensor input (attn.input) the kernel's regions read.
struct TensorInput {
  std::string name;
  std::string element;         // float (the dtype of q) | i8 | i32 | i64
  std::vector<int64_t> shape;  // one extent per dimension, -1 for '?' or a named one (any
                               // to the entry points)
  std::vector<std::string> dims; // per dimension the call's dimension it must equal (B, H,
                                 // Hkv, Nq, Nk; checked at every call), "" where unnamed
  bool learnable = false;      // gets a gradient (float inputs only)
  std::optional<double> init;  // a learnable input's initial value where a module creates it
};

/// How an artifact's calls of one direction may divide a (batch, head) slice: the
/// manifest's splits.forward / splits.backward (docs/artifacts.md, attn/abi.h).
enum class SliceSplit {
  Whole,     ///< "whole": one call per slice, all its rows and keys from position 0
  Rows,      ///< "rows": any query rows per call, each over all its keys
  KeyChunks, ///< "key_chunks": any rows, and chunks of their keys whose partial results
             ///< combine (the forward's in the merge entry point, the backward's by sums)
};

/// The manifest's splits: what the runtime's work split and partial calls may do with
/// the artifact's entry points, as the compiler decided it (never the algorithm's name).
struct Splits {
  SliceSplit forward = SliceSplit::Whole;
  SliceSplit backward = SliceSplit::Whole;
  /// A caller may run the partial entry points on key blocks of its own
  /// (attention_partial_forward, attention_merge, attention_partial_backward).
  bool partial_calls = false;
};

/// What a (query, key) pair's multiply-adds cost on one thread in one of the
/// artifact's CPU schedules, relative to an f32 multiply-add of the tiled loops on
/// 16-lane vectors: the manifest's cpu_cost, read by the estimate that decides how
/// many threads a call is worth (min_thread_work_nanos).
struct CpuPairCost {
  std::string dtype;    // "f32" or "f64"
  int64_t head_dim = 0; // the tiled schedule's, taken by calls with dv = head_dim and q's
                        // head dim `d`; 0: the generic or linear loops, which serve every
                        // other call
  int64_t d = 0;        // head_dim, or the weights' input width where the score projects
                        // q and k to head_dim columns
  double forward = 1, backward = 1;
};

/// The parsed manifest of an artifact (see attn/abi.h for the format).
struct Manifest {
  int abi_version = 0;
  std::string kernel, normalizer, algorithm, denominator, mask;
  Splits splits;
  std::vector<std::string> param_names;
  std::vector<double> param_inits;           // fill value (0 for an identity weight)
  std::vector<std::vector<int64_t>> param_shapes; // {} for a scalar, e.g. {64, 64} for W[64x64]
  std::vector<bool> param_identity;          // initialised as the (rectangular) unit matrix
  int64_t head_dim = 0;                      // q's head dim must equal this when nonzero
  std::vector<TensorInput> inputs;           // the kernel's tensor inputs, in argument order
  std::vector<std::string> dtypes, devices; // e.g. {"f32", "f64"}, {"cpu"}
  std::vector<CpuPairCost> cpu_cost;        // empty: every call at the reference rate
                                             // per 4 bytes of element
  std::vector<std::string> cuda_targets;     // e.g. {"sm_80", "sm_90"}; empty: no GPU code
  bool triton = false;                       // cuda.backend is triton (the only one)
  /// cuda.kernels: the (dtype, d) pairs with Triton cubins.
  std::vector<std::pair<std::string, int64_t>> triton_kernels;
};

/// A loaded, validated artifact. Artifacts are cached per canonical path and stay
/// loaded for the lifetime of the process (they are never dlclose'd).
class Library {
public:
  /// Validate + dlopen + validate. Returns the same object for the same canonical
  /// path. Before dlopen, the file is read whole and must carry attn-compile's
  /// checksum trailer (attn/checksum.h) matching its contents, be a 64-bit ELF shared
  /// object for this machine whose segments lie within the file, define no indirect
  /// function, and export `attn_manifest` as a function and `attn_signature` as data;
  /// the file dlopen() maps must be the one checked (same device and inode). After
  /// dlopen the manifest must parse, have this ABI version and agree with `attn_signature` (param count and shapes,
  /// row inputs, head dim), and the entry points of its dtypes and the GPU images it
  /// lists must be exported with the right symbol types. Each failure is a c10::Error
  /// naming the artifact and what was expected. A path whose file was replaced after
  /// it was loaded in this process is reloaded only when the new contents are the
  /// same (same SHA-256); other contents are refused ("changed on disk").
  /// `path` may also be a portable artifact reference (ATTN_ARTIFACT_REFERENCE_PREFIX,
  /// below): it is resolved to a path once per process by the registered resolver.
  static std::shared_ptr<const Library> load(const std::string &path);

  const Manifest &manifest() const { return manifest_; }
  /// The raw manifest text, as returned by the artifact's attn_manifest().
  const std::string &manifest_text() const { return manifest_text_; }
  /// Canonical (realpath) path of the artifact.
  const std::string &path() const { return path_; }
  /// SHA-256 (hex) of the artifact's contents, as its checksum trailer states and the
  /// load verified.
  const std::string &sha256() const { return sha256_; }

  /// P, the length of the params vector: scalars count 1, weights their element count.
  int64_t num_params() const;
  /// [P] tensor of the manifest's initial values, weights flattened row-major.
  torch::Tensor initial_params(torch::ScalarType dtype = torch::kFloat) const;

  /// Whether the manifest lists this dtype (kFloat -> "f32", kDouble -> "f64").
  bool has_dtype(torch::ScalarType dtype) const;
  /// Whether the manifest lists this device ("cpu", ...).
  bool has_device(const std::string &device) const;

  /// CPU entry points for a dtype listed in the manifest (TORCH_CHECK otherwise).
  attn_forward_fn forward_fn(torch::ScalarType dtype) const;
  attn_backward_fn backward_fn(torch::ScalarType dtype) const;
  /// attn_merge_T of split-K forwards, or nullptr where the artifact has none.
  attn_merge_fn merge_fn(torch::ScalarType dtype) const;

  /// The GPU kernels' launch description and cubins; nullptr unless the manifest lists
  /// device cuda.
  const TritonLaunch *triton() const { return triton_ ? &*triton_ : nullptr; }

  Library(const Library &) = delete;
  Library &operator=(const Library &) = delete;
  ~Library() = default;

private:
  struct Token {};

public:
  explicit Library(Token) {}

private:
  friend struct LibraryLoader;
  std::string path_;
  std::string manifest_text_;
  Manifest manifest_;
  std::string sha256_;
  void *handle_ = nullptr;
  attn_forward_fn fwd_f32_ = nullptr, fwd_f64_ = nullptr;
  attn_merge_fn merge_f32_ = nullptr, merge_f64_ = nullptr;
  attn_backward_fn bwd_f32_ = nullptr, bwd_f64_ = nullptr;
  std::optional<TritonLaunch> triton_;
};

struct Options {
  bool is_causal = false; // nonzero: keys j > i are masked (query row i, key column j)
  c10::optional<torch::Tensor> key_lengths; // int64 [B]: keys j >= key_lengths[b] are masked
  /// The kernel's tensor inputs (manifest `input` lines), in that order: dense CPU
  /// tensors of the declared rank and extents (a named extent equal to that dimension
  /// of the call, e.g. H = q.size(1); Nq and Nk span positions: max query_start + Nq
  /// and max key_start + Nk; every extent >= 1; any strides, 0
  /// included), of q's dtype for float inputs, int8/int32/int64 for i8/i32/i64. A
  /// learnable input gets a gradient through autograd; reads are clamped to the
  /// extents (abi.h).
  std::vector<torch::Tensor> inputs;
  /// Absolute positions (docs/decoding.md): query row r of batch entry b is at
  /// position query_start[b] + r (an int64 0-d or [B] tensor; default 0) and key row
  /// c at key_start + c, or at key_starts[b] + c where the batch entries' keys start
  /// at different positions (an int64 0-d or [B] tensor; key_start must then be 0).
  /// Every region's i and j are these positions, and causal keeps j <= i in them
  /// (query_start = Nk - Nq: bottom-right alignment, a KV-cache step).
  c10::optional<torch::Tensor> query_start = c10::nullopt;
  int64_t key_start = 0;
  c10::optional<torch::Tensor> key_starts = c10::nullopt;
};

/// Autograd-aware attention: calls the op attn::attention. q [B,H,Nq,d],
/// k [B,H_kv,Nk,d], v [B,H_kv,Nk,dv], params [P] (same dtype as q; an empty [0] tensor,
/// or an undefined tensor, when P == 0). H_kv < H is grouped-query attention (H a
/// multiple of H_kv; CPU only): query head h reads key/value head h / (H / H_kv), no
/// copy, and dk/dv sum the group's heads. Returns O [B,H,Nq,dv]; gradients flow to q, k,
/// v, params and the learnable tensors of opts.inputs.
torch::Tensor attention(const std::shared_ptr<const Library> &lib, const torch::Tensor &q,
                        const torch::Tensor &k, const torch::Tensor &v,
                        const torch::Tensor &params, const Options &opts = {});

/// Forward only, no autograd: (O [B,H,Nq,dv], row_max [B,H,Nq], row_sum [B,H,Nq]);
/// the row statistics have q's dtype on the CPU and are float32 on the GPU.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor>
attention_forward(const std::shared_ptr<const Library> &lib, const torch::Tensor &q,
                  const torch::Tensor &k, const torch::Tensor &v,
                  const torch::Tensor &params, const Options &opts = {});

/// Backward only, no autograd: given the forward's inputs, its outputs (O, row_max,
/// row_sum) and dO [B,H,Nq,dv], returns (dq, dk, dv, dparams [P], dinputs): one
/// gradient per tensor input, an empty [0] tensor for those that are not learnable
/// (none on the GPU, whose kernels take no inputs). The
/// inputs' gradients are summed in a fixed order: the same bits run to run (for
/// one thread count).
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor,
           std::vector<torch::Tensor>>
attention_backward(const std::shared_ptr<const Library> &lib, const torch::Tensor &q,
                   const torch::Tensor &k, const torch::Tensor &v,
                   const torch::Tensor &params, const torch::Tensor &out,
                   const torch::Tensor &row_max, const torch::Tensor &row_sum,
                   const torch::Tensor &grad_out, const Options &opts = {});

/// The attention weights w_ij = g(s_ij) / C_i as a [B, H, Nq, Nk] tensor, for
/// inspection only (plots, probing): no autograd, and refused above
/// kMaxAttentionWeights elements. They are computed by the artifact's own forward
/// kernel (with V = identity), so they are exactly the weights it applies, masks and
/// params included; masked pairs and fully masked rows are 0.
torch::Tensor attention_weights(const std::shared_ptr<const Library> &lib,
                                const torch::Tensor &q, const torch::Tensor &k,
                                const torch::Tensor &params, const Options &opts = {});

/// Largest B·H·Nq·Nk that attention_weights() materialises.
constexpr int64_t kMaxAttentionWeights = int64_t{1} << 26;

/// The least work, estimated as one thread's time in nanoseconds, that a call gives each
/// thread it wakes (100 µs unless set): a call estimated below twice that runs on the
/// calling thread alone, one below three times on two threads, and so on, up to
/// at::get_num_threads(). Waking a sleeping helper costs the caller a system call and
/// the helper tens of microseconds before its first item; small calls (a decoder step
/// over a short cache, a short prompt) were slower on 2 threads than on 1. Process-wide.
double min_thread_work_nanos();
/// Sets min_thread_work_nanos() and returns the value it replaces. 0 splits every call
/// over every thread as far as its sizes allow (the tests of the split paths do);
/// negative, infinite or NaN values are refused.
double set_min_thread_work_nanos(double nanos);

/// Granularity of forward work items: each call covers a multiple of
/// kQueryBlock query rows, as many as still leaves kItemsPerThread items per thread
/// (a call re-packs K once, so fewer, longer calls amortise that).
constexpr int64_t kQueryBlock = 64;

/// Query rows per forward call for `heads` = B·H slices of `queries` rows on
/// `threads` threads (see kQueryBlock). Artifacts whose manifest's splits.forward is
/// "whole" (kernelised) get every row of a head in one call instead: their forward
/// builds the O(Nk·d·dv) key state in each call.
int64_t forward_rows_per_call(int64_t heads, int64_t queries, int64_t threads);

/// Work items per thread that the runtime aims for where it splits slices (query
/// blocks, backward query splits, key chunks): threads take items as they finish,
/// so a thread slowed by a busy core, or given the costlier rows of a mask, takes
/// fewer instead of holding up the others with a fixed share.
constexpr int64_t kItemsPerThread = 4;

/// How many backward calls share one (batch, head) slice's queries on `threads`
/// threads: 1 when `heads` = B·H slices already give kItemsPerThread per thread,
/// else enough for that many calls per thread, each of at least kQueryBlock rows.
/// Kernelised artifacts always take whole slices.
int64_t backward_query_splits(int64_t heads, int64_t queries, int64_t threads);

/// Keys per split-K chunk at least (and chunk boundaries are multiples of it).
constexpr int64_t kKeyBlock = 512;

/// How many key chunks each call of `items` (forward: B·H × query blocks;
/// backward: B·H × query splits) is split into on `threads` threads: 1 when the
/// items already give kItemsPerThread per thread, else enough for that many
/// calls per thread, each over at least kKeyBlock of `keys`.
/// A forward chunk's state is merged afterwards (abi.h, attn_merge_T); a backward
/// chunk writes its keys' dk, dv rows and a dq share, summed in chunk order.
int64_t key_splits(int64_t items, int64_t keys, int64_t threads);

/// The first query row of backward call `split` of `splits` (split = splits gives
/// `queries`): rows split so that each call visits about as many (query, key)
/// pairs, counting the causal mask and kv_len.
int64_t query_split_begin(int64_t split, int64_t splits, int64_t queries, int64_t kv_len,
                          bool causal);

} // namespace attn

/* Portable artifact references. An exported program (torch.export) must load on
 * another machine, where the artifact's absolute cache path means nothing, so the
 * Python package names the artifact there by a reference: this prefix, then its IR and
 * compile options, encoded (runtime/python/attn/compiler.py, artifact_reference). The
 * runtime does not decode it: Library::load hands it to the resolver, which returns the
 * path of an artifact compiled from it on this machine (the cache's, compiled if
 * missing), so no machine code travels with a program. `import attn` registers the
 * Python package's resolver; a LibTorch-only program may register its own. */
#define ATTN_ARTIFACT_REFERENCE_PREFIX "attn-artifact:"

extern "C" {
/* Writes the NUL-terminated path of the artifact `reference` names into `path`
 * (capacity bytes) and returns 0; else writes why into `error` and returns nonzero. */
typedef int (*attn_artifact_resolver_fn)(const char *reference, char *path, size_t capacity,
                                         char *error, size_t error_capacity);
/* Sets the process's resolver (NULL: none); references resolved before stay resolved. */
void attn_set_artifact_resolver(attn_artifact_resolver_fn resolver);
}

#endif // ATTN_RUNTIME_H
