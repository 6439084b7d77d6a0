//===- artifact.cpp - checks of an artifact file before it is dlopen()ed --===//
//
// The file is read whole; its checksum trailer (attn/checksum.h) must match, and it
// must be a 64-bit ELF shared object for this machine whose loadable segments lie in
// the file and whose dynamic symbol table defines attn_manifest as a function,
// attn_signature as an object and no indirect function (whose resolver dlopen would
// run). Only then does library.cpp dlopen() it.
//
//===----------------------------------------------------------------------===//
#include "internal.h"

#include "attn/checksum.h"

#include <elf.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace attn {
namespace detail {

namespace {

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#else
constexpr uint16_t kHostMachine = EM_NONE; // not checked
#endif

// Larger files are refused before they are read into memory: artifacts hold a few
// kernels and, with --cuda-targets, their cubins (megabytes).
constexpr uint64_t kMaxArtifactBytes = uint64_t{1} << 30;

// Reads a T at `offset` of `bytes` (unaligned), after the caller checked the bounds.
template <class T> T read_at(const std::string &bytes, uint64_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// Whether [offset, offset + count * size) lies within `limit` bytes (overflow-safe).
bool within(uint64_t offset, uint64_t count, uint64_t size, uint64_t limit) {
  return offset <= limit && (size == 0 || count <= (limit - offset) / size);
}

} // namespace

std::string read_artifact(int fd, uint64_t size, const std::string &given) {
  TORCH_CHECK(size <= kMaxArtifactBytes, "attn: artifact '", given, "' is ", size,
              " bytes; expected an artifact of attn-compile, at most ", kMaxArtifactBytes,
              " bytes");
  std::string bytes(size, '\0');
  size_t got = 0;
  while (got < size) {
    ssize_t n = pread(fd, &bytes[got], size - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR)
      continue;
    TORCH_CHECK(n >= 0, "attn: cannot read artifact '", given, "': ", std::strerror(errno));
    if (n == 0)
      break; // shrank while being read: the checksum tells
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  TORCH_CHECK(bytes.size() >= 4 && std::memcmp(bytes.data(), ELFMAG, SELFMAG) == 0,
              "attn: artifact '", given, "' is not a shared object: expected an ELF .so "
              "produced by attn-compile, found a file without an ELF header");
  return bytes;
}

std::string verify_checksum(const std::string &bytes, const std::string &given) {
  using checksum::Seal;
  Seal seal = checksum::check(bytes.data(), bytes.size());
  const char *remedy = "; recompile it with attn-compile (or, after a deliberate edit such as "
                       "strip, reseal it with attn-seal)";
  switch (seal.status) {
  case Seal::Ok:
    break;
  case Seal::NoTrailer:
    TORCH_CHECK(false, "attn: artifact '", given, "' has no checksum trailer: expected the "
                "SHA-256 trailer attn-compile appends to every artifact it writes; the file "
                "is truncated, was not completely written, was modified, or comes from an "
                "older attn-compile", remedy);
  case Seal::LengthMismatch:
    TORCH_CHECK(false, "attn: artifact '", given, "' was truncated or spliced: its checksum "
                "trailer covers ", seal.length, " bytes, but ", seal.content_size,
                " bytes precede it", remedy);
  case Seal::DigestMismatch:
    TORCH_CHECK(false, "attn: artifact '", given, "' is corrupt or was modified after "
                "attn-compile wrote it: the SHA-256 of its ", seal.content_size, " bytes is ",
                checksum::hex(seal.actual), ", its checksum trailer says ",
                checksum::hex(seal.stored), remedy);
  }
  return checksum::hex(seal.actual);
}

std::map<std::string, ArtifactSymbol> read_elf_symbols(const std::string &file,
                                                       const std::string &given) {
  // The ELF image: the file without its checksum trailer (verified before).
  const uint64_t size = file.size() - checksum::kTrailerSize;
  auto bad = [&](const std::string &what) {
    TORCH_CHECK(false, "attn: artifact '", given, "' is not a loadable shared object: ", what,
                "; expected a shared object produced by attn-compile");
  };
  if (size < sizeof(Elf64_Ehdr))
    bad("its ELF header is cut short");
  auto eh = read_at<Elf64_Ehdr>(file, 0);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    bad("it is not a 64-bit little-endian ELF file");
  if (eh.e_type != ET_DYN)
    bad("its ELF type is " + std::to_string(eh.e_type) + ", not ET_DYN (a shared object)");
  if (kHostMachine != EM_NONE && eh.e_machine != kHostMachine)
    bad("it was built for ELF machine " + std::to_string(eh.e_machine) + ", this process runs "
        "on machine " + std::to_string(kHostMachine));

  // Every loadable segment lies in the file (else dlopen maps pages past its end:
  // SIGBUS at the first touch).
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      !within(eh.e_phoff, eh.e_phnum, sizeof(Elf64_Phdr), size))
    bad("its program headers lie outside the file");
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    auto ph = read_at<Elf64_Phdr>(file, eh.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr));
    if (ph.p_type == PT_LOAD && !within(ph.p_offset, ph.p_filesz, 1, size))
      bad("its loadable segment " + std::to_string(i) + " (bytes " + std::to_string(ph.p_offset) +
          " + " + std::to_string(ph.p_filesz) + ") extends past the end of the file (" +
          std::to_string(size) + " bytes)");
  }

  // The dynamic symbol table (what dlsym() searches) and its string table.
  if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
      !within(eh.e_shoff, eh.e_shnum, sizeof(Elf64_Shdr), size))
    bad("its section headers lie outside the file");
  auto section = [&](uint64_t index) {
    return read_at<Elf64_Shdr>(file, eh.e_shoff + index * sizeof(Elf64_Shdr));
  };
  std::map<std::string, ArtifactSymbol> symbols;
  for (uint16_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr dynsym = section(i);
    if (dynsym.sh_type != SHT_DYNSYM)
      continue;
    if (dynsym.sh_entsize != sizeof(Elf64_Sym) ||
        !within(dynsym.sh_offset, dynsym.sh_size / sizeof(Elf64_Sym), sizeof(Elf64_Sym), size) ||
        dynsym.sh_link >= eh.e_shnum)
      bad("its dynamic symbol table lies outside the file");
    Elf64_Shdr strtab = section(dynsym.sh_link);
    if (strtab.sh_type != SHT_STRTAB || !within(strtab.sh_offset, strtab.sh_size, 1, size))
      bad("the string table of its dynamic symbols lies outside the file");
    const char *strings = file.data() + strtab.sh_offset;
    for (uint64_t s = 0; s < dynsym.sh_size / sizeof(Elf64_Sym); ++s) {
      auto sym = read_at<Elf64_Sym>(file, dynsym.sh_offset + s * sizeof(Elf64_Sym));
      unsigned char bind = ELF64_ST_BIND(sym.st_info);
      // dlopen would call an indirect function's resolver while relocating, before
      // anything else could be checked.
      if (sym.st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym.st_info) == STT_GNU_IFUNC)
        bad("its dynamic symbol " + std::to_string(s) +
            " is an indirect function (STT_GNU_IFUNC), whose resolver dlopen would run; "
            "attn-compile defines none");
      if (sym.st_shndx == SHN_UNDEF || sym.st_name >= strtab.sh_size ||
          (bind != STB_GLOBAL && bind != STB_WEAK) ||
          ELF64_ST_VISIBILITY(sym.st_other) == STV_HIDDEN ||
          ELF64_ST_VISIBILITY(sym.st_other) == STV_INTERNAL)
        continue;
      const char *name = strings + sym.st_name;
      std::string symbol(name, strnlen(name, strtab.sh_size - sym.st_name));
      if (symbol.rfind("attn_", 0) == 0 || symbol.rfind(ATTN_CIFACE_PREFIX "attn_", 0) == 0)
        symbols[symbol] = {ELF64_ST_TYPE(sym.st_info), sym.st_size};
    }
    break;
  }

  auto require = [&](const char *name, unsigned char type, const char *declaration) {
    auto it = symbols.find(name);
    TORCH_CHECK(it != symbols.end(), "attn: artifact '", given, "' has no '", name,
                "' symbol: expected a shared object produced by attn-compile exporting `",
                declaration, "`");
    TORCH_CHECK(it->second.type == type, "attn: artifact '", given, "' exports '", name,
                "' as ", elf_symbol_kind(it->second.type), ", expected ",
                elf_symbol_kind(type), " `", declaration, "`");
  };
  require(ATTN_MANIFEST_SYMBOL, STT_FUNC, "const char *" ATTN_MANIFEST_SYMBOL "(void)");
  require(ATTN_SIGNATURE_SYMBOL, STT_OBJECT, "const int64_t " ATTN_SIGNATURE_SYMBOL "[]");
  return symbols;
}

bool mapped_from(const void *address, const struct stat &file) {
  std::ifstream maps("/proc/self/maps");
  if (!maps)
    return true; // no /proc: nothing to compare with
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::string line;
  while (std::getline(maps, line)) {
    // start-end perms offset major:minor inode [path]
    unsigned long long start = 0, end = 0, offset = 0, inode = 0;
    unsigned major_id = 0, minor_id = 0;
    char perms[8];
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu", &start, &end, perms, &offset,
                    &major_id, &minor_id, &inode) != 7)
      continue;
    if (at >= start && at < end)
      return makedev(major_id, minor_id) == file.st_dev && inode == file.st_ino;
  }
  return false;
}

std::string elf_symbol_kind(unsigned char type) {
  switch (type) {
  case STT_FUNC:
    return "a function";
  case STT_OBJECT:
    return "a data object";
  default:
    return "a symbol of ELF type " + std::to_string(type);
  }
}

} // namespace detail
} // namespace attn
