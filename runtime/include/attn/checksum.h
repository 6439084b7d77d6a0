//===- checksum.h - the SHA-256 trailer that seals an attn artifact -*- C++ -*-===//
//
// attn-compile appends a trailer to every artifact it writes, after linking:
//
//   bytes [0, n)         the shared object as the linker wrote it (code, data, manifest)
//   bytes [n, n + 8)     n, little-endian
//   bytes [n + 8, n + 40) SHA-256 of bytes [0, n)
//   bytes [n + 40, n + 48) the magic "attnsum1"
//
// ELF loaders never read past the segments the headers name, so the trailer changes
// nothing for dlopen. The runtime reads the whole file, checks the trailer before it
// dlopen()s anything, and refuses a file without one, with another length (truncated,
// appended to) or another digest (edited, corrupted). It is an integrity check, not an
// authentication: anyone can seal a file (attn-seal), and loading an artifact runs its
// code (docs/artifacts.md, "Trust model").
//
// Header-only and dependency-free: attn-compile (the writer), the runtime (the reader)
// and attn-seal share it.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_CHECKSUM_H
#define ATTN_CHECKSUM_H

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>

namespace attn {
namespace checksum {

constexpr size_t kTrailerSize = 48;
constexpr char kMagic[] = "attnsum1"; // 8 bytes on disk, no NUL
using Digest = std::array<uint8_t, 32>;

/// SHA-256 (FIPS 180-4).
class Sha256 {
public:
  void update(const void *data, size_t size) {
    const auto *p = static_cast<const uint8_t *>(data);
    length_ += size;
    while (size) {
      size_t take = std::min(size, sizeof(block_) - used_);
      std::memcpy(block_ + used_, p, take);
      used_ += take;
      p += take;
      size -= take;
      if (used_ == sizeof(block_)) {
        compress(block_);
        used_ = 0;
      }
    }
  }

  Digest finish() {
    uint64_t bits = length_ * 8;
    uint8_t pad = 0x80;
    update(&pad, 1);
    pad = 0;
    while (used_ != 56)
      update(&pad, 1);
    uint8_t big_endian[8];
    for (int i = 0; i < 8; ++i)
      big_endian[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    update(big_endian, 8);
    Digest out;
    for (int i = 0; i < 8; ++i)
      for (int b = 0; b < 4; ++b)
        out[4 * i + b] = static_cast<uint8_t>(state_[i] >> (24 - 8 * b));
    return out;
  }

private:
  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

  void compress(const uint8_t *chunk) {
    static constexpr uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(chunk[4 * i]) << 24 | uint32_t(chunk[4 * i + 1]) << 16 |
             uint32_t(chunk[4 * i + 2]) << 8 | uint32_t(chunk[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3], e = state_[4],
             f = state_[5], g = state_[6], h = state_[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    const uint32_t add[8] = {a, b, c, d, e, f, g, h};
    for (int i = 0; i < 8; ++i)
      state_[i] += add[i];
  }

  uint32_t state_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t block_[64] = {};
  size_t used_ = 0;
  uint64_t length_ = 0;
};

inline Digest sha256(const void *data, size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.finish();
}

inline std::string hex(const Digest &digest) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t byte : digest) {
    out += digits[byte >> 4];
    out += digits[byte & 15];
  }
  return out;
}

/// The trailer that seals `content` (the bytes it follows).
inline std::string trailer(const void *content, size_t size) {
  std::string out(kTrailerSize, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>(static_cast<uint64_t>(size) >> (8 * i));
  Digest digest = sha256(content, size);
  std::memcpy(&out[8], digest.data(), digest.size());
  std::memcpy(&out[40], kMagic, 8);
  return out;
}

/// What the trailer of a sealed file says about it.
struct Seal {
  enum Status {
    Ok,             // the digest of the content matches
    NoTrailer,      // too short, or the last 8 bytes are not the magic
    LengthMismatch, // the trailer covers `length` bytes, the file holds `content_size`
    DigestMismatch, // `stored` != `actual`
  } status = NoTrailer;
  uint64_t length = 0, content_size = 0;
  Digest stored{}, actual{};
};

/// Checks `file` (a whole sealed file: content, then the trailer).
inline Seal check(const void *file, size_t size) {
  Seal seal;
  const auto *bytes = static_cast<const uint8_t *>(file);
  if (size < kTrailerSize || std::memcmp(bytes + size - 8, kMagic, 8) != 0)
    return seal;
  const uint8_t *t = bytes + size - kTrailerSize;
  for (int i = 0; i < 8; ++i)
    seal.length |= static_cast<uint64_t>(t[i]) << (8 * i);
  seal.content_size = size - kTrailerSize;
  std::memcpy(seal.stored.data(), t + 8, seal.stored.size());
  if (seal.length != seal.content_size) {
    seal.status = Seal::LengthMismatch;
    return seal;
  }
  seal.actual = sha256(bytes, seal.content_size);
  seal.status = seal.actual == seal.stored ? Seal::Ok : Seal::DigestMismatch;
  return seal;
}

} // namespace checksum
} // namespace attn

#endif // ATTN_CHECKSUM_H
