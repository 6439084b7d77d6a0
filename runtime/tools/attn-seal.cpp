//===- attn-seal.cpp - write or check the checksum trailer of an artifact -===//
//
//   attn-seal FILE...          seal each FILE: replace its checksum trailer (or append
//                              one) so that it covers the current contents
//   attn-seal --check FILE...  print "FILE: ok <sha256>" or what is wrong with each
//                              FILE's trailer; exit status 1 if any is wrong
//
// attn-compile seals what it writes; the runtime refuses files whose trailer does not
// match (attn/checksum.h). Reseal an artifact only after a deliberate edit (strip,
// patchelf) of a file you trust: the trailer checks integrity, not authorship.
// Sealing writes a new file and renames it over FILE, like attn-compile.
//
//===----------------------------------------------------------------------===//
#include "attn/checksum.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

namespace {

bool read_file(const std::string &path, std::string &bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

int check(const std::string &path) {
  using attn::checksum::Seal;
  std::string bytes;
  if (!read_file(path, bytes)) {
    std::cerr << path << ": cannot read: " << std::strerror(errno) << "\n";
    return 1;
  }
  Seal seal = attn::checksum::check(bytes.data(), bytes.size());
  switch (seal.status) {
  case Seal::Ok:
    std::cout << path << ": ok " << attn::checksum::hex(seal.actual) << "\n";
    return 0;
  case Seal::NoTrailer:
    std::cout << path << ": no checksum trailer\n";
    break;
  case Seal::LengthMismatch:
    std::cout << path << ": the trailer covers " << seal.length << " bytes, "
              << seal.content_size << " precede it\n";
    break;
  case Seal::DigestMismatch:
    std::cout << path << ": SHA-256 " << attn::checksum::hex(seal.actual)
              << ", the trailer says " << attn::checksum::hex(seal.stored) << "\n";
    break;
  }
  return 1;
}

int seal(const std::string &path) {
  using attn::checksum::Seal;
  std::string bytes;
  struct stat st;
  if (!read_file(path, bytes) || stat(path.c_str(), &st) != 0) {
    std::cerr << path << ": cannot read: " << std::strerror(errno) << "\n";
    return 1;
  }
  // A trailer (of whatever digest) that covers the bytes before it is replaced.
  Seal old = attn::checksum::check(bytes.data(), bytes.size());
  if (old.status == Seal::Ok || old.status == Seal::DigestMismatch)
    bytes.resize(old.content_size);
  bytes += attn::checksum::trailer(bytes.data(), bytes.size());
  std::string temporary = path + ".attn-seal.tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) {
      std::cerr << temporary << ": cannot write: " << std::strerror(errno) << "\n";
      std::remove(temporary.c_str());
      return 1;
    }
  }
  if (chmod(temporary.c_str(), st.st_mode & 07777) != 0 ||
      std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::cerr << path << ": cannot replace: " << std::strerror(errno) << "\n";
    std::remove(temporary.c_str());
    return 1;
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  bool checking = argc > 1 && std::strcmp(argv[1], "--check") == 0;
  int first = checking ? 2 : 1;
  if (argc <= first) {
    std::cerr << "usage: attn-seal FILE...          seal each artifact (after a deliberate edit)\n"
                 "       attn-seal --check FILE...  verify each artifact's checksum trailer\n";
    return 2;
  }
  int status = 0;
  for (int i = first; i < argc; ++i)
    status |= checking ? check(argv[i]) : seal(argv[i]);
  return status;
}
