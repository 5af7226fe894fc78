// Reading and writing calibration profiles ("monarch-profile/1", docs/calibration_profile.md).
#pragma once

#include <string>
#include <string_view>

#include "core/problem.h"
#include "core/profile.h"

namespace monarch {

// The profile as JSON text (2-space indent, trailing newline).
std::string profile_to_json(const CalibrationProfile&);

// Parses and validates a profile. Every problem names its JSON path ("/matmul/3/tflops").
Expected<CalibrationProfile> profile_from_json(std::string_view text);

// Reads a profile file; problems about the file itself name the file path.
Expected<CalibrationProfile> read_profile(const std::string& path);

// Writes the profile to `path` through a temporary file in the same folder and a rename, so
// that `path` holds either its old content or the whole new profile, never a part. Returns the
// problems (empty on success); on failure nothing is left behind.
Problems write_profile(const std::string& path, const CalibrationProfile&);

}  // namespace monarch
