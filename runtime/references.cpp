//===- references.cpp - portable artifact references (attn/runtime.h) -------===//
//
// A reference resolves once per process, as long as the file it resolved to exists:
// the resolver may compile (seconds), and it is called again only when that file was
// removed (a cleared cache), to compile it anew.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime.h"
#include "internal.h"

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include <unistd.h>

namespace attn {
namespace {

std::atomic<attn_artifact_resolver_fn> &resolver() {
  static std::atomic<attn_artifact_resolver_fn> fn{nullptr};
  return fn;
}

std::mutex &resolved_mutex() {
  static std::mutex m;
  return m;
}

// reference -> path; leaked like the library cache, for the process lifetime.
std::map<std::string, std::string> &resolved() {
  static auto *paths = new std::map<std::string, std::string>();
  return *paths;
}

/// The start of a reference for messages: the rest is an encoded IR.
std::string abbreviated(const std::string &reference) {
  constexpr size_t kShown = 48;
  return reference.size() <= kShown ? reference : reference.substr(0, kShown) + "...";
}

} // namespace

bool detail::is_artifact_reference(const std::string &artifact) {
  return artifact.rfind(ATTN_ARTIFACT_REFERENCE_PREFIX, 0) == 0;
}

std::string detail::resolve_artifact_reference(const std::string &reference) {
  {
    std::lock_guard<std::mutex> lock(resolved_mutex());
    auto it = resolved().find(reference);
    if (it != resolved().end() && ::access(it->second.c_str(), F_OK) == 0)
      return it->second;
  }
  attn_artifact_resolver_fn fn = resolver().load();
  TORCH_CHECK(fn, "attn: artifact '", abbreviated(reference),
              "' is a portable reference (an exported program names its artifact so); "
              "resolving it compiles the IR it holds, which needs a resolver: `import attn` "
              "(the Python package registers one) before loading the program, or call "
              "attn_set_artifact_resolver");
  // Called without a lock held: the resolver may compile, and the Python one takes
  // the GIL, which a thread waiting on our lock may hold.
  std::string path(4096, '\0'), error(4096, '\0');
  int status = fn(reference.c_str(), path.data(), path.size(), error.data(), error.size());
  path.back() = error.back() = '\0';
  path.resize(std::strlen(path.c_str()));
  error.resize(std::strlen(error.c_str()));
  TORCH_CHECK(status == 0, "attn: cannot resolve artifact reference '", abbreviated(reference),
              "': ", error.empty() ? "the resolver failed without a message" : error);
  TORCH_CHECK(!path.empty() && !is_artifact_reference(path), "attn: the resolver of artifact "
              "reference '", abbreviated(reference), "' returned '", path,
              "', expected the path of an artifact");
  std::lock_guard<std::mutex> lock(resolved_mutex());
  return resolved()[reference] = path;
}

} // namespace attn

extern "C" void attn_set_artifact_resolver(attn_artifact_resolver_fn fn) {
  attn::resolver().store(fn);
}
