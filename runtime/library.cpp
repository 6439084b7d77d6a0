//===- library.cpp - loading and validating attn-compile artifacts --------===//
//
// dlopen, manifest validation (parsing: manifest.cpp), entry-point lookup, per-path cache.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime.h"
#include "internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace attn {

using detail::join;

namespace {

struct FileId {
  uint64_t dev = 0, ino = 0;
  int64_t mtime_ns = 0, size = 0;
  bool operator==(const FileId &o) const {
    return dev == o.dev && ino == o.ino && mtime_ns == o.mtime_ns && size == o.size;
  }
};

FileId file_id(const struct stat &st) {
  FileId id;
  id.dev = static_cast<uint64_t>(st.st_dev);
  id.ino = static_cast<uint64_t>(st.st_ino);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  id.size = static_cast<int64_t>(st.st_size);
  return id;
}

// Closes a file descriptor.
struct FdGuard {
  int fd;
  ~FdGuard() { close(fd); }
};

// Closes a dlopen handle unless released (used while validating a fresh artifact).
struct HandleGuard {
  void *handle;
  ~HandleGuard() {
    if (handle)
      dlclose(handle);
  }
};

// As the manifest writes shapes: 32x32, ?x8 (-1: any extent).
std::string shape_text(const std::vector<int64_t> &shape) {
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "x" : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return text;
}

// A tensor input's element as the manifest names it, from its attn_signature code.
std::string input_element_name(int64_t code) {
  switch (code) {
  case ATTN_INPUT_FLOAT:
    return "float";
  case 8:
  case 32:
  case 64:
    return "i" + std::to_string(code);
  default:
    return "code " + std::to_string(code);
  }
}

// The manifest agrees with attn_signature (abi.h), `words` int64 values: what the
// entry points were compiled for. Throws c10::Error naming the artifact otherwise.
void check_signature(const std::string &path, const Manifest &m, const int64_t *sig,
                     size_t words) {
  auto refuse = [&](const std::string &what) {
    TORCH_CHECK(false, "attn: artifact ", path, ": its manifest does not match its entry "
                "points (", ATTN_SIGNATURE_SYMBOL, "): ", what,
                "; the artifact is inconsistent: recompile it with attn-compile");
  };
  if (words < 4 || sig[0] != ATTN_ABI_VERSION || sig[1] < 0 || sig[3] < 0)
    refuse("expected " ATTN_SIGNATURE_SYMBOL " to start with ATTN_ABI_VERSION " +
           std::to_string(ATTN_ABI_VERSION) + ", T, the head dim and the param count, found " +
           std::to_string(words) + " values");
  std::vector<std::vector<int64_t>> shapes;
  size_t at = 4;
  for (int64_t p = 0; p < sig[3]; ++p) {
    if (at >= words || sig[at] < 0 || sig[at] > 8 || static_cast<size_t>(sig[at]) > words - at - 1)
      refuse("its param " + std::to_string(p) + " is cut short");
    shapes.emplace_back(sig + at + 1, sig + at + 1 + sig[at]);
    at += 1 + sig[at];
  }
  // The tensor inputs: rank, element, learnable, extents.
  struct SignedInput {
    int64_t element, learnable;
    std::vector<int64_t> shape;
  };
  std::vector<SignedInput> inputs;
  for (int64_t t = 0; t < sig[1]; ++t) {
    if (at + 3 > words || sig[at] < 1 || sig[at] > ATTN_MAX_TABLE_RANK ||
        static_cast<size_t>(sig[at]) > words - at - 3)
      refuse("its tensor input " + std::to_string(t) + " is cut short");
    inputs.push_back({sig[at + 1], sig[at + 2],
                      std::vector<int64_t>(sig + at + 3, sig + at + 3 + sig[at])});
    at += 3 + sig[at];
  }
  if (at != words)
    refuse(std::to_string(words - at) + " values follow its " + std::to_string(sig[3]) +
           " params and " + std::to_string(sig[1]) + " tensor inputs");
  if (shapes.size() != m.param_names.size())
    refuse("the manifest's params declare " + std::to_string(m.param_names.size()) +
           " params (" + join(m.param_names, ", ") + "), the entry points read " +
           std::to_string(shapes.size()));
  for (size_t p = 0; p < shapes.size(); ++p)
    if (shapes[p] != m.param_shapes[p])
      refuse("param '" + m.param_names[p] + "' is " +
             (m.param_shapes[p].empty() ? "a scalar" : "[" + shape_text(m.param_shapes[p]) + "]") +
             " in the manifest, the entry points read " +
             (shapes[p].empty() ? "a scalar" : "[" + shape_text(shapes[p]) + "]"));
  if (inputs.size() != m.inputs.size())
    refuse("the manifest declares " + std::to_string(m.inputs.size()) +
           " tensor inputs (its inputs), the entry points read " + std::to_string(inputs.size()));
  for (size_t t = 0; t < inputs.size(); ++t) {
    const TensorInput &declared = m.inputs[t];
    const std::string element = input_element_name(inputs[t].element);
    if (element != declared.element || inputs[t].learnable != (declared.learnable ? 1 : 0) ||
        inputs[t].shape != declared.shape)
      refuse("tensor input '" + declared.name + "' is " + declared.element + " " +
             shape_text(declared.shape) + (declared.learnable ? " learnable" : "") +
             " in the manifest, the entry points read " + element + " " +
             shape_text(inputs[t].shape) + (inputs[t].learnable ? " learnable" : ""));
  }
  if (m.head_dim != sig[2])
    refuse("the manifest's head_dim is " + std::to_string(m.head_dim) +
           " (0: any), the entry points were compiled for " + std::to_string(sig[2]));
}

} // namespace

namespace {
std::mutex &cache_mutex() {
  static std::mutex m;
  return m;
}
// A loaded artifact and the identity of the file it was last verified from.
struct CacheEntry {
  FileId id;
  std::shared_ptr<const Library> lib;
};
// Strong references: artifacts stay loaded for the process lifetime (autograd
// graphs and the path-based Python ops refer to them). Leaked on purpose so that
// nothing is unloaded during static destruction.
std::map<std::string, CacheEntry> &library_cache() {
  static auto *cache = new std::map<std::string, CacheEntry>();
  return *cache;
}
} // namespace

/// The launch description's inputs are the manifest's, and every (target, dtype, head
/// dim) the manifest lists has the Triton cubins a call can need: each kernel, both
/// causal variants where it has them; the decode kernels only with a decode rule,
/// attn_bwd_preprocess only where the backward is not rows first.
static void check_triton_images(const std::string &path, const Manifest &m, const TritonLaunch &launch) {
  std::vector<std::string> declared, described;
  for (const TensorInput &input : m.inputs)
    declared.push_back(input.name);
  for (const TritonInput &input : launch.inputs)
    described.push_back(input.name);
  std::sort(declared.begin(), declared.end());
  std::sort(described.begin(), described.end());
  TORCH_CHECK(declared == described, "attn: artifact ", path, ": its manifest declares the inputs [",
              join(declared), "] but attn_triton_launch describes [", join(described), "]");
  for (const std::string &chip : m.cuda_targets)
    for (const auto &[dtype, head_dim] : m.triton_kernels)
      for (TritonKernel kernel : kTritonKernels) {
        const bool decoding =
            kernel == TritonKernel::ForwardSplit || kernel == TritonKernel::ForwardMerge;
        if (decoding && !launch.decode)
          continue; // an artifact without the decode forward
        if (kernel == TritonKernel::BackwardPreprocess && launch.backward.rows_first)
          continue; // attn_bwd_dq writes Delta
        for (const char *variant : triton_variants(kernel)) {
          const bool found = std::any_of(
              launch.images.begin(), launch.images.end(), [&](const TritonImage &image) {
                return image.chip == chip && image.dtype == dtype && image.head_dim == head_dim &&
                       image.kernel == kernel && image.variant == variant;
              });
          TORCH_CHECK(found, "attn: artifact ", path, ": manifest lists the Triton kernel (cuda.kernels) ", dtype,
                      " ", head_dim, " for ", chip, " but attn_triton_launch describes no ",
                      variant, " ", triton_kernel_name(kernel), " cubin for it");
        }
      }
}

struct LibraryLoader {
  // dlopen()s `canonical`, the file `file` (fstat) already verified (its checksum
  // `sha256`, its dynamic symbols `symbols`), and validates what it exports.
  static std::shared_ptr<Library> open(const std::string &canonical, const std::string &given,
                                       const struct stat &file, const std::string &sha256,
                                       const std::map<std::string, detail::ArtifactSymbol> &symbols) {
    dlerror();
    void *handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *err = dlerror();
      TORCH_CHECK(false, "attn: artifact '", given, "' is not a loadable shared object: dlopen "
                  "failed: ", err ? err : "(no error message)");
    }
    HandleGuard guard{handle};
    // A symbol the artifact itself defines (symbols), of the ELF type `type`; nullptr
    // when it defines none (dlsym would also search its dependencies).
    auto own = [&](const std::string &name, unsigned char type) -> void * {
      auto it = symbols.find(name);
      if (it == symbols.end())
        return nullptr;
      TORCH_CHECK(it->second.type == type, "attn: artifact ", canonical, " exports '", name,
                  "' as ", detail::elf_symbol_kind(it->second.type), ", expected ",
                  detail::elf_symbol_kind(type));
      void *address = dlsym(handle, name.c_str());
      TORCH_CHECK(address, "attn: artifact ", canonical, ": dlsym(\"", name,
                  "\") failed although its dynamic symbol table defines it");
      return address;
    };

    auto manifest_fn = reinterpret_cast<attn_manifest_fn>(own(ATTN_MANIFEST_SYMBOL, STT_FUNC));
    // The file mapped must be the file verified: not one renamed over the path since.
    TORCH_CHECK(detail::mapped_from(reinterpret_cast<const void *>(manifest_fn), file),
                "attn: artifact '", given, "' was replaced while it was being loaded (the file "
                "dlopen() mapped is not the file whose checksum was verified); load it again");
    const char *text = manifest_fn();
    TORCH_CHECK(text, "attn: artifact '", given, "': ", ATTN_MANIFEST_SYMBOL,
                "() returned NULL, expected the manifest text");

    auto lib = std::make_shared<Library>(Library::Token{});
    lib->path_ = canonical;
    lib->sha256_ = sha256;
    lib->manifest_text_ = text;
    lib->manifest_ = detail::parse_manifest(canonical, lib->manifest_text_);
    const uint64_t signature_bytes = symbols.at(ATTN_SIGNATURE_SYMBOL).size;
    TORCH_CHECK(signature_bytes % sizeof(int64_t) == 0, "attn: artifact ", canonical, ": ",
                ATTN_SIGNATURE_SYMBOL, " is ", signature_bytes,
                " bytes, expected a whole number of int64 values");
    check_signature(canonical, lib->manifest_,
                    static_cast<const int64_t *>(own(ATTN_SIGNATURE_SYMBOL, STT_OBJECT)),
                    signature_bytes / sizeof(int64_t));

    bool cpu = false;
    for (const auto &d : lib->manifest_.devices)
      cpu = cpu || d == "cpu";
    if (cpu) {
      for (const auto &dt : lib->manifest_.dtypes) {
        std::string fwd = ATTN_CIFACE_PREFIX ATTN_FORWARD_SYMBOL_PREFIX + dt;
        std::string bwd = ATTN_CIFACE_PREFIX ATTN_BACKWARD_SYMBOL_PREFIX + dt;
        void *f = own(fwd, STT_FUNC);
        void *b = own(bwd, STT_FUNC);
        std::vector<std::string> missing;
        if (!f)
          missing.push_back(fwd);
        if (!b)
          missing.push_back(bwd);
        TORCH_CHECK(missing.empty(), "attn: artifact ", canonical, ": manifest lists dtype ", dt,
                    " (dtypes: ", join(lib->manifest_.dtypes), ") but the entry point(s) ",
                    join(missing, ", "), " are missing");
        // Only the forward's key chunks (splits.forward key_chunks) leave partial states.
        const std::string merge = ATTN_CIFACE_PREFIX ATTN_MERGE_SYMBOL_PREFIX + dt;
        auto *m = reinterpret_cast<attn_merge_fn>(own(merge, STT_FUNC));
        TORCH_CHECK(m || lib->manifest_.splits.forward != SliceSplit::KeyChunks, "attn: artifact ",
                    canonical, ": manifest's splits.forward is key_chunks but the merge entry "
                    "point ", merge, " is missing; recompile the artifact");
        if (dt == "f32") {
          lib->fwd_f32_ = reinterpret_cast<attn_forward_fn>(f);
          lib->bwd_f32_ = reinterpret_cast<attn_backward_fn>(b);
          lib->merge_f32_ = m;
        } else {
          lib->fwd_f64_ = reinterpret_cast<attn_forward_fn>(f);
          lib->bwd_f64_ = reinterpret_cast<attn_backward_fn>(b);
          lib->merge_f64_ = m;
        }
      }
    }
    if (lib->has_device("cuda")) {
      // An exported byte array `name` and its int64 size `name`_size.
      struct EmbeddedImage {
        const void *data = nullptr;
        int64_t size = 0;
      };
      auto image = [&](const std::string &name) {
        EmbeddedImage img;
        void *data = own(name, STT_OBJECT);
        void *size = own(name + "_size", STT_OBJECT);
        TORCH_CHECK(data && size, "attn: artifact ",
                    canonical, ": manifest lists cuda but the GPU image symbols ", name, " and ",
                    name, "_size are ", data || size ? "not both" : "not", " exported");
        TORCH_CHECK(symbols.at(name + "_size").size == sizeof(int64_t), "attn: artifact ",
                    canonical, ": ", name, "_size is ", symbols.at(name + "_size").size,
                    " bytes, expected an int64");
        img.data = data;
        img.size = *static_cast<const int64_t *>(size);
        const uint64_t extent = symbols.at(name).size;
        TORCH_CHECK(img.size > 0 && static_cast<uint64_t>(img.size) <= extent,
                    "attn: artifact ", canonical, ": ", name, "_size is ", img.size,
                    ", expected a positive size in bytes of at most the ", extent,
                    " bytes of symbol ", name);
        return img;
      };
      {
        const EmbeddedImage text = image("attn_triton_launch");
        const char *chars = static_cast<const char *>(text.data);
        TORCH_CHECK(chars[text.size - 1] == 0, "attn: artifact ", canonical,
                    ": attn_triton_launch is not NUL-terminated within attn_triton_launch_size = ",
                    text.size, " bytes");
        lib->triton_ = detail::parse_triton_launch(canonical, std::string(chars, text.size - 1));
        for (TritonImage &cubin : lib->triton_->images) {
          const EmbeddedImage bytes = image(cubin.symbol);
          cubin.data = bytes.data;
          cubin.size = bytes.size;
        }
        check_triton_images(canonical, lib->manifest_, *lib->triton_);
      }
    }
    lib->handle_ = handle;
    guard.handle = nullptr; // loaded for good
    return lib;
  }
};

std::shared_ptr<const Library> Library::load(const std::string &path) {
  if (detail::is_artifact_reference(path))
    return load(detail::resolve_artifact_reference(path));
  TORCH_CHECK(!path.empty(), "attn: artifact path is empty, expected the path of a .so "
                             "produced by attn-compile");
  char resolved[PATH_MAX];
  if (!realpath(path.c_str(), resolved)) {
    int err = errno;
    TORCH_CHECK(false, "attn: artifact '", path, "' not found (", std::strerror(err),
                "): expected a shared object produced by `attn-compile in.mlir -o out.so`");
  }
  std::string canonical(resolved);
  // O_NONBLOCK: a FIFO must not block the open; it is refused below.
  int fd = ::open(canonical.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  TORCH_CHECK(fd >= 0, "attn: cannot read artifact '", path, "' (", canonical, "): ",
              std::strerror(errno));
  FdGuard close_fd{fd};
  struct stat st;
  TORCH_CHECK(fstat(fd, &st) == 0, "attn: cannot stat artifact '", path, "': ",
              std::strerror(errno));
  TORCH_CHECK(S_ISREG(st.st_mode), "attn: artifact '", path,
              "' is not a shared object: expected a regular file, found ",
              S_ISDIR(st.st_mode) ? "a directory" : "a special file");
  FileId id = file_id(st);

  std::lock_guard<std::mutex> lock(cache_mutex());
  auto *cache = &library_cache();
  auto it = cache->find(canonical);
  if (it != cache->end() && it->second.id == id)
    return it->second.lib;
  std::string bytes = detail::read_artifact(fd, static_cast<uint64_t>(st.st_size), path);
  std::string sha256 = detail::verify_checksum(bytes, path);
  if (it != cache->end()) {
    // Replaced (or touched) since it was loaded: the same contents are the same
    // artifact; other contents cannot be loaded under the same path.
    TORCH_CHECK(sha256 == it->second.lib->sha256(), "attn: artifact ", canonical,
                " changed on disk after it was loaded in this process (SHA-256 ",
                it->second.lib->sha256(), " then, ", sha256, " now); a shared object "
                "cannot be reloaded under the same path: restart the process or compile to "
                "a new path");
    it->second.id = id;
    return it->second.lib;
  }
  auto lib = LibraryLoader::open(canonical, path, st, sha256,
                                 detail::read_elf_symbols(bytes, path));
  (*cache)[canonical] = {id, lib};
  return lib;
}

torch::Tensor Library::initial_params(torch::ScalarType dtype) const {
  TORCH_CHECK(dtype == torch::kFloat || dtype == torch::kDouble,
              "attn: initial_params: expected dtype float32 or float64, got ", dtype);
  std::vector<torch::Tensor> parts;
  auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  for (size_t i = 0; i < manifest_.param_names.size(); ++i) {
    const auto &shape = manifest_.param_shapes[i];
    if (manifest_.param_identity[i])
      parts.push_back(torch::eye(shape[0], shape[1], f64).reshape({-1}));
    else
      parts.push_back(torch::full({shape.empty() ? 1 : c10::multiply_integers(shape)},
                                  manifest_.param_inits[i], f64));
  }
  if (parts.empty())
    return torch::empty({0}, torch::TensorOptions().dtype(dtype));
  return torch::cat(parts).to(dtype);
}

int64_t Library::num_params() const {
  int64_t count = 0;
  for (const auto &shape : manifest_.param_shapes)
    count += shape.empty() ? 1 : c10::multiply_integers(shape);
  return count;
}

bool Library::has_dtype(torch::ScalarType dtype) const {
  const char *tag = detail::dtype_tag(dtype);
  if (!tag)
    return false;
  for (const auto &d : manifest_.dtypes)
    if (d == tag)
      return true;
  return false;
}

bool Library::has_device(const std::string &device) const {
  for (const auto &d : manifest_.devices)
    if (d == device)
      return true;
  return false;
}

attn_forward_fn Library::forward_fn(torch::ScalarType dtype) const {
  attn_forward_fn fn = dtype == torch::kFloat ? fwd_f32_ : dtype == torch::kDouble ? fwd_f64_ : nullptr;
  TORCH_CHECK(fn, "attn: artifact ", path_, " has no CPU forward entry point for dtype ", dtype,
              " (dtypes: ", join(manifest_.dtypes), "; devices: ", join(manifest_.devices), ")");
  return fn;
}

attn_merge_fn Library::merge_fn(torch::ScalarType dtype) const {
  return dtype == torch::kFloat ? merge_f32_ : dtype == torch::kDouble ? merge_f64_ : nullptr;
}

attn_backward_fn Library::backward_fn(torch::ScalarType dtype) const {
  attn_backward_fn fn = dtype == torch::kFloat ? bwd_f32_ : dtype == torch::kDouble ? bwd_f64_ : nullptr;
  TORCH_CHECK(fn, "attn: artifact ", path_, " has no CPU backward entry point for dtype ", dtype,
              " (dtypes: ", join(manifest_.dtypes), "; devices: ", join(manifest_.devices), ")");
  return fn;
}

namespace detail {

std::string join(const std::vector<std::string> &items, const char *sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i)
      out += sep;
    out += items[i];
  }
  return out;
}

std::shared_ptr<const Library> load_artifact(c10::string_view artifact) {
  return Library::load(std::string(artifact));
}

c10::optional<CudaArch> parse_cuda_target(const std::string &target) {
  // sm_<major><one minor digit>[letter]: sm_80, sm_90a, sm_120
  size_t end = target.size();
  if (end > 0 && std::isalpha(static_cast<unsigned char>(target[end - 1])))
    --end;
  if (target.compare(0, 3, "sm_") != 0 || end < 5)
    return c10::nullopt;
  for (size_t i = 3; i < end; ++i)
    if (!std::isdigit(static_cast<unsigned char>(target[i])))
      return c10::nullopt;
  CudaArch a;
  a.major = std::atoi(target.substr(3, end - 4).c_str());
  a.minor = target[end - 1] - '0';
  a.arch_specific = end != target.size();
  return a;
}

std::string choose_cuda_image(const std::vector<std::string> &targets, int major, int minor) {
  // Exact match first (a plain sm_XY before an arch-specific sm_XYa: both run); then the
  // newest plain cubin of the same major with a lower minor (binary compatible).
  std::string exact, compatible;
  int compatible_minor = -1;
  for (const auto &t : targets) {
    auto a = parse_cuda_target(t);
    if (!a || a->major != major)
      continue;
    if (a->minor == minor && (exact.empty() || !a->arch_specific))
      exact = t;
    else if (!a->arch_specific && a->minor < minor && a->minor > compatible_minor) {
      compatible = t;
      compatible_minor = a->minor;
    }
  }
  if (!exact.empty())
    return exact;
  return compatible;
}

const char *dtype_tag(torch::ScalarType t) {
  switch (t) {
  case torch::kFloat:
    return "f32";
  case torch::kDouble:
    return "f64";
  default:
    return nullptr;
  }
}

const char *cuda_dtype_tag(torch::ScalarType t) {
  switch (t) {
  case torch::kFloat:
    return "f32";
  case torch::kHalf:
    return "f16";
  case torch::kBFloat16:
    return "bf16";
  default:
    return nullptr;
  }
}

} // namespace detail

} // namespace attn
