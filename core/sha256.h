// SHA-256 (FIPS 180-4), incremental: hash a file of any size in bounded memory.
//   Sha256 h; h.update(data, n); ... std::string hex = h.hex_digest();
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/problem.h"

namespace monarch {

class Sha256 {
 public:
  void update(const void* data, size_t n);
  // 64 lowercase hex digits; the object is spent afterwards.
  std::string hex_digest();

 private:
  void block(const unsigned char* p);
  std::array<uint32_t, 8> h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<unsigned char, 64> buf_{};
  size_t buffered_ = 0;
  uint64_t length_bytes_ = 0;
};

// SHA-256 of a file's bytes and its size; a problem naming the file when it cannot be read.
struct FileDigest {
  std::string sha256;
  int64_t bytes = 0;
};
Expected<FileDigest> sha256_file(const std::string& path);

}  // namespace monarch
