// Tests of the attn runtime that need no compiler: artifact loading and manifest
// validation, input validation (which must reject before any kernel runs: the
// `abort` fixture's kernels abort), and dispatch plumbing checked with the `probe`
// fixture, whose entry points copy inputs around instead of computing attention.
#include "attn/checksum.h"
#include "attn/partial.h"
#include "attn/runtime.h"
#include "cuda_driver.h"
#include "internal.h"
#include "work_split.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/autograd.h>
#include <torch/cuda.h>

#include <dlfcn.h>
#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

using attn::Library;
using attn::Options;
using torch::Tensor;

namespace {

// --- helpers ------------------------------------------------------------------

void expect_error(const std::function<void()> &f, std::initializer_list<const char *> needles,
                  const char *stmt) {
  try {
    f();
  } catch (const c10::Error &e) {
    std::string msg = e.what_without_backtrace();
    for (const char *n : needles)
      EXPECT_NE(msg.find(n), std::string::npos)
          << "error of `" << stmt << "` lacks \"" << n << "\"; message was:\n"
          << msg;
    return;
  }
  ADD_FAILURE() << "`" << stmt << "` did not throw c10::Error";
}
#define EXPECT_ATTN_ERROR(stmt, ...) expect_error([&] { (void)(stmt); }, {__VA_ARGS__}, #stmt)

std::string tmpdir() {
  std::string dir = ATTN_TEST_TMPDIR;
  mkdir(dir.c_str(), 0755);
  return dir;
}

void copy_file(const std::string &from, const std::string &to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
}

template <class Fn> Fn probe_symbol(const char *name, const char *fixture = ATTN_FX_PROBE) {
  void *h = dlopen(fixture, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(h, nullptr) << "probe fixture not loaded";
  void *sym = h ? dlsym(h, name) : nullptr;
  EXPECT_NE(sym, nullptr) << name;
  if (h)
    dlclose(h); // drops the NOLOAD reference only
  return reinterpret_cast<Fn>(sym);
}
long long probe_count(const char *name, const char *fixture = ATTN_FX_PROBE) {
  return probe_symbol<long long (*)()>(name, fixture)();
}
void probe_reset(const char *fixture = ATTN_FX_PROBE) {
  probe_symbol<void (*)()>("probe_reset", fixture)();
}

// --- loading and manifest -------------------------------------------------------

/// A manifest text the env_manifest fixture serves, and what its load error must say.
struct ManifestCase {
  std::string text;
  std::vector<std::string> needles;
};

/// Every case's manifest is refused at load with an error naming the artifact and
/// containing the case's needles.
template <size_t N> void expect_manifests_refused(const ManifestCase (&cases)[N]) {
  for (const auto &c : cases) {
    SCOPED_TRACE(c.text);
    setenv("ATTN_FIXTURE_MANIFEST", c.text.c_str(), 1);
    try {
      Library::load(ATTN_FX_ENV_MANIFEST);
      ADD_FAILURE() << "manifest accepted";
    } catch (const c10::Error &e) {
      std::string msg = e.what_without_backtrace();
      EXPECT_NE(msg.find("fx_env_manifest.so"), std::string::npos) << msg;
      for (const std::string &n : c.needles)
        EXPECT_NE(msg.find(n), std::string::npos) << "lacks \"" << n << "\":\n" << msg;
    }
  }
  unsetenv("ATTN_FIXTURE_MANIFEST");
}

// --- the manifest golden files (test/manifest/) ----------------------------------
// The compiler writes them (test/manifest/golden.mlir checks), the runtime's C++
// reader parses them here and the Python reader in test_manifest_golden.py.

attn::Manifest parse_golden(const std::string &name) {
  std::string path = std::string(ATTN_MANIFEST_GOLDEN_DIR) + "/" + name + ".json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return attn::detail::parse_manifest(path, text);
}

TEST(ManifestGolden, ScalarParams) {
  attn::Manifest m = parse_golden("multimax");
  EXPECT_EQ(m.abi_version, ATTN_ABI_VERSION);
  EXPECT_EQ(m.kernel, "multimax_attention");
  EXPECT_EQ(m.normalizer, "multimax");
  EXPECT_EQ(m.algorithm, "online");
  EXPECT_EQ(m.splits.forward, attn::SliceSplit::KeyChunks);
  EXPECT_EQ(m.splits.backward, attn::SliceSplit::KeyChunks);
  EXPECT_TRUE(m.splits.partial_calls);
  EXPECT_EQ(m.denominator, "sum");
  EXPECT_EQ(m.mask, "none");
  EXPECT_EQ(m.param_names, (std::vector<std::string>{"tb1", "td1", "b1", "d1", "tb2", "td2",
                                                      "b2", "d2"}));
  EXPECT_EQ(m.param_inits, (std::vector<double>{1, 1, -1, 1, 1, 1, -2, 2}));
  EXPECT_EQ(m.param_shapes, std::vector<std::vector<int64_t>>(8));
  EXPECT_EQ(m.head_dim, 0);
  EXPECT_EQ(m.dtypes, (std::vector<std::string>{"f32", "f64"}));
  EXPECT_EQ(m.devices, std::vector<std::string>{"cpu"});
  EXPECT_TRUE(m.cuda_targets.empty());
  EXPECT_TRUE(m.triton_kernels.empty());
}

TEST(ManifestGolden, KernelisedWithoutParams) {
  attn::Manifest m = parse_golden("linear");
  EXPECT_EQ(m.algorithm, "kernelised");
  EXPECT_EQ(m.splits.forward, attn::SliceSplit::Whole);
  EXPECT_EQ(m.splits.backward, attn::SliceSplit::Whole);
  EXPECT_FALSE(m.splits.partial_calls);
  EXPECT_TRUE(m.param_names.empty());
  EXPECT_EQ(m.dtypes, std::vector<std::string>{"f64"});
}

TEST(ManifestGolden, Weights) {
  attn::Manifest m = parse_golden("bahdanau");
  EXPECT_EQ(m.param_names, (std::vector<std::string>{"W_q", "W_k", "v"}));
  EXPECT_EQ(m.param_shapes, (std::vector<std::vector<int64_t>>{{32, 32}, {32, 32}, {32}}));
  EXPECT_EQ(m.param_identity, (std::vector<bool>{true, true, false}));
  EXPECT_EQ(m.param_inits[2], 0.125);
  EXPECT_EQ(m.head_dim, 32);
  EXPECT_EQ(parse_golden("luong_general").param_shapes,
            (std::vector<std::vector<int64_t>>{{32, 32}}));
}

TEST(ManifestGolden, TensorInputs) {
  attn::Manifest m = parse_golden("luong_local");
  EXPECT_EQ(m.param_names, std::vector<std::string>{"sigma"});
  EXPECT_EQ(m.param_inits, std::vector<double>{2});
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].name, "p");
  EXPECT_EQ(m.inputs[0].element, "float");
  EXPECT_EQ(m.inputs[0].shape, (std::vector<int64_t>{-1, -1, -1}));
  EXPECT_EQ(m.inputs[0].dims, (std::vector<std::string>{"B", "H", "Nq"}));
  EXPECT_TRUE(m.inputs[0].learnable);
  EXPECT_FALSE(m.inputs[0].init.has_value());
  attn::Manifest ssmax = parse_golden("ssmax");
  ASSERT_EQ(ssmax.inputs.size(), 1u);
  EXPECT_EQ(ssmax.inputs[0].dims, std::vector<std::string>{"H"});
  EXPECT_EQ(ssmax.inputs[0].init, std::optional<double>(0.43));
}

TEST(ManifestGolden, ContractSkipped) {
  // The contract is informational (the schema): checked, and skipped, by this reader.
  attn::Manifest m = parse_golden("cosine");
  EXPECT_EQ(m.kernel, "cosine_attention");
  EXPECT_TRUE(m.param_names.empty());
  EXPECT_EQ(m.dtypes, (std::vector<std::string>{"f32", "f64"}));
  EXPECT_EQ(m.devices, std::vector<std::string>{"cpu"});
}

TEST(ManifestGolden, TritonKernels) {
  attn::Manifest m = parse_golden("softmax-triton");
  EXPECT_EQ(m.devices, (std::vector<std::string>{"cpu", "cuda"}));
  EXPECT_EQ(m.cuda_targets, (std::vector<std::string>{"sm_80", "sm_90"}));
  EXPECT_TRUE(m.triton);
  const std::vector<std::pair<std::string, int64_t>> pairs{
      {"bf16", 64}, {"bf16", 128}, {"f16", 64}, {"f16", 128}};
  EXPECT_EQ(m.triton_kernels, pairs);
}

TEST(LibraryLoad, MissingFile) {
  EXPECT_ATTN_ERROR(Library::load("/nonexistent/dir/softmax.so"), "/nonexistent/dir/softmax.so",
                    "not found", "attn-compile");
  EXPECT_ATTN_ERROR(Library::load(""), "path is empty");
}

TEST(LibraryLoad, NotASharedObject) {
  std::string path = tmpdir() + "/text.so";
  std::ofstream(path) << "attn-abi 8\nthis is not an ELF file\n";
  EXPECT_ATTN_ERROR(Library::load(path), "text.so", "is not a shared object", "ELF");
  EXPECT_ATTN_ERROR(Library::load(tmpdir()), "is not a shared object", "directory");

  std::string corrupt = tmpdir() + "/corrupt.so";
  std::ofstream(corrupt, std::ios::binary) << "\x7f" "ELF garbage garbage garbage";
  EXPECT_ATTN_ERROR(Library::load(corrupt), "corrupt.so", "has no checksum trailer",
                    "truncated", "attn-compile");
}

// --- the checksum trailer and the ELF checks before dlopen -------------------------

std::string read_bytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string &path, const std::string &bytes) {
  unlink(path.c_str()); // a new file, as a compiler writes one
  std::ofstream(path, std::ios::binary) << bytes;
}

/// A copy of the sealed `fixture` at tmpdir()/name whose ELF image (without the
/// trailer) is changed by `edit`, then sealed again when `reseal`.
std::string edited_copy(const char *fixture, const std::string &name,
                        const std::function<void(std::string &)> &edit, bool reseal) {
  std::string bytes = read_bytes(fixture);
  std::string image = bytes.substr(0, bytes.size() - attn::checksum::kTrailerSize);
  edit(image);
  std::string path = tmpdir() + "/" + name;
  write_bytes(path, reseal ? image + attn::checksum::trailer(image.data(), image.size())
                           : image + bytes.substr(bytes.size() - attn::checksum::kTrailerSize));
  return path;
}

TEST(ArtifactChecks, ChecksumTrailer) {
  std::string sealed = read_bytes(ATTN_FX_ABORT);
  ASSERT_GT(sealed.size(), 4096u);
  const size_t trailer = attn::checksum::kTrailerSize;

  std::string unsealed = tmpdir() + "/unsealed.so";
  write_bytes(unsealed, sealed.substr(0, sealed.size() - trailer));
  EXPECT_ATTN_ERROR(Library::load(unsealed), "unsealed.so", "has no checksum trailer",
                    "attn-seal");

  std::string truncated = tmpdir() + "/truncated.so";
  write_bytes(truncated, sealed.substr(0, sealed.size() / 2));
  EXPECT_ATTN_ERROR(Library::load(truncated), "truncated.so", "has no checksum trailer",
                    "truncated");

  std::string spliced = tmpdir() + "/spliced.so";
  write_bytes(spliced, sealed.substr(0, 100) + sealed.substr(101));
  std::string covers = "covers " + std::to_string(sealed.size() - trailer) + " bytes";
  std::string precede = std::to_string(sealed.size() - trailer - 1) + " bytes precede it";
  EXPECT_ATTN_ERROR(Library::load(spliced), "spliced.so", "truncated or spliced",
                    covers.c_str(), precede.c_str());

  // One flipped bit anywhere (here: in the manifest text) changes the digest.
  std::string edited = edited_copy(ATTN_FX_ABORT, "edited.so", [](std::string &image) {
    size_t at = image.find("\"init\": 0.5");
    ASSERT_NE(at, std::string::npos);
    image[at + 10] = '9';
  }, /*reseal=*/false);
  EXPECT_ATTN_ERROR(Library::load(edited), "edited.so", "is corrupt or was modified",
                    "SHA-256 of its", "its checksum trailer says");

  std::string appended = tmpdir() + "/appended.so";
  write_bytes(appended, sealed + "x");
  EXPECT_ATTN_ERROR(Library::load(appended), "appended.so", "has no checksum trailer");

  // Resealed after the edit, the same file loads (and says what was edited in).
  std::string resealed = edited_copy(ATTN_FX_ABORT, "resealed.so", [](std::string &image) {
    image[image.find("\"init\": 0.5") + 10] = '9';
  }, /*reseal=*/true);
  auto lib = Library::load(resealed);
  EXPECT_EQ(lib->manifest().param_inits[0], 0.9);
  EXPECT_EQ(lib->sha256().size(), 64u);
}

/// The offset of the dynamic symbol table entry (Elf64_Sym) of `name` in `image`.
size_t dynamic_symbol(const std::string &image, const std::string &name) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, image.data(), sizeof eh);
  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, &image[eh.e_shoff + i * sizeof(Elf64_Shdr)], sizeof sh);
    return sh;
  };
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr dynsym = section(i);
    if (dynsym.sh_type != SHT_DYNSYM)
      continue;
    const char *strings = image.data() + section(dynsym.sh_link).sh_offset;
    for (size_t at = dynsym.sh_offset; at < dynsym.sh_offset + dynsym.sh_size;
         at += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, &image[at], sizeof sym);
      if (name == strings + sym.st_name)
        return at;
    }
  }
  ADD_FAILURE() << "no dynamic symbol " << name;
  return 0;
}

TEST(ArtifactChecks, ElfStructure) {
  struct Case {
    const char *name;
    std::function<void(std::string &)> edit;
    std::vector<const char *> needles;
  };
  auto put = [](std::string &image, size_t offset, const void *value, size_t size) {
    std::memcpy(&image[offset], value, size);
  };
  const uint16_t exec = ET_EXEC, arm = EM_AARCH64, bad_phent = 7;
  const uint64_t far = uint64_t{1} << 40;
  const Case cases[] = {
      {"class32.so", [](std::string &i) { i[EI_CLASS] = ELFCLASS32; }, {"64-bit little-endian"}},
      {"exec.so", [&](std::string &i) { put(i, offsetof(Elf64_Ehdr, e_type), &exec, 2); },
       {"ELF type is 2, not ET_DYN"}},
      {"arm.so", [&](std::string &i) { put(i, offsetof(Elf64_Ehdr, e_machine), &arm, 2); },
       {"built for ELF machine 183"}},
      {"phentsize.so",
       [&](std::string &i) { put(i, offsetof(Elf64_Ehdr, e_phentsize), &bad_phent, 2); },
       {"program headers lie outside the file"}},
      {"shoff.so", [&](std::string &i) { put(i, offsetof(Elf64_Ehdr, e_shoff), &far, 8); },
       {"section headers lie outside the file"}},
      // The first loadable segment claims more bytes than the file has (dlopen would
      // map pages past its end: SIGBUS on first touch).
      {"segment.so",
       [&](std::string &i) {
         Elf64_Ehdr eh;
         std::memcpy(&eh, i.data(), sizeof eh);
         for (size_t p = 0; p < eh.e_phnum; ++p) {
           size_t at = eh.e_phoff + p * sizeof(Elf64_Phdr);
           Elf64_Phdr ph;
           std::memcpy(&ph, &i[at], sizeof ph);
           if (ph.p_type == PT_LOAD) {
             ph.p_filesz = i.size() + 4096;
             std::memcpy(&i[at], &ph, sizeof ph);
             return;
           }
         }
       },
       {"loadable segment", "extends past the end of the file"}},
      // An entry point turned into an indirect function: dlopen would run it as its
      // resolver while relocating.
      {"ifunc.so",
       [&](std::string &i) {
         size_t at = dynamic_symbol(i, "_mlir_ciface_attn_forward_f32") + offsetof(Elf64_Sym, st_info);
         i[at] = static_cast<char>(ELF64_ST_INFO(STB_GLOBAL, STT_GNU_IFUNC));
       },
       {"is an indirect function (STT_GNU_IFUNC), whose resolver dlopen would run"}},
  };
  for (const auto &c : cases) {
    SCOPED_TRACE(c.name);
    std::string path = edited_copy(ATTN_FX_ABORT, c.name, c.edit, /*reseal=*/true);
    try {
      Library::load(path);
      ADD_FAILURE() << "accepted";
    } catch (const c10::Error &e) {
      std::string msg = e.what_without_backtrace();
      EXPECT_NE(msg.find(c.name), std::string::npos) << msg;
      EXPECT_NE(msg.find("is not a loadable shared object"), std::string::npos) << msg;
      for (const char *n : c.needles)
        EXPECT_NE(msg.find(n), std::string::npos) << "lacks \"" << n << "\":\n" << msg;
    }
  }
}

TEST(ArtifactChecks, SymbolTypes) {
  EXPECT_ATTN_ERROR(Library::load(ATTN_FX_DATA_MANIFEST), "fx_data_manifest.so",
                    "exports 'attn_manifest' as a data object",
                    "expected a function `const char *attn_manifest(void)`");
  EXPECT_ATTN_ERROR(Library::load(ATTN_FX_DATA_ENTRY), "fx_data_entry.so",
                    "exports '_mlir_ciface_attn_forward_f32' as a data object",
                    "expected a function");
  // The ABI probe without attn_signature (renamed in its symbol table).
  std::string unsigned_path = edited_copy(ATTN_FX_ABORT, "no_signature.so", [](std::string &i) {
    size_t at = i.find(std::string("attn_signature") + '\0');
    ASSERT_NE(at, std::string::npos);
    i[at + 5] = 'S';
  }, /*reseal=*/true);
  EXPECT_ATTN_ERROR(Library::load(unsigned_path), "no_signature.so",
                    "has no 'attn_signature' symbol", "const int64_t attn_signature[]");
}

/// A valid manifest of the env_manifest fixture (no params, no tensor inputs, f32 on
/// the CPU), for the cases below to damage.
nlohmann::json valid_manifest() {
  return nlohmann::json::parse(R"({"abi": )" + std::to_string(ATTN_ABI_VERSION) + R"(,
    "kernel": "k", "normalizer": "n", "algorithm": "online",
    "splits": {"forward": "rows", "backward": "key_chunks", "partial_calls": false},
    "denominator": "sum",
    "mask": "none", "params": [], "inputs": [],
    "contract": {"kind": "scaled_dot", "scale": null, "feature": false},
    "dtypes": ["f32"], "devices": ["cpu"]})");
}

/// valid_manifest() after `edit`, as the text the fixture serves.
std::string damaged(const std::function<void(nlohmann::json &)> &edit) {
  nlohmann::json m = valid_manifest();
  edit(m);
  return m.dump();
}

const nlohmann::json kCudaSection = nlohmann::json::parse(
    R"({"targets": ["sm_80"], "backend": "triton", "kernels": [{"dtype": "f16", "head_dim": 64}]})");

TEST(ArtifactChecks, ManifestAgainstSignature) {
  // The env_manifest fixture's entry points were "compiled for" no params, no tensor
  // inputs and any head dim (its attn_signature).
  const ManifestCase cases[] = {
      {damaged([](auto &m) {
         m["params"] = nlohmann::json::parse(R"([{"name": "a", "shape": [], "init": 1},
                                                  {"name": "b", "shape": [], "init": 2}])");
       }),
       {"does not match its entry points (attn_signature)",
        "params declare 2 params (a, b), the entry points read 0", "recompile"}},
      {damaged([](auto &m) {
         m["inputs"] = nlohmann::json::parse(
             R"([{"name": "p", "element": "float", "shape": ["?", "?", "?"], "learnable": true}])");
       }),
       {"declares 1 tensor inputs (its inputs), the entry points read 0"}},
      {damaged([](auto &m) { m["head_dim"] = 32; }),
       {"head_dim is 32 (0: any), the entry points were compiled for 0"}},
  };
  expect_manifests_refused(cases);
}

TEST(ArtifactChecks, SplitsAgainstEntryPoints) {
  // The splits promise what the entry points must carry: a forward's key chunks need
  // the merge entry point (the env_manifest fixture has none), and partial calls need
  // key chunks both ways.
  const ManifestCase cases[] = {
      {damaged([](auto &m) { m["splits"]["forward"] = "key_chunks"; }),
       {"manifest's splits.forward is key_chunks but the merge entry point "
        "_mlir_ciface_attn_merge_f32 is missing; recompile the artifact"}},
      {damaged([](auto &m) { m["splits"]["partial_calls"] = true; }),
       {"manifest field 'splits.partial_calls': expected false unless splits.forward and "
        "splits.backward are key_chunks",
        "found true with forward \"rows\", backward \"key_chunks\""}},
      {damaged([](auto &m) { m["splits"].erase("backward"); }),
       {"manifest field 'splits.backward': expected one of whole, rows, key_chunks, found "
        "nothing"}},
  };
  expect_manifests_refused(cases);
}

TEST(ArtifactChecks, CpuCostEntries) {
  // One entry per (dtype, head dim), and one without a head dim (the generic loops)
  // for every dtype, since the calls no tiled schedule takes cost that.
  const ManifestCase cases[] = {
      {damaged([](auto &m) {
         m["cpu_cost"] = nlohmann::json::parse(
             R"([{"dtype": "f32", "forward": 30, "backward": 20},
                 {"dtype": "f32", "forward": 3, "backward": 2}])");
       }),
       {"manifest field 'cpu_cost[1]': expected one entry per dtype and head dim",
        "whose dtype and head dim an earlier entry has"}},
      {damaged([](auto &m) {
         m["cpu_cost"] = nlohmann::json::parse(
             R"([{"dtype": "f32", "forward": 30, "backward": 20},
                 {"dtype": "f32", "head_dim": 64, "d": 64, "forward": 1, "backward": 1},
                 {"dtype": "f32", "head_dim": 64, "d": 32, "forward": 1, "backward": 1}])");
       }),
       {"manifest field 'cpu_cost[2]': expected one entry per dtype and head dim"}},
      {damaged([](auto &m) {
         m["cpu_cost"] = nlohmann::json::parse(
             R"([{"dtype": "f32", "forward": 30, "backward": 20},
                 {"dtype": "f32", "head_dim": 64, "forward": 1, "backward": 1}])");
       }),
       {"manifest field 'cpu_cost[1]': expected head_dim and d together (a tiled schedule) "
        "or neither"}},
      {damaged([](auto &m) {
         m["cpu_cost"] = nlohmann::json::parse(
             R"([{"dtype": "f32", "head_dim": 64, "d": 64, "forward": 1, "backward": 1}])");
       }),
       {"manifest field 'cpu_cost': expected an entry without head_dim for every dtype of "
        "dtypes",
        "found none for f32"}},
      {damaged([](auto &m) {
         m["cpu_cost"] =
             nlohmann::json::parse(R"([{"dtype": "f32", "forward": -1, "backward": 20}])");
       }),
       {"manifest field 'cpu_cost[0].forward'", "found -1"}},
      {damaged([](auto &m) {
         m["cpu_cost"] = nlohmann::json::parse(R"([{"dtype": "f32", "forward": 30}])");
       }),
       {"manifest field 'cpu_cost[0].backward'", "found nothing"}},
  };
  expect_manifests_refused(cases);
}

TEST(ManifestSchema, RequiresThisAbiVersion) {
  // The schema's version and the runtime's cannot drift apart.
  EXPECT_EQ(attn::detail::manifest_schema_abi(), ATTN_ABI_VERSION);
}

TEST(LibraryLoad, NoManifestSymbol) {
  EXPECT_ATTN_ERROR(Library::load(ATTN_FX_NO_MANIFEST), "fx_no_manifest.so",
                    "has no 'attn_manifest' symbol", "attn-compile");
}

TEST(LibraryLoad, WrongAbiVersion) {
  EXPECT_ATTN_ERROR(Library::load(ATTN_FX_WRONG_ABI), "fx_wrong_abi.so",
                    "ABI version mismatch", "field 'abi': expected", "found 1000",
                    "recompile");
}

TEST(LibraryLoad, MalformedManifest) {
  EXPECT_ATTN_ERROR(Library::load(ATTN_FX_MALFORMED), "fx_malformed.so",
                    "manifest field 'params[0].init': expected a number, or one of identity, "
                    "found nothing");
}

TEST(LibraryLoad, DtypeWithoutEntryPoints) {
  EXPECT_ATTN_ERROR(Library::load(ATTN_FX_MISSING_F64), "fx_missing_f64.so",
                    "manifest lists dtype f64", "_mlir_ciface_attn_forward_f64",
                    "_mlir_ciface_attn_backward_f64", "missing");
}

TEST(LibraryLoad, MalformedManifestVariants) {
  using nlohmann::json;
  const std::string abi = std::to_string(ATTN_ABI_VERSION);
  const ManifestCase cases[] = {
      {"", {"not valid JSON", "expected the JSON object attn-compile writes"}},
      {"attn-abi 8\nkernel k\n",
       {"ABI version mismatch", "text format of an older attn-compile ('attn-abi 8')",
        "JSON manifests of ABI " + abi, "recompile"}},
      {"[1, 2]", {"field '(the document)': expected an object, found [1,2]"}},
      {damaged([](json &m) { m.erase("abi"); }),
       {"field 'abi': expected " + abi + ", found nothing"}},
      {damaged([](json &m) { m["abi"] = "9"; }), {"field 'abi'", "found \"9\""}},
      {damaged([](json &m) { m["abi"] = ATTN_ABI_VERSION + 1; }),
       {"ABI version mismatch", "found " + std::to_string(ATTN_ABI_VERSION + 1)}},
      {damaged([](json &m) { m.erase("dtypes"); }),
       {"field 'dtypes': expected an array, found nothing"}},
      {damaged([](json &m) { m["kernel"] = 3; }),
       {"field 'kernel': expected a string, found 3"}},
      {damaged([](json &m) { m["algorithm"] = "fast"; }),
       {"field 'algorithm': expected one of online, plain, kernelised, scan, implicit, "
        "found \"fast\""}},
      {damaged([](json &m) { m["dtypes"] = {"f16"}; }),
       {"field 'dtypes[0]': expected one of f32, f64, found \"f16\""}},
      {damaged([](json &m) { m["dtypes"] = json::array(); }),
       {"field 'dtypes': expected at least 1 items"}},
      {damaged([](json &m) { m["devices"] = {"cpu", "cpu"}; }),
       {"field 'devices[1]': expected distinct items (it repeats devices[0])"}},
      {damaged([](json &m) {
         m["params"] = json::parse(R"([{"name": "a", "shape": [], "init": 1},
                                       {"name": "a", "shape": [], "init": 2}])");
       }),
       {"field 'params[1].name': expected distinct parameter names, found \"a\" twice"}},
      {damaged([](json &m) { m["params"] = json::parse(R"([{"name": "a", "shape": [], "init": "one"}])"); }),
       {"field 'params[0].init': expected one of identity, found \"one\""}},
      {damaged([](json &m) { m["params"] = json::parse(R"([{"name": "1a", "shape": [], "init": 1}])"); }),
       {"field 'params[0].name': expected a string matching", "found \"1a\""}},
      {damaged([](json &m) { m["params"] = json::parse(R"([{"name": "W", "shape": [4, 0], "init": 1}])"); }),
       {"field 'params[0].shape[1]': expected an integer >= 1, found 0"}},
      {damaged([](json &m) { m["params"] = json::parse(R"([{"name": "v", "shape": [4], "init": "identity"}])"); }),
       {"field 'params[0].init': expected a number (identity is for 2-D weights only)"}},
      {damaged([](json &m) { m["head_dim"] = -3; }),
       {"field 'head_dim': expected an integer >= 1, found -3"}},
      {damaged([](json &m) {
         m["inputs"] = json::parse(R"([{"name": "p", "element": "f16", "shape": ["?"], "learnable": false}])");
       }),
       {"field 'inputs[0].element': expected one of float, i8, i32, i64, found \"f16\""}},
      {damaged([](json &m) {
         m["inputs"] = json::parse(R"([{"name": "p", "element": "float", "shape": ["N"], "learnable": false}])");
       }),
       {"field 'inputs[0].shape[0]': expected one of ?, B, H, Hkv, Nq, Nk, found \"N\""}},
      {damaged([](json &m) {
         m["inputs"] = json::parse(R"([{"name": "p", "element": "float", "shape": ["?", "?", "?", "?", "?"], "learnable": false}])");
       }),
       {"field 'inputs[0].shape': expected at most 4 items"}},
      {damaged([](json &m) {
         m["inputs"] = json::parse(R"([{"name": "p", "element": "i64", "shape": ["?"], "learnable": true}])");
       }),
       {"field 'inputs[0].learnable': expected false for an i64 input"}},
      {damaged([](json &m) {
         m["inputs"] = json::parse(R"([{"name": "p", "element": "float", "shape": ["?"], "learnable": "yes"}])");
       }),
       {"field 'inputs[0].learnable': expected a boolean, found \"yes\""}},
      {damaged([](json &m) {
         m["inputs"] = json::parse(R"([{"name": "p", "element": "float", "shape": ["?"], "learnable": false},
                                       {"name": "p", "element": "i32", "shape": ["?"], "learnable": false}])");
       }),
       {"field 'inputs[1].name': expected distinct input names"}},
  };
  expect_manifests_refused(cases);
}

TEST(LibraryLoad, ManifestParsed) {
  auto lib = Library::load(ATTN_FX_PROBE);
  const auto &m = lib->manifest();
  EXPECT_EQ(m.abi_version, ATTN_ABI_VERSION);
  EXPECT_EQ(m.kernel, "probe_attention");
  EXPECT_EQ(m.normalizer, "probe");
  EXPECT_EQ(m.algorithm, "plain");
  EXPECT_EQ(m.denominator, "constant");
  EXPECT_EQ(m.mask, "none");
  EXPECT_EQ(m.param_names, (std::vector<std::string>{"scale", "shift"}));
  EXPECT_EQ(m.param_inits, (std::vector<double>{2.0, -0.5}));
  EXPECT_EQ(m.dtypes, (std::vector<std::string>{"f32", "f64"}));
  EXPECT_EQ(m.devices, (std::vector<std::string>{"cpu"}));
  EXPECT_NE(lib->manifest_text().find("\"kernel\": \"probe_attention\""), std::string::npos);
  EXPECT_TRUE(lib->has_dtype(torch::kFloat));
  EXPECT_TRUE(lib->has_dtype(torch::kDouble));
  EXPECT_FALSE(lib->has_dtype(torch::kHalf));
  EXPECT_EQ(lib->num_params(), 2);

  Tensor p32 = lib->initial_params();
  EXPECT_EQ(p32.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(p32, torch::tensor({2.0f, -0.5f})));
  Tensor p64 = lib->initial_params(torch::kDouble);
  EXPECT_EQ(p64.scalar_type(), torch::kDouble);
  EXPECT_TRUE(torch::equal(p64, torch::tensor({2.0, -0.5}, torch::kDouble)));
  EXPECT_ATTN_ERROR(lib->initial_params(torch::kInt), "float32 or float64");

  EXPECT_TRUE(m.cuda_targets.empty());
  EXPECT_FALSE(m.triton);
  EXPECT_EQ(lib->triton(), nullptr);

  auto gpu = Library::load(ATTN_FX_TRITON_GPU);
  EXPECT_EQ(gpu->num_params(), 0);
  EXPECT_EQ(gpu->initial_params().sizes(), c10::IntArrayRef({0}));
  EXPECT_ATTN_ERROR(gpu->forward_fn(torch::kFloat), "no CPU forward entry point",
                    "devices: cuda");
}

TEST(LibraryLoad, CudaManifestAndImages) {
  auto lib = Library::load(ATTN_FX_TRITON_GPU);
  const auto &m = lib->manifest();
  EXPECT_EQ(m.devices, (std::vector<std::string>{"cuda"}));
  EXPECT_EQ(m.cuda_targets, (std::vector<std::string>{"sm_80", "sm_90"}));
  EXPECT_TRUE(m.triton);
  ASSERT_EQ(m.triton_kernels.size(), 1u);
  EXPECT_EQ(m.triton_kernels[0], std::make_pair(std::string("bf16"), int64_t{64}));
  // The exported cubins, found by the launch description's symbol names.
  ASSERT_NE(lib->triton(), nullptr);
  ASSERT_EQ(lib->triton()->images.size(), 14u);
  const attn::TritonImage &first = lib->triton()->images.front();
  EXPECT_EQ(first.symbol, "attn_triton_sm_80_bf16_d64_full_attn_fwd");
  EXPECT_STREQ(static_cast<const char *>(first.data), "sm_80 full attn_fwd");
  EXPECT_EQ(first.size, int64_t(sizeof("sm_80 full attn_fwd")));
}

TEST(LibraryLoad, MalformedCudaManifest) {
  using nlohmann::json;
  auto cuda = [](const std::function<void(json &)> &edit) {
    return damaged([&](json &m) {
      m["devices"] = {"cuda"};
      m["cuda"] = kCudaSection;
      edit(m["cuda"]);
    });
  };
  const ManifestCase cases[] = {
      {damaged([](json &m) { m["devices"] = {"cpu", "gpu"}; }),
       {"field 'devices[1]': expected one of cpu, cuda, found \"gpu\""}},
      {damaged([](json &m) { m["devices"] = {"cpu", "cuda"}; }),
       {"field 'cuda': expected the GPU kernels' section, as devices lists cuda, found nothing"}},
      {damaged([](json &m) { m["cuda"] = kCudaSection; }),
       {"field 'cuda': expected no GPU kernels' section, as devices does not list cuda"}},
      {cuda([](json &c) { c["targets"] = {"compute_80"}; }),
       {"field 'cuda.targets[0]': expected a string matching", "found \"compute_80\""}},
      {cuda([](json &c) { c["targets"] = {"sm_80", "sm_80"}; }),
       {"field 'cuda.targets[1]': expected distinct items"}},
      {cuda([](json &c) { c["targets"] = json::array(); }),
       {"field 'cuda.targets': expected at least 1 items"}},
      {cuda([](json &c) { c["backend"] = "mlir"; }),
       {"field 'cuda.backend': expected one of triton, found \"mlir\""}},
      {cuda([](json &c) { c.erase("kernels"); }),
       {"field 'cuda.kernels': expected an array, found nothing"}},
      {cuda([](json &c) { c["kernels"][0]["dtype"] = "f64"; }),
       {"field 'cuda.kernels[0].dtype': expected one of f32, f16, bf16, found \"f64\""}},
      {cuda([](json &c) { c["kernels"][0]["head_dim"] = 0; }),
       {"field 'cuda.kernels[0].head_dim': expected an integer >= 1, found 0"}},
      {cuda([](json &c) { c["kernels"].push_back(c["kernels"][0]); }),
       {"field 'cuda.kernels[1]': expected distinct items (it repeats cuda.kernels[0])"}},
      // Fits the schema, but the fixture exports no launch description.
      {cuda([](json &) {}), {"attn_triton_launch", "not exported"}},
  };
  expect_manifests_refused(cases);
}

/// A launch description (attn/abi.h, attn_triton_launch) of one cubin.
nlohmann::json valid_launch() {
  return nlohmann::json::parse(R"json({"ptxas_version": "12.4", "inputs": [["p", "P", "fp32", ["?"], true]],
    "images": [{"symbol": "attn_triton_sm_80_bf16_d64_full_attn_fwd", "chip": "sm_80",
      "dtype": "bf16", "head_dim": 64, "variant": "full", "kernel": "attn_fwd",
      "function": "attn_fwd", "parameters": [["Q", "*bf16"]], "block_m": 64, "block_n": 32,
      "num_warps": 4, "shared_bytes": 0, "global_scratch_size": 0, "global_scratch_align": 1,
      "profile_scratch_size": 0, "grid": "(cdiv(NQ, BLOCK_M), B * H)", "scale": 0.125}]})json");
}

TEST(TritonLaunch, ReadAgainstTheSchema) {
  const attn::TritonLaunch launch = attn::detail::parse_triton_launch("a.so", valid_launch().dump());
  ASSERT_EQ(launch.images.size(), 1u);
  EXPECT_EQ(launch.images[0].block_m, 64);
  EXPECT_EQ(launch.images[0].parameters[0], std::make_pair(std::string("Q"), std::string("*bf16")));
  ASSERT_EQ(launch.inputs.size(), 1u);
  EXPECT_TRUE(launch.inputs[0].learnable);
  EXPECT_FALSE(launch.decode); // no decode forward: every forward runs attn_fwd
  nlohmann::json decoding = valid_launch();
  decoding["decode"] = {{"max_rows", 16}, {"programs_per_sm", 2}};
  decoding["images"][0]["kernel"] = "attn_fwd_split";
  const attn::TritonLaunch split = attn::detail::parse_triton_launch("a.so", decoding.dump());
  ASSERT_TRUE(split.decode);
  EXPECT_EQ(split.decode->max_rows, 16);
  EXPECT_EQ(split.decode->programs_per_sm, 2);
  EXPECT_EQ(split.images[0].kernel, attn::TritonKernel::ForwardSplit);
  auto damaged_launch = [](const std::function<void(nlohmann::json &)> &edit) {
    nlohmann::json d = valid_launch();
    edit(d);
    return d.dump();
  };
  EXPECT_ATTN_ERROR(attn::detail::parse_triton_launch("a.so", "{"), "a.so: attn_triton_launch",
                    "not valid JSON");
  EXPECT_ATTN_ERROR(
      attn::detail::parse_triton_launch(
          "a.so", damaged_launch([](auto &d) { d["images"][0].erase("shared_bytes"); })),
      "attn_triton_launch field 'images[0].shared_bytes': expected an integer >= 0, found nothing");
  EXPECT_ATTN_ERROR(
      attn::detail::parse_triton_launch(
          "a.so", damaged_launch([](auto &d) { d["images"][0]["block_m"] = "64"; })),
      "field 'images[0].block_m': expected an integer >= 1, found \"64\"");
  EXPECT_ATTN_ERROR(
      attn::detail::parse_triton_launch(
          "a.so", damaged_launch([](auto &d) { d["inputs"][0][4] = 1; })),
      "field 'inputs[0][4]': expected a boolean, found 1");
  EXPECT_ATTN_ERROR(
      attn::detail::parse_triton_launch(
          "a.so", damaged_launch([](auto &d) { d["images"][0]["variant"] = "half"; })),
      "field 'images[0].variant': expected one of full, causal, any, found \"half\"");
  EXPECT_ATTN_ERROR(
      attn::detail::parse_triton_launch(
          "a.so", damaged_launch([](auto &d) { d["decode"] = {{"max_rows", 16}}; })),
      "field 'decode.programs_per_sm': expected an integer >= 1, found nothing");
}

TEST(CudaImages, TargetSyntax) {
  auto sm = attn::detail::parse_cuda_target("sm_86");
  ASSERT_TRUE(sm);
  EXPECT_EQ(sm->major, 8);
  EXPECT_EQ(sm->minor, 6);
  EXPECT_FALSE(sm->arch_specific);
  auto big = attn::detail::parse_cuda_target("sm_120");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->major, 12);
  EXPECT_EQ(big->minor, 0);
  auto hopper = attn::detail::parse_cuda_target("sm_90a");
  ASSERT_TRUE(hopper);
  EXPECT_TRUE(hopper->arch_specific);
  for (const char *bad : {"sm_8", "sm_", "sm_8x0", "compute_80", "SM_80", "sm_80ab", ""})
    EXPECT_FALSE(attn::detail::parse_cuda_target(bad)) << bad;
}

TEST(CudaImages, Choice) {
  using attn::detail::choose_cuda_image;
  const std::vector<std::string> t = {"sm_80", "sm_86", "sm_90"};
  EXPECT_EQ(choose_cuda_image(t, 9, 0), "sm_90");  // exact
  EXPECT_EQ(choose_cuda_image(t, 8, 6), "sm_86");  // exact
  EXPECT_EQ(choose_cuda_image(t, 8, 9), "sm_86");  // newest same major, lower minor
  EXPECT_EQ(choose_cuda_image({"sm_80"}, 8, 6), "sm_80");
  EXPECT_EQ(choose_cuda_image(t, 10, 0), "");      // newer major: nothing fits
  EXPECT_EQ(choose_cuda_image(t, 7, 5), "");       // older: nothing fits
  EXPECT_EQ(choose_cuda_image({"sm_86"}, 8, 0), ""); // a higher minor never runs
  EXPECT_EQ(choose_cuda_image({"sm_90a"}, 9, 0), "sm_90a");
  EXPECT_EQ(choose_cuda_image({"sm_90a", "sm_90"}, 9, 0), "sm_90");
  EXPECT_EQ(choose_cuda_image({"sm_90a"}, 9, 1), ""); // arch-specific: exact only
}

TEST(CudaDriver, MissingDriverIsAClearError) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    GTEST_SKIP() << "SKIP: libcuda.so.1 is installed, the missing-driver error is not exercised";
  }
  EXPECT_ATTN_ERROR(attn::detail::CudaDriver::get(), "no CUDA driver found",
                    "dlopen(\"libcuda.so.1\") failed");
  // Reported again on every use, not only the first.
  EXPECT_ATTN_ERROR(attn::detail::CudaDriver::get(), "no CUDA driver found");
}

TEST(LibraryLoad, CachedPerCanonicalPath) {
  auto a = Library::load(ATTN_FX_PROBE);
  auto b = Library::load(ATTN_FX_PROBE);
  EXPECT_EQ(a.get(), b.get());
  std::string link = tmpdir() + "/probe_link.so";
  unlink(link.c_str());
  ASSERT_EQ(symlink(ATTN_FX_PROBE, link.c_str()), 0);
  EXPECT_EQ(Library::load(link).get(), a.get());
  char *resolved = realpath(ATTN_FX_PROBE, nullptr);
  EXPECT_EQ(a->path(), std::string(resolved));
  free(resolved);
}

TEST(LibraryLoad, ReplacedArtifact) {
  std::string path = tmpdir() + "/rewritten.so", next = tmpdir() + "/rewritten.so.new";
  unlink(path.c_str());
  copy_file(ATTN_FX_ABORT, path);
  auto lib = Library::load(path);
  EXPECT_EQ(lib->manifest().kernel, "abort_attention");
  // Replaced by the same contents (new inode, as another process publishing the
  // same compile does): the same library.
  copy_file(ATTN_FX_ABORT, next);
  ASSERT_EQ(rename(next.c_str(), path.c_str()), 0);
  EXPECT_EQ(Library::load(path).get(), lib.get());
  // Replaced by other contents: refused, with both checksums.
  copy_file(ATTN_FX_PROBE, next);
  ASSERT_EQ(rename(next.c_str(), path.c_str()), 0);
  EXPECT_ATTN_ERROR(Library::load(path), "rewritten.so", "changed on disk",
                    lib->sha256().c_str(), "restart the process");
  // Back to the loaded contents: accepted again.
  copy_file(ATTN_FX_ABORT, next);
  ASSERT_EQ(rename(next.c_str(), path.c_str()), 0);
  EXPECT_EQ(Library::load(path).get(), lib.get());
}

// --- input validation (abort fixture: f32 only, params alpha, beta) ---------------

class Validation : public ::testing::Test {
protected:
  void SetUp() override {
    lib = Library::load(ATTN_FX_ABORT);
    q = torch::randn({B, H, Nq, d});
    k = torch::randn({B, H, Nk, d});
    v = torch::randn({B, H, Nk, dv});
    params = lib->initial_params();
  }
  static constexpr int64_t B = 2, H = 3, Nq = 5, Nk = 7, d = 4, dv = 6;
  std::shared_ptr<const Library> lib;
  Tensor q, k, v, params;
};

TEST_F(Validation, Ranks) {
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q[0], k, v, params), "q must be a 4-D tensor",
                    "[B, H, Nq, d]", "got a 3-D tensor of shape [3, 5, 4]");
  EXPECT_ATTN_ERROR(attn::attention(lib, q, k.unsqueeze(0), v, params),
                    "k must be a 4-D tensor", "got a 5-D tensor");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k, v.flatten(0, 1), params),
                    "v must be a 4-D tensor", "[B, H_kv, Nk, dv]");
}

TEST_F(Validation, ShapeAgreement) {
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, torch::randn({B + 1, H, Nk, d}), v, params),
                    "batch size (dim 0) of q and k must agree", "got 2", "and 3");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k, torch::randn({B, H + 1, Nk, dv}), params),
                    "head count (dim 1) of k and v must agree");
  // Grouped-query attention needs the query heads to be a multiple of the key/value heads.
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, torch::randn({B, H - 1, Nk, d}),
                                            torch::randn({B, H - 1, Nk, dv}), params),
                    "q has 3 heads and k and v have 2 (dim 1)",
                    "the query heads must be a multiple of the key/value heads");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, torch::randn({B, H, Nk, d + 1}), v, params),
                    "head dim d (dim 3) of q and k must agree", "got 4", "and 5");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k, torch::randn({B, H, Nk + 2, dv}), params),
                    "key count Nk (dim 2) of k and v must agree", "got 7", "and 9");
}

TEST_F(Validation, EmptyDims) {
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, torch::randn({B, H, 0, d}), k, v, params),
                    "Nq >= 1");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, torch::randn({B, H, 0, d}),
                                            torch::randn({B, H, 0, dv}), params),
                    "Nk >= 1");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, torch::randn({B, H, Nq, 0}),
                                            torch::randn({B, H, Nk, 0}), v, params),
                    "head dim d must be >= 1");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k, torch::randn({B, H, Nk, 0}), params),
                    "value dim dv must be >= 1");
}

TEST_F(Validation, Dtypes) {
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q.to(torch::kDouble), k.to(torch::kDouble),
                                            v.to(torch::kDouble), params.to(torch::kDouble)),
                    "q has dtype float64", "compiled for dtypes f32 only");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q.to(torch::kHalf), k, v, params),
                    "q has dtype float16", "expected float32 or float64");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q.to(torch::kInt), k, v, params),
                    "q has dtype int32");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k.to(torch::kDouble), v, params),
                    "k has dtype float64, expected float32 (the dtype of q)");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k, v.to(torch::kDouble), params),
                    "v has dtype float64, expected float32");
}

TEST_F(Validation, Params) {
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k, v, torch::zeros({3})),
                    "params has 3 elements, expected 2", "abort_attention", "alpha, beta");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k, v, torch::zeros({0})),
                    "params has 0 elements, expected 2");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k, v, Tensor()),
                    "params is None (an undefined tensor)", "alpha, beta");
  // The autograd op checks None arguments before torch's autograd reads their device.
  EXPECT_ATTN_ERROR(attn::attention(lib, q, k, v, Tensor()),
                    "attn::attention: params is None (an undefined tensor)", "alpha, beta");
  EXPECT_ATTN_ERROR(attn::attention(lib, q, Tensor(), v, params),
                    "attn::attention: k is None (an undefined tensor), expected a tensor "
                    "[B, H_kv, Nk, d]");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k, v, torch::zeros({1, 2})),
                    "params must be a 1-D tensor [P] with P = 2", "got a 2-D tensor");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k, v, params.to(torch::kDouble)),
                    "params has dtype float64, expected float32");
  EXPECT_ATTN_ERROR(attn::attention(lib, q, k, v, params.to(torch::kDouble).requires_grad_()),
                    "params has dtype float64, expected float32");
}

TEST_F(Validation, KeyLengths) {
  Options o;
  o.key_lengths = torch::tensor({7, 3}, torch::kInt);
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k, v, params, o),
                    "key_lengths has dtype int32, expected int64");
  o.key_lengths = torch::tensor({7, 3, 1}, torch::kLong);
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k, v, params, o),
                    "key_lengths must have shape [B] = [2], got shape [3]");
  o.key_lengths = torch::tensor({{7, 3}}, torch::kLong);
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k, v, params, o), "shape [B]");
  o.key_lengths = torch::tensor({7, 8}, torch::kLong);
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, k, v, params, o), "key_lengths[1] = 8",
                    "[0, Nk] = [0, 7]");
  o.key_lengths = torch::tensor({-1, 0}, torch::kLong);
  EXPECT_ATTN_ERROR(attn::attention(lib, q, k, v, params, o), "key_lengths[0] = -1");
}

TEST_F(Validation, Devices) {
  auto meta = torch::empty({B, H, Nq, d}, torch::TensorOptions().device(torch::kMeta));
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, meta, k, v, params), "q is on device meta",
                    "expected a CPU tensor", "devices: cpu");
  auto gpu = Library::load(ATTN_FX_TRITON_GPU);
  EXPECT_ATTN_ERROR(attn::attention_forward(gpu, q, k, v, Tensor()), "q is a CPU tensor",
                    "fx_triton_gpu.so has no CPU code (devices: cuda)");
  EXPECT_ATTN_ERROR(attn::attention_forward(nullptr, q, k, v, params), "lib is null");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, Tensor(), k, v, params),
                    "q is None (an undefined tensor)");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q.to_sparse(), k, v, params), "q has layout",
                    "dense");
}

TEST_F(Validation, CudaTensorsWithCpuOnlyArtifact) {
  if (!torch::cuda::is_available())
    GTEST_SKIP() << "SKIP: no CUDA device, the CUDA-tensor error path is not exercised";
  auto qc = q.cuda(), kc = k.cuda(), vc = v.cuda();
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, qc, kc, vc, params.cuda()), "q is on cuda:0",
                    "compiled without CUDA code (devices: cpu)", "--cuda-targets=");
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, kc, v, params), "k is on cuda:0");
}

TEST_F(Validation, BackwardInputs) {
  Tensor o = torch::zeros({B, H, Nq, dv}), rm = torch::zeros({B, H, Nq}), rs = rm.clone();
  EXPECT_ATTN_ERROR(attn::attention_backward(lib, q, k, v, params, o, rm, rs,
                                             torch::zeros({B, H, Nq, dv + 1})),
                    "grad_out must have shape [2, 3, 5, 6]", "got [2, 3, 5, 7]");
  EXPECT_ATTN_ERROR(attn::attention_backward(lib, q, k, v, params, o, rm.unsqueeze(-1), rs, o),
                    "row_max must have shape [2, 3, 5]");
  EXPECT_ATTN_ERROR(
      attn::attention_backward(lib, q, k, v, params, o, rm, rs.to(torch::kDouble), o),
      "row_sum has dtype float64, expected float32");
}

// --- dispatch (probe fixture) -------------------------------------------------------

struct ProbeRef {
  Tensor o, row_max, row_sum;
};

// What the probe's forward writes (see fixtures/probe.c).
ProbeRef probe_forward_ref(const Tensor &q, const Tensor &v, const Tensor &params,
                           const std::vector<int64_t> &kv, bool causal) {
  const int64_t B = q.size(0), H = q.size(1), Nq = q.size(2), d = q.size(3), Nk = v.size(2),
                dv = v.size(3);
  auto L = torch::TensorOptions().dtype(torch::kLong);
  Tensor o = q.index_select(3, torch::arange(dv, L) % d) +
             10 * v.index_select(2, torch::arange(Nq, L) % Nk) + params[0];
  Tensor rm = torch::tensor(kv, L).to(q.scalar_type()).view({B, 1, 1}).expand({B, H, Nq});
  Tensor rs = ((causal ? -1 : 1) * (torch::arange(Nq, L) + 1)).to(q.scalar_type()).expand({B, H, Nq});
  return {o, rm, rs};
}

struct ProbeGrads {
  Tensor dq, dk, dv, dparams;
};

ProbeGrads probe_backward_ref(const Tensor &q, const Tensor &k, const Tensor &v,
                              const Tensor &params, const ProbeRef &f, const Tensor &dout,
                              const std::vector<int64_t> &kv, bool causal) {
  const int64_t B = q.size(0), H = q.size(1), Nq = q.size(2), d = q.size(3), Nk = v.size(2),
                dv = v.size(3);
  auto L = torch::TensorOptions().dtype(torch::kLong);
  ProbeGrads g;
  g.dq = dout.index_select(3, torch::arange(d, L) % dv) + f.row_max.unsqueeze(-1);
  g.dk = 2 * k + f.row_sum.index_select(2, torch::arange(Nk, L) % Nq).unsqueeze(-1);
  g.dv = v + f.o.index_select(2, torch::arange(Nk, L) % Nq);
  // Keys past a batch entry's kv_len get no gradient (no call owns them).
  for (int64_t b = 0; b < B; ++b) {
    const int64_t kv_len = kv.size() == 1 ? kv[0] : kv[static_cast<size_t>(b)];
    g.dk[b].narrow(1, kv_len, Nk - kv_len).zero_();
    g.dv[b].narrow(1, kv_len, Nk - kv_len).zero_();
  }
  int64_t kv_sum = 0;
  for (auto x : kv)
    kv_sum += x;
  g.dparams = B * H * params + static_cast<double>(H * kv_sum + (causal ? 100 * B * H : 0));
  return g;
}

class Dispatch : public ::testing::TestWithParam<std::tuple<torch::ScalarType, bool>> {
protected:
  void SetUp() override {
    lib = Library::load(ATTN_FX_PROBE);
    probe_reset();
  }
  void TearDown() override { EXPECT_EQ(probe_count("probe_errors"), 0) << "bad descriptors"; }
  std::shared_ptr<const Library> lib;
};

TEST_P(Dispatch, ForwardSlicesStridesAndMasks) {
  auto [dtype, causal] = GetParam();
  at::set_num_threads(2);
  const int64_t B = 2, H = 3, Nq = 130, Nk = 70, d = 5, dv = 7;
  auto opt = torch::TensorOptions().dtype(dtype);
  // q: transposed view (inner stride Nq); k: broadcast over heads (stride 0);
  // v: every other row of a larger tensor; params: strided.
  Tensor q = torch::randn({B, H, d, Nq}, opt).transpose(2, 3);
  Tensor k = torch::randn({B, 1, Nk, d}, opt).expand({B, H, Nk, d});
  Tensor v = torch::randn({B, H, 2 * Nk, dv}, opt).slice(2, 0, 2 * Nk, 2);
  Tensor params = torch::tensor({3.0, 0.0, -0.25, 0.0}, opt).slice(0, 0, 4, 2);
  ASSERT_FALSE(q.is_contiguous());
  Options o;
  o.is_causal = causal;
  std::vector<int64_t> kv = {70, 33};
  o.key_lengths = torch::tensor(kv, torch::kLong);

  auto [out, rm, rs] = attn::attention_forward(lib, q, k, v, params, o);
  EXPECT_TRUE(out.is_contiguous());
  EXPECT_EQ(out.sizes(), c10::IntArrayRef({B, H, Nq, dv}));
  EXPECT_EQ(rm.sizes(), c10::IntArrayRef({B, H, Nq}));
  EXPECT_EQ(out.scalar_type(), dtype);
  EXPECT_FALSE(out.requires_grad());
  auto ref = probe_forward_ref(q, v, params, kv, causal);
  EXPECT_TRUE(torch::allclose(out, ref.o));
  EXPECT_TRUE(torch::equal(rm, ref.row_max));
  EXPECT_TRUE(torch::equal(rs, ref.row_sum));
  const int64_t rows = attn::forward_rows_per_call(B * H, Nq, at::get_num_threads());
  EXPECT_EQ(rows % attn::kQueryBlock, 0);
  EXPECT_EQ(probe_count("probe_forward_calls"), B * H * ((Nq + rows - 1) / rows));
  EXPECT_EQ(probe_count("probe_max_rows"), std::min(rows, Nq));

  // q's last dim was strided (a transpose): the runtime passed a copy with rows of d.
  EXPECT_EQ(probe_count("probe_q_row_stride"), d);

  // Without key_lengths every row sees all Nk keys.
  auto [out2, rm2, rs2] = attn::attention_forward(lib, q, k, v, params, {causal, {}, {}});
  EXPECT_TRUE(torch::equal(rm2, torch::full({B, H, Nq}, double(Nk), opt)));
}

TEST_P(Dispatch, HeadsMajorViewIsNotCopied) {
  auto [dtype, causal] = GetParam();
  const int64_t B = 2, H = 3, Nq = 10, Nk = 12, d = 4, dv = 5;
  auto opt = torch::TensorOptions().dtype(dtype);
  // The usual [B, N, H, d] projection output viewed as [B, H, N, d]: unit inner
  // stride, rows H*d apart. It must reach the kernel as is.
  Tensor q = torch::randn({B, Nq, H, d}, opt).transpose(1, 2);
  Tensor k = torch::randn({B, Nk, H, d}, opt).transpose(1, 2);
  Tensor v = torch::randn({B, Nk, H, dv}, opt).transpose(1, 2);
  Tensor params = lib->initial_params(dtype);
  auto [out, rm, rs] = attn::attention_forward(lib, q, k, v, params, {causal, {}, {}});
  EXPECT_EQ(probe_count("probe_q_row_stride"), H * d);
  EXPECT_TRUE(torch::allclose(out, probe_forward_ref(q, v, params, {Nk, Nk}, causal).o));
}

TEST_P(Dispatch, AutogradBackward) {
  auto [dtype, causal] = GetParam();
  at::set_num_threads(2);
  const int64_t B = 2, H = 2, Nq = 9, Nk = 11, d = 3, dv = 4;
  auto opt = torch::TensorOptions().dtype(dtype);
  Tensor q = torch::randn({B, H, Nq, d}, opt).requires_grad_();
  Tensor kb = torch::randn({B, 1, Nk, d}, opt).requires_grad_();
  Tensor k = kb.expand({B, H, Nk, d});
  Tensor v = torch::randn({B, H, Nk, dv}, opt).requires_grad_();
  Tensor params = lib->initial_params(dtype).requires_grad_();
  std::vector<int64_t> kv = {11, 4};
  Options o{causal, torch::tensor(kv, torch::kLong), {}};

  Tensor out = attn::attention(lib, q, k, v, params, o);
  EXPECT_TRUE(out.requires_grad());
  ASSERT_TRUE(out.grad_fn());
  Tensor w = torch::randn({B, H, dv, Nq}, opt).transpose(2, 3); // non-contiguous dO
  (out * w).sum().backward();

  torch::NoGradGuard ng;
  auto f = probe_forward_ref(q, v, params, kv, causal);
  EXPECT_TRUE(torch::allclose(out, f.o));
  auto g = probe_backward_ref(q, k, v, params, f, w, kv, causal);
  EXPECT_TRUE(torch::allclose(q.grad(), g.dq));
  EXPECT_TRUE(torch::allclose(kb.grad(), g.dk.sum(1, true))); // through expand
  EXPECT_TRUE(torch::allclose(v.grad(), g.dv));
  EXPECT_TRUE(torch::allclose(params.grad(), g.dparams));
  EXPECT_EQ(probe_count("probe_backward_calls"), B * H);
}

TEST_P(Dispatch, BackwardWithBroadcastGradAndPartialRequiresGrad) {
  auto [dtype, causal] = GetParam();
  const int64_t B = 1, H = 3, Nq = 4, Nk = 6, d = 2, dv = 3;
  auto opt = torch::TensorOptions().dtype(dtype);
  Tensor q = torch::randn({B, H, Nq, d}, opt);
  Tensor k = torch::randn({B, H, Nk, d}, opt);
  Tensor v = torch::randn({B, H, Nk, dv}, opt).requires_grad_();
  Tensor params = lib->initial_params(dtype);
  Tensor out = attn::attention(lib, q, k, v, params, {causal, {}, {}});
  out.sum().backward(); // dO is an expanded scalar: all strides 0
  EXPECT_FALSE(q.grad().defined());
  EXPECT_FALSE(params.grad().defined());
  torch::NoGradGuard ng;
  auto f = probe_forward_ref(q, v, params, {Nk}, causal);
  auto g = probe_backward_ref(q, k, v, params, f, torch::ones_like(out), {Nk}, causal);
  EXPECT_TRUE(torch::allclose(v.grad(), g.dv));

  // attention_backward directly, same numbers.
  auto [o2, rm2, rs2] = attn::attention_forward(lib, q, k, v, params, {causal, {}, {}});
  auto [dq, dk, dv2, dp, dinputs] = attn::attention_backward(lib, q, k, v, params, o2, rm2, rs2,
                                                      torch::ones_like(out), {causal, {}, {}});
  EXPECT_TRUE(torch::allclose(dq, g.dq));
  EXPECT_TRUE(torch::allclose(dk, g.dk));
  EXPECT_TRUE(torch::allclose(dv2, g.dv));
  EXPECT_TRUE(torch::allclose(dp, g.dparams));
  // No tensor inputs: no input gradients.
  EXPECT_TRUE(dinputs.empty());
}

TEST_P(Dispatch, DoubleBackwardRefused) {
  auto [dtype, causal] = GetParam();
  auto opt = torch::TensorOptions().dtype(dtype);
  Tensor q = torch::randn({1, 1, 3, 2}, opt).requires_grad_();
  Tensor out = attn::attention(lib, q, q, q, lib->initial_params(dtype), {causal, {}, {}});
  EXPECT_ATTN_ERROR(torch::autograd::grad({out.sum()}, {q}, {}, c10::nullopt, true),
                    "double backward (create_graph=True) is not supported");
}

INSTANTIATE_TEST_SUITE_P(Probe, Dispatch,
                         ::testing::Combine(::testing::Values(torch::kFloat, torch::kDouble),
                                            ::testing::Bool()));

/// The probe's calls are tiny (head dim 8): under the default least work per thread
/// (attn::min_thread_work_nanos) they would all run on the calling thread. 0 splits
/// them as far as their sizes allow, which is what the split tests below check;
/// SmallCallsRunOnTheCaller checks the default.
class SplitEveryCall : public ::testing::Environment {
public:
  void SetUp() override { attn::set_min_thread_work_nanos(0); }
};
const ::testing::Environment *const split_every_call =
    ::testing::AddGlobalTestEnvironment(new SplitEveryCall);

TEST(DispatchThreads, SmallCallsRunOnTheCaller) {
  auto lib = Library::load(ATTN_FX_PROBE);
  at::set_num_threads(2);
  if (at::get_num_threads() < 2)
    GTEST_SKIP() << "SKIP: LibTorch intra-op pool has one thread";
  const double before = attn::set_min_thread_work_nanos(attn::detail::kMinNanosPerThread);
  // 8 heads × 128 rows × 128 keys × (8 + 8) dims: about 50 µs on one thread
  // (work_split.h's estimate), under the 2 × 100 µs that two threads need; 2000 keys,
  // about 740 µs, get both.
  for (auto [keys, threads] : {std::pair<int64_t, int64_t>{128, 1}, {2000, 2}}) {
    probe_reset();
    setenv("ATTN_PROBE_SLEEP_US", "2000", 1);
    Tensor q = torch::randn({2, 4, 128, 8}), k = torch::randn({2, 4, keys, 8});
    attn::attention_forward(lib, q, k, k, lib->initial_params());
    unsetenv("ATTN_PROBE_SLEEP_US");
    EXPECT_EQ(probe_count("probe_forward_calls"), 8) << keys << " keys";
    EXPECT_EQ(probe_count("probe_threads"), threads) << keys << " keys";
    EXPECT_EQ(probe_count("probe_errors"), 0);
  }
  attn::set_min_thread_work_nanos(before);
}

// The estimate reads the manifest's cpu_cost: the same call costs 30 times more where
// no tiled schedule takes its head dim (fx_probe_rows: tiled at d = 8 only).
TEST(DispatchThreads, GenericLoopsAreWorthMoreThreads) {
  auto lib = Library::load(ATTN_FX_PROBE_ROWS);
  at::set_num_threads(2);
  if (at::get_num_threads() < 2)
    GTEST_SKIP() << "SKIP: LibTorch intra-op pool has one thread";
  const double before = attn::set_min_thread_work_nanos(attn::detail::kMinNanosPerThread);
  // 8 heads × 128 rows × 128 keys × (d + d) dims: at d = 8 about 50 µs at the tiled
  // rate, one thread; at d = 4 (generic loops) 25 µs × 30, both threads.
  for (auto [d, threads] : {std::pair<int64_t, int64_t>{8, 1}, {4, 2}}) {
    probe_reset(ATTN_FX_PROBE_ROWS);
    setenv("ATTN_PROBE_SLEEP_US", "2000", 1);
    Tensor q = torch::randn({2, 4, 128, d});
    attn::attention_forward(lib, q, q, q, lib->initial_params());
    unsetenv("ATTN_PROBE_SLEEP_US");
    EXPECT_EQ(probe_count("probe_threads", ATTN_FX_PROBE_ROWS), threads) << "d = " << d;
    EXPECT_EQ(probe_count("probe_errors", ATTN_FX_PROBE_ROWS), 0);
  }
  attn::set_min_thread_work_nanos(before);
}

TEST(DispatchThreads, UsesTheIntraOpPool) {
  auto lib = Library::load(ATTN_FX_PROBE);
  probe_reset();
  at::set_num_threads(2);
  if (at::get_num_threads() < 2)
    GTEST_SKIP() << "SKIP: LibTorch intra-op pool has one thread";
  setenv("ATTN_PROBE_SLEEP_US", "2000", 1);
  Tensor q = torch::randn({2, 4, 128, 8});
  attn::attention_forward(lib, q, q, q, lib->initial_params());
  unsetenv("ATTN_PROBE_SLEEP_US");
  // 8 heads already give 4 items per thread: one call per head, all 128 rows.
  EXPECT_EQ(attn::forward_rows_per_call(8, 128, 2), 128);
  EXPECT_EQ(probe_count("probe_forward_calls"), 8);
  EXPECT_EQ(probe_count("probe_threads"), 2)
      << "forward calls did not run on 2 threads: is the runtime compiled with OpenMP "
         "when ATen uses the OpenMP backend?";
  EXPECT_EQ(probe_count("probe_errors"), 0);
}

TEST(DispatchThreads, KernelisedForwardTakesWholeHeads) {
  // The linear-time form builds its key state in every call: one call per head.
  auto lib = Library::load(ATTN_FX_PROBE_KERNELISED);
  ASSERT_EQ(lib->manifest().algorithm, "kernelised");
  probe_reset(ATTN_FX_PROBE_KERNELISED);
  Tensor q = torch::randn({2, 1, 1000, 8});
  attn::attention_forward(lib, q, q, q, lib->initial_params());
  EXPECT_EQ(probe_count("probe_forward_calls", ATTN_FX_PROBE_KERNELISED), 2);
  EXPECT_EQ(probe_count("probe_max_rows", ATTN_FX_PROBE_KERNELISED), 1000);
  EXPECT_EQ(probe_count("probe_errors", ATTN_FX_PROBE_KERNELISED), 0);
}

/// One slice's backward on 2 threads through a probe (B = H = 1, d = 8): `calls`
/// calls, whose shares the runtime sums to the unsplit gradients.
void expect_split_backward(int64_t Nq, int64_t Nk, bool causal, int64_t calls,
                           const char *fixture = ATTN_FX_PROBE) {
  auto lib = Library::load(fixture);
  probe_reset(fixture);
  const int64_t B = 1, H = 1, d = 8;
  Tensor q = torch::randn({B, H, Nq, d}), k = torch::randn({B, H, Nk, d}),
         v = torch::randn({B, H, Nk, d}), dout = torch::randn({B, H, Nq, d});
  Tensor params = lib->initial_params();
  Options o{causal, {}, {}};
  auto [out, rm, rs] = attn::attention_forward(lib, q, k, v, params, o);
  probe_reset(fixture);
  auto [dq, dk, dv, dp, dinputs] =
      attn::attention_backward(lib, q, k, v, params, out, rm, rs, dout, o);
  EXPECT_EQ(probe_count("probe_backward_calls", fixture), calls);
  EXPECT_EQ(probe_count("probe_errors", fixture), 0);
  auto g = probe_backward_ref(q, k, v, params, probe_forward_ref(q, v, params, {Nk}, causal),
                              dout, {Nk}, causal);
  EXPECT_TRUE(torch::equal(dq, g.dq));
  EXPECT_TRUE(torch::allclose(dk, g.dk));
  EXPECT_TRUE(torch::allclose(dv, g.dv));
  EXPECT_TRUE(torch::allclose(dp, g.dparams));
}

TEST(DispatchThreads, BackwardSplitsOneSliceOverThreads) {
  at::set_num_threads(2);
  if (at::get_num_threads() < 2)
    GTEST_SKIP() << "SKIP: LibTorch intra-op pool has one thread";
  for (bool causal : {false, true}) {
    // Each call its own dq rows and its share of the rest: 8 calls of 64 rows (4 per
    // thread), fewer rows where the causal ramp makes rows costlier.
    const int64_t Nq = 512, Nk = 300, splits = 8;
    ASSERT_EQ(attn::backward_query_splits(1, Nq, 2), splits);
    expect_split_backward(Nq, Nk, causal, splits);
    EXPECT_EQ(attn::query_split_begin(4, splits, Nq, Nk, causal), causal ? 331 : 256);
    int64_t most = 0;
    for (int64_t s = 0; s < splits; ++s)
      most = std::max(most, attn::query_split_begin(s + 1, splits, Nq, Nk, causal) -
                                attn::query_split_begin(s, splits, Nq, Nk, causal));
    EXPECT_EQ(probe_count("probe_max_rows"), most);
  }
}

TEST(DispatchThreads, SmallBackwardsRunInOneCall) {
  at::set_num_threads(2);
  if (at::get_num_threads() < 2)
    GTEST_SKIP() << "SKIP: LibTorch intra-op pool has one thread";
  const double before = attn::set_min_thread_work_nanos(attn::detail::kMinNanosPerThread);
  // 512 rows × 300 keys × (3·8 + 2·8): about 130 µs on one thread (work_split.h), under
  // the 200 µs two threads need, so one call where BackwardSplitsOneSliceOverThreads
  // (the same sizes, every call split) gets 8; 2048 × 1200 keys, about 2 ms, get 8.
  expect_split_backward(512, 300, false, 1);
  expect_split_backward(2048, 1200, false, attn::backward_query_splits(1, 2048, 2));
  EXPECT_EQ(attn::backward_query_splits(1, 2048, 2), 8);
  attn::set_min_thread_work_nanos(before);
}

TEST(DispatchThreads, BackwardSplitsFewQueriesOverKeys) {
  at::set_num_threads(2);
  if (at::get_num_threads() < 2)
    GTEST_SKIP() << "SKIP: LibTorch intra-op pool has one thread";
  // One decoder step against 2100 keys (4 whole blocks of kKeyBlock): four key
  // chunks, each key row from one, dq and dparams summed over them.
  ASSERT_EQ(attn::key_splits(1, 2100, 2), 4);
  for (bool causal : {false, true})
    expect_split_backward(1, 2100, causal, 4);
}

TEST(DispatchThreads, TheManifestsSplitsDecideNotItsAlgorithm) {
  at::set_num_threads(2);
  if (at::get_num_threads() < 2)
    GTEST_SKIP() << "SKIP: LibTorch intra-op pool has one thread";
  // An online kernel whose manifest says its calls split rows only: the decoder step
  // that BackwardSplitsFewQueriesOverKeys splits into four key chunks runs in one call
  // over every key, and no caller's key block is taken.
  auto lib = Library::load(ATTN_FX_PROBE_ROWS);
  ASSERT_EQ(lib->manifest().algorithm, "online");
  ASSERT_EQ(lib->manifest().splits.backward, attn::SliceSplit::Rows);
  for (bool causal : {false, true})
    expect_split_backward(1, 2100, causal, 1, ATTN_FX_PROBE_ROWS);
  probe_reset(ATTN_FX_PROBE_ROWS);
  Tensor q = torch::randn({1, 1, 1, 8}), k = torch::randn({1, 1, 65536, 8});
  attn::attention_forward(lib, q, k, k, lib->initial_params());
  EXPECT_EQ(probe_count("probe_forward_calls", ATTN_FX_PROBE_ROWS), 1);
  EXPECT_ATTN_ERROR(attn::attention_partial_forward(lib, q, k, k, lib->initial_params()),
                    "attn::attention_partial_forward: kernel probe_attention takes no key "
                    "blocks from its caller (its manifest's splits.partial_calls is false)");
}

TEST(DispatchThreads, WholeSliceCallsRefuseBlocksAndPositions) {
  // A kernelised call takes its whole slice from position 0 (abi.h): no key block of
  // context parallelism, no query_start or key_start.
  auto lib = Library::load(ATTN_FX_PROBE_KERNELISED);
  Tensor q = torch::randn({1, 1, 4, 8});
  EXPECT_ATTN_ERROR(attn::attention_partial_forward(lib, q, q, q, lib->initial_params()),
                    "attn::attention_partial_forward: kernel ",
                    " is kernelised (linear attention): its forward has no partial state");
  Options shifted;
  shifted.key_start = 4;
  EXPECT_ATTN_ERROR(attn::attention_forward(lib, q, q, q, lib->initial_params(), shifted),
                    "attn::attention_forward: kernel ",
                    " is kernelised (the linear-time form), which takes no query_start or "
                    "key_start");
}

TEST(DispatchThreads, KernelisedBackwardTakesWholeHeads) {
  auto lib = Library::load(ATTN_FX_PROBE_KERNELISED);
  at::set_num_threads(2);
  probe_reset(ATTN_FX_PROBE_KERNELISED);
  Tensor q = torch::randn({1, 1, 1000, 8});
  auto [out, rm, rs] = attn::attention_forward(lib, q, q, q, lib->initial_params());
  probe_reset(ATTN_FX_PROBE_KERNELISED);
  attn::attention_backward(lib, q, q, q, lib->initial_params(), out, rm, rs, q);
  EXPECT_EQ(probe_count("probe_backward_calls", ATTN_FX_PROBE_KERNELISED), 1);
  EXPECT_EQ(probe_count("probe_max_rows", ATTN_FX_PROBE_KERNELISED), 1000);
  EXPECT_EQ(probe_count("probe_errors", ATTN_FX_PROBE_KERNELISED), 0);
}

TEST(DispatchThreads, EmptyBatchIsANoOp) {
  auto lib = Library::load(ATTN_FX_PROBE);
  probe_reset();
  Tensor q = torch::randn({0, 2, 5, 3}, torch::kDouble).requires_grad_();
  Tensor p = lib->initial_params(torch::kDouble).requires_grad_();
  Tensor out = attn::attention(lib, q, q, q, p);
  EXPECT_EQ(out.sizes(), c10::IntArrayRef({0, 2, 5, 3}));
  out.sum().backward();
  EXPECT_TRUE(torch::equal(p.grad(), torch::zeros({2}, torch::kDouble)));
  EXPECT_EQ(probe_count("probe_forward_calls"), 0);
}

} // namespace
