#include "core/text_file.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace monarch {

std::string write_text_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return "cannot be written (no such directory, or no permission)";
    out << text;
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      return "writing failed (disk full?)";
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return "cannot be written: " + ec.message();
  }
  return "";
}

}  // namespace monarch
