#include "core/sha256.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/result_io.h"

namespace monarch {
namespace {

TEST(Sha256, IncrementalEqualsOneShotAcrossBlockBoundaries) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += static_cast<char>('a' + i % 26);
  for (size_t chunk : {1u, 3u, 63u, 64u, 65u, 1000u}) {
    Sha256 h;
    for (size_t i = 0; i < text.size(); i += chunk) h.update(text.data() + i, std::min(chunk, text.size() - i));
    EXPECT_EQ(h.hex_digest(), sha256_hex(text)) << chunk;
  }
  // FIPS 180-4 example "abc".
  Sha256 abc;
  abc.update("abc", 3);
  EXPECT_EQ(abc.hex_digest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, FileDigest) {
  const std::string path = (std::filesystem::temp_directory_path() / "sha256_test_file.bin").string();
  std::string bytes(3 << 20, 'x');
  std::ofstream(path, std::ios::binary) << bytes;
  Expected<FileDigest> d = sha256_file(path);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->bytes, static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(d->sha256, sha256_hex(bytes));
  std::remove(path.c_str());
  EXPECT_FALSE(sha256_file(path));
}

}  // namespace
}  // namespace monarch
