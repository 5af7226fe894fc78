// Writing a text file so that a failed write leaves nothing half-written.
#pragma once

#include <string>

namespace monarch {

// Writes `text` to `path` through a temporary file beside it renamed into place. Returns "" or
// what went wrong (without the path, which the caller names).
std::string write_text_file_atomically(const std::string& path, const std::string& text);

}  // namespace monarch
