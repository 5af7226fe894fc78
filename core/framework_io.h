// Framework config files -> settings (core/framework_bridge.h) -> a scenario document.
// Reads a torchtitan TOML job config (toml++), a Megatron-LM argument list (a launch script or a
// file of flags, split into words as a POSIX shell does), a DeepSpeed config JSON (alone, or
// written into a launch script with a here-document, with the Megatron-DeepSpeed flags), and a
// Megatron-Bridge override list (KEY=VALUE words). Every setting keeps its place, FILE:LINE
// (FILE:/json/path in a DeepSpeed JSON).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/framework_bridge.h"
#include "core/problem.h"

namespace monarch {

// The format a file most likely is: .toml torchtitan, .json DeepSpeed, a script that names a
// DeepSpeed config DeepSpeed, KEY=VALUE overrides of ConfigContainer sections Megatron-Bridge,
// else a Megatron argument list.
ConfigFormat guess_config_format(const std::string& path, const std::string& text);

// The settings of `text` (read from `path`, which only names the places) in `format`.
Expected<std::vector<Setting>> read_framework_settings(const std::string& path, const std::string& text,
                                                       ConfigFormat format);

struct ImportOptions {
  std::optional<ConfigFormat> format;  // --format; absent = guessed
  std::string name;                    // scenario name; empty = the file's stem
  std::string model;                   // --model: a preset name or a Hugging Face config.json path
  std::string cluster_path;            // --cluster: a scenario or a cluster object (JSON)
  std::string gpu = "H100-SXM";        // --gpu
  int64_t num_gpus = 0;                // --num-gpus
  int64_t gpus_per_node = 0;           // --gpus-per-node; 0 = the GPU preset's
};

struct ImportResult {
  nlohmann::json scenario;            // validated, normalized (scenario_to_json) with a description
  ConfigFormat format = ConfigFormat::kMegatron;
  std::vector<std::string> left_out;  // "PLACE: KEY: why"
};

// Reads `path`, maps its settings and validates the scenario they make with the cluster from
// the options. Problems name the file's place or the option.
Expected<ImportResult> import_framework_config(const std::string& path, const ImportOptions& options);

}  // namespace monarch
