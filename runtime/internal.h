//===- internal.h - runtime internals shared between translation units ----===//
#ifndef ATTN_RUNTIME_INTERNAL_H
#define ATTN_RUNTIME_INTERNAL_H

#include "attn/runtime.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <sys/stat.h>

#include <map>
#include <string>

namespace attn {
namespace detail {
/// The runtime's reader of the manifest (JSON, schema: attn/manifest.schema.json;
/// golden files: test/manifest/), runtime/manifest.cpp. Throws c10::Error naming
/// `path` (the artifact), the field and what the schema expected there.
Manifest parse_manifest(const std::string &path, const std::string &text);

/// The schema's text (generated from runtime/python/attn/manifest.schema.json).
extern const char *const kManifestSchema;

/// The ABI version the schema requires (its abi's const): ATTN_ABI_VERSION.
int manifest_schema_abi();

/// The signature of the dispatcher op attn::attention (runtime/ops.cpp).
using AttentionSig = torch::Tensor(c10::string_view, const torch::Tensor &,
                                   const torch::Tensor &, const torch::Tensor &,
                                   const torch::Tensor &, bool,
                                   const std::optional<torch::Tensor> &,
                                   const std::optional<at::TensorList> &,
                                   const std::optional<torch::Tensor> &, int64_t,
                                   const std::optional<torch::Tensor> &);
/// The op attn::attention (autograd-aware), called through the dispatcher.
const c10::TypedOperatorHandle<AttentionSig> &attention_op();

/// The Options of an op's (is_causal, key_lengths, inputs) arguments.
Options make_options(bool is_causal, const std::optional<torch::Tensor> &key_lengths,
                     const std::optional<at::TensorList> &inputs,
                     const std::optional<torch::Tensor> &query_start = std::nullopt,
                     int64_t key_start = 0,
                     const std::optional<torch::Tensor> &key_starts = std::nullopt);

/// The Autograd kernel of a non-differentiable op: the op itself, below autograd, so
/// its outputs never require grad.
void not_differentiable(const c10::OperatorHandle &op, torch::jit::Stack *stack);

/// `params`, or for None (an undefined tensor) an empty one on q's device, after
/// attention_forward's checks when any of q, k, v and params is None: its autograd
/// function records the device of every tensor argument, which an undefined one has
/// not ("tensor does not have a device"); the checks name the argument instead.
torch::Tensor checked_params(const Library &lib, const char *fn, const torch::Tensor &q,
                             const torch::Tensor &k, const torch::Tensor &v,
                             const torch::Tensor &params, const Options &opts);

/// A CUDA target "sm_XY" / "sm_XYa" as compute capability X.Y.
struct CudaArch {
  int major = 0, minor = 0;
  bool arch_specific = false; // the 'a' suffix: runs only on exactly X.Y
};
c10::optional<CudaArch> parse_cuda_target(const std::string &target);

/// The cubin target to load on a device of compute capability major.minor: the exact
/// one, else the newest of the same major with a lower minor, else "" (nothing fits).
std::string choose_cuda_image(const std::vector<std::string> &targets, int major, int minor);

/// The launch description attn_triton_launch (JSON) of artifact `path`, its images'
/// data not yet set. Throws c10::Error naming the artifact and the member at fault.
TritonLaunch parse_triton_launch(const std::string &path, const std::string &text);

/// "f32" / "f64" (a CPU entry point's dtype), nullptr for other dtypes.
const char *dtype_tag(torch::ScalarType t);

/// What a multiply-add of a CPU call of `dtype` with head dims d and dv costs in the
/// schedule that runs it (work_split.h pair_cost on `lib`'s manifest cpu_cost;
/// cpu_dispatch.cpp).
double cpu_pair_cost(const Library &lib, torch::ScalarType dtype, int64_t d, int64_t dv,
                     bool backward);

/// "f32" / "f16" / "bf16" (a triton-kernel dtype), nullptr for other dtypes.
const char *cuda_dtype_tag(torch::ScalarType t);

// ---- artifact files, checked before dlopen (artifact.cpp) ----

/// A defined, exported symbol of an artifact's dynamic symbol table.
struct ArtifactSymbol {
  unsigned char type = 0; // STT_FUNC, STT_OBJECT, ...
  uint64_t size = 0;      // st_size, bytes
};

/// The whole artifact behind `fd` (`size` bytes by fstat, refused above 1 GiB), which
/// must start with an ELF header. Errors name `given`, the path the caller passed.
std::string read_artifact(int fd, uint64_t size, const std::string &given);

/// Checks the checksum trailer of the artifact `bytes` (attn/checksum.h) and returns
/// the hex SHA-256 of its contents; a missing, short or mismatching trailer is an error.
std::string verify_checksum(const std::string &bytes, const std::string &given);

/// The attn_* and _mlir_ciface_attn_* symbols that the checksummed artifact `bytes`
/// defines and exports, after checking that it is a 64-bit ELF shared object for this
/// machine whose loadable segments lie within the file and which defines no indirect
/// function, and that attn_manifest is a function and attn_signature a data object.
std::map<std::string, ArtifactSymbol> read_elf_symbols(const std::string &bytes,
                                                       const std::string &given);

/// Whether the memory at `address` is mapped from the file `file` (its st_dev and
/// st_ino, by /proc/self/maps; true where /proc cannot tell).
bool mapped_from(const void *address, const struct stat &file);

/// `items` separated by `sep`, for messages.
std::string join(const std::vector<std::string> &items, const char *sep = " ");

/// The artifact an op's string argument names (a path or a portable reference), loaded
/// once per process (Library::load's cache).
std::shared_ptr<const Library> load_artifact(c10::string_view artifact);

/// "a function", "a data object", ... for an ELF symbol type.
std::string elf_symbol_kind(unsigned char type);
/// Whether `artifact` is a portable reference (ATTN_ARTIFACT_REFERENCE_PREFIX), not a path.
bool is_artifact_reference(const std::string &artifact);
/// The path the registered resolver gives `reference` (once per process); a c10::Error
/// naming the reference when there is no resolver or it fails.
std::string resolve_artifact_reference(const std::string &reference);
} // namespace detail
} // namespace attn

#endif
