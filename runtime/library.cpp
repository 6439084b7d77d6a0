//===- library.cpp - loading and validating attn-compile artifacts --------===//
//
// dlopen, manifest parsing and validation, entry-point lookup, per-path cache.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime.h"
#include "internal.h"

#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

namespace attn {

namespace {

std::string join(const std::vector<std::string> &items, const char *sep = " ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i)
      out += sep;
    out += items[i];
  }
  return out;
}

std::vector<std::string> split_ws(const std::string &line) {
  std::vector<std::string> tokens;
  std::istringstream in(line);
  std::string tok;
  while (in >> tok)
    tokens.push_back(tok);
  return tokens;
}

bool parse_int(const std::string &s, long long &out) {
  if (s.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || end != s.c_str() + s.size())
    return false;
  out = v;
  return true;
}

bool parse_double(const std::string &s, double &out) {
  if (s.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno == ERANGE || end != s.c_str() + s.size() || std::isnan(v))
    return false;
  out = v;
  return true;
}

bool is_identifier(const std::string &s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$'))
      return false;
  return true;
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

struct FileId {
  uint64_t dev = 0, ino = 0;
  int64_t mtime_ns = 0, size = 0;
};

FileId file_id(const struct stat &st) {
  FileId id;
  id.dev = static_cast<uint64_t>(st.st_dev);
  id.ino = static_cast<uint64_t>(st.st_ino);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  id.size = static_cast<int64_t>(st.st_size);
  return id;
}

// Closes a dlopen handle unless released (used while validating a fresh artifact).
struct HandleGuard {
  void *handle;
  ~HandleGuard() {
    if (handle)
      dlclose(handle);
  }
};

// Parse the manifest text. Throws c10::Error naming the artifact and the line.
Manifest parse_manifest(const std::string &path, const std::string &text) {
  struct Line {
    int number;
    std::string raw;
    std::vector<std::string> tokens;
  };
  std::vector<Line> lines;
  {
    std::istringstream in(text);
    std::string raw;
    int number = 0;
    while (std::getline(in, raw)) {
      ++number;
      if (!raw.empty() && raw.back() == '\r')
        raw.pop_back();
      auto tokens = split_ws(raw);
      if (tokens.empty() || tokens[0][0] == '#')
        continue;
      lines.push_back({number, raw, std::move(tokens)});
    }
  }

  auto malformed = [&](const Line &l, const std::string &expected) {
    TORCH_CHECK(false, "attn: artifact ", path, ": malformed manifest line ", l.number, " '",
                l.raw, "': expected ", expected);
  };

  Manifest m;
  // The ABI version first, so that an artifact of another ABI is reported as such
  // even if the rest of its manifest uses another syntax.
  const Line *abi = nullptr;
  for (const auto &l : lines)
    if (l.tokens[0] == "attn-abi") {
      TORCH_CHECK(!abi, "attn: artifact ", path, ": malformed manifest line ", l.number, " '",
                  l.raw, "': duplicate 'attn-abi' line (first on line ", abi->number, ")");
      abi = &l;
    }
  TORCH_CHECK(abi, "attn: artifact ", path,
              ": manifest has no 'attn-abi' line (expected 'attn-abi ", ATTN_ABI_VERSION,
              "' as the first line); manifest was:\n", text);
  long long version = 0;
  if (abi->tokens.size() != 2 || !parse_int(abi->tokens[1], version))
    malformed(*abi, "'attn-abi <integer>'");
  TORCH_CHECK(version == ATTN_ABI_VERSION, "attn: artifact ", path,
              ": ABI version mismatch: expected attn-abi ", ATTN_ABI_VERSION,
              " (ATTN_ABI_VERSION of this runtime), found attn-abi ", version,
              "; recompile the artifact with an attn-compile matching this runtime");
  m.abi_version = static_cast<int>(version);

  std::map<std::string, int> seen;
  for (const auto &l : lines) {
    const std::string &key = l.tokens[0];
    if (key == "attn-abi")
      continue;
    auto it = seen.find(key);
    if (it != seen.end())
      malformed(l, "each key at most once, but '" + key + "' already appeared on line " +
                       std::to_string(it->second));
    seen[key] = l.number;
    const size_t nvalues = l.tokens.size() - 1;

    auto single = [&](std::string &field, const char *what) {
      if (nvalues != 1)
        malformed(l, std::string("'") + key + " <" + what + ">' with exactly one value, found " +
                         std::to_string(nvalues));
      field = l.tokens[1];
    };
    if (key == "kernel") {
      single(m.kernel, "name");
    } else if (key == "normalizer") {
      single(m.normalizer, "name");
    } else if (key == "algorithm") {
      single(m.algorithm, "online|plain|...");
    } else if (key == "denominator") {
      single(m.denominator, "sum|constant|count");
    } else if (key == "mask") {
      single(m.mask, "none|<mask symbol>");
    } else if (key == "params") {
      std::set<std::string> names;
      for (size_t i = 1; i < l.tokens.size(); ++i) {
        const std::string &tok = l.tokens[i];
        auto eq = tok.find('=');
        if (eq == std::string::npos)
          malformed(l, "'params name=value ...' (e.g. 'params tb1=1 td1=1', or just 'params' "
                       "when there are none), found '" +
                           tok + "' without '='");
        std::string name = tok.substr(0, eq), value = tok.substr(eq + 1);
        // A weight: name[AxB]=fill or name[AxB]=identity.
        std::vector<int64_t> shape;
        if (auto open = name.find('['); open != std::string::npos) {
          if (name.back() != ']')
            malformed(l, "a weight 'name[AxB]=init', found '" + tok + "'");
          std::string dims = name.substr(open + 1, name.size() - open - 2) + "x";
          name = name.substr(0, open);
          for (size_t start = 0, x; (x = dims.find('x', start)) != std::string::npos; start = x + 1) {
            long long extent = 0;
            if (!parse_int(dims.substr(start, x - start), extent) || extent <= 0)
              malformed(l, "positive extents in weight '" + tok + "' (e.g. W[64x64])");
            shape.push_back(extent);
          }
        }
        double init = 0;
        bool identity = !shape.empty() && value == "identity";
        if (!is_identifier(name))
          malformed(l, "a parameter name (identifier) before '=', found '" + name + "'");
        if (identity && shape.size() != 2)
          malformed(l, "'identity' for a 2-D weight only, found '" + tok + "'");
        if (!identity && !parse_double(value, init))
          malformed(l, "a finite number after '" + name + "=', found '" + value + "'");
        if (!names.insert(name).second)
          malformed(l, "distinct parameter names, found '" + name + "' twice");
        m.param_names.push_back(name);
        m.param_inits.push_back(init);
        m.param_shapes.push_back(shape);
        m.param_identity.push_back(identity);
      }
    } else if (key == "row-inputs") {
      for (size_t i = 1; i < l.tokens.size(); ++i) {
        if (!is_identifier(l.tokens[i]))
          malformed(l, "'row-inputs name ...' with identifiers, found '" + l.tokens[i] + "'");
        m.row_input_names.push_back(l.tokens[i]);
      }
    } else if (key == "head-dim") {
      long long head_dim = 0;
      if (nvalues != 1 || !parse_int(l.tokens[1], head_dim) || head_dim <= 0)
        malformed(l, "'head-dim <positive integer>'");
      m.head_dim = head_dim;
    } else if (key == "dtypes") {
      if (nvalues == 0)
        malformed(l, "'dtypes' followed by at least one of f32 f64");
      for (size_t i = 1; i < l.tokens.size(); ++i) {
        const std::string &t = l.tokens[i];
        if (t != "f32" && t != "f64")
          malformed(l, "dtypes among f32 f64 (ABI version " + std::to_string(ATTN_ABI_VERSION) +
                           "), found '" + t + "'");
        for (const auto &prev : m.dtypes)
          if (prev == t)
            malformed(l, "distinct dtypes, found '" + t + "' twice");
        m.dtypes.push_back(t);
      }
    } else if (key == "devices") {
      if (nvalues == 0)
        malformed(l, "'devices' followed by at least one device (e.g. 'devices cpu')");
      for (size_t i = 1; i < l.tokens.size(); ++i)
        m.devices.push_back(l.tokens[i]);
    }
    // Unknown keys are ignored: later compilers may add informational lines
    // without changing the ABI version.
  }

  for (const char *required :
       {"kernel", "normalizer", "algorithm", "denominator", "mask", "params", "dtypes", "devices"})
    TORCH_CHECK(seen.count(required), "attn: artifact ", path, ": manifest has no '", required,
                "' line (expected all of attn-abi, kernel, normalizer, algorithm, denominator, "
                "mask, params, dtypes, devices); manifest was:\n",
                text);
  return m;
}

} // namespace

namespace {
std::mutex &cache_mutex() {
  static std::mutex m;
  return m;
}
// Strong references: artifacts stay loaded for the process lifetime (autograd
// graphs and the path-based Python ops refer to them). Leaked on purpose so that
// nothing is unloaded during static destruction.
std::map<std::string, std::shared_ptr<const Library>> &library_cache() {
  static auto *cache = new std::map<std::string, std::shared_ptr<const Library>>();
  return *cache;
}
} // namespace

namespace detail {
std::shared_ptr<const Library> loaded_library(const std::string &canonical_path) {
  std::lock_guard<std::mutex> lock(cache_mutex());
  auto it = library_cache().find(canonical_path);
  TORCH_CHECK(it != library_cache().end(), "attn: internal error: artifact ", canonical_path,
              " is not loaded");
  return it->second;
}
} // namespace detail

struct LibraryLoader {
  static std::shared_ptr<Library> open(const std::string &canonical, const std::string &given,
                                       const FileId &id) {
    // Say "not a shared object" plainly before dlopen's terser message.
    {
      std::ifstream f(canonical, std::ios::binary);
      TORCH_CHECK(f.good(), "attn: cannot read artifact '", given, "' (", canonical, "): ",
                  std::strerror(errno));
      char magic[4] = {0, 0, 0, 0};
      f.read(magic, 4);
      TORCH_CHECK(f.gcount() == 4 && magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' &&
                      magic[3] == 'F',
                  "attn: artifact '", given, "' is not a shared object: expected an ELF .so "
                  "produced by attn-compile, found a file without an ELF header");
    }
    dlerror();
    void *handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *err = dlerror();
      TORCH_CHECK(false, "attn: artifact '", given, "' is not a loadable shared object: dlopen "
                  "failed: ", err ? err : "(no error message)");
    }
    HandleGuard guard{handle};

    dlerror();
    void *msym = dlsym(handle, ATTN_MANIFEST_SYMBOL);
    TORCH_CHECK(msym, "attn: artifact '", given, "' has no '", ATTN_MANIFEST_SYMBOL,
                "' symbol: expected a shared object produced by attn-compile exporting "
                "`const char *", ATTN_MANIFEST_SYMBOL, "(void)`");
    auto manifest_fn = reinterpret_cast<attn_manifest_fn>(msym);
    const char *text = manifest_fn();
    TORCH_CHECK(text, "attn: artifact '", given, "': ", ATTN_MANIFEST_SYMBOL,
                "() returned NULL, expected the manifest text");

    auto lib = std::make_shared<Library>(Library::Token{});
    lib->path_ = canonical;
    lib->manifest_text_ = text;
    lib->manifest_ = parse_manifest(canonical, lib->manifest_text_);

    bool cpu = false;
    for (const auto &d : lib->manifest_.devices)
      cpu = cpu || d == "cpu";
    if (cpu) {
      for (const auto &dt : lib->manifest_.dtypes) {
        std::string fwd = "_mlir_ciface_attn_forward_" + dt;
        std::string bwd = "_mlir_ciface_attn_backward_" + dt;
        void *f = dlsym(handle, fwd.c_str());
        void *b = dlsym(handle, bwd.c_str());
        std::vector<std::string> missing;
        if (!f)
          missing.push_back(fwd);
        if (!b)
          missing.push_back(bwd);
        TORCH_CHECK(missing.empty(), "attn: artifact ", canonical, ": manifest lists dtype ", dt,
                    " (dtypes: ", join(lib->manifest_.dtypes), ") but the entry point(s) ",
                    join(missing, ", "), " are missing");
        if (dt == "f32") {
          lib->fwd_f32_ = reinterpret_cast<attn_forward_fn>(f);
          lib->bwd_f32_ = reinterpret_cast<attn_backward_fn>(b);
        } else {
          lib->fwd_f64_ = reinterpret_cast<attn_forward_fn>(f);
          lib->bwd_f64_ = reinterpret_cast<attn_backward_fn>(b);
        }
      }
    }
    lib->dev_ = id.dev;
    lib->ino_ = id.ino;
    lib->mtime_ns_ = id.mtime_ns;
    lib->size_ = id.size;
    lib->handle_ = handle;
    guard.handle = nullptr; // loaded for good
    return lib;
  }
};

std::shared_ptr<const Library> Library::load(const std::string &path) {
  TORCH_CHECK(!path.empty(), "attn: artifact path is empty, expected the path of a .so "
                             "produced by attn-compile");
  char resolved[PATH_MAX];
  if (!realpath(path.c_str(), resolved)) {
    int err = errno;
    TORCH_CHECK(false, "attn: artifact '", path, "' not found (", std::strerror(err),
                "): expected a shared object produced by `attn-compile in.mlir -o out.so`");
  }
  std::string canonical(resolved);
  struct stat st;
  TORCH_CHECK(stat(canonical.c_str(), &st) == 0, "attn: cannot stat artifact '", path, "': ",
              std::strerror(errno));
  TORCH_CHECK(S_ISREG(st.st_mode), "attn: artifact '", path,
              "' is not a shared object: expected a regular file, found ",
              S_ISDIR(st.st_mode) ? "a directory" : "a special file");
  FileId id = file_id(st);

  std::lock_guard<std::mutex> lock(cache_mutex());
  auto *cache = &library_cache();
  auto it = cache->find(canonical);
  if (it != cache->end()) {
    const Library &lib = *it->second;
    TORCH_CHECK(lib.dev_ == id.dev && lib.ino_ == id.ino && lib.mtime_ns_ == id.mtime_ns &&
                    lib.size_ == id.size,
                "attn: artifact ", canonical,
                " changed on disk after it was loaded in this process; a shared object "
                "cannot be reloaded under the same path: restart the process or compile to "
                "a new path");
    return it->second;
  }
  auto lib = LibraryLoader::open(canonical, path, id);
  (*cache)[canonical] = lib;
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
  const char *tag = dtype_tag(dtype);
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

attn_backward_fn Library::backward_fn(torch::ScalarType dtype) const {
  attn_backward_fn fn = dtype == torch::kFloat ? bwd_f32_ : dtype == torch::kDouble ? bwd_f64_ : nullptr;
  TORCH_CHECK(fn, "attn: artifact ", path_, " has no CPU backward entry point for dtype ", dtype,
              " (dtypes: ", join(manifest_.dtypes), "; devices: ", join(manifest_.devices), ")");
  return fn;
}

} // namespace attn
