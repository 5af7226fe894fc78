// Named GPUs and models a scenario may refer to ("gpu": "H100-SXM", "preset": "llama3-70b").
// Every figure carries its public source in presets.cc. Names match case-insensitively.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/scenario.h"

namespace monarch {

struct GpuPreset {
  GpuSpec spec;  // name, dense peaks, HBM capacity and bandwidth
  // Cluster defaults used when the scenario leaves them out (typical HGX/DGX/NVL system).
  int64_t default_gpus_per_node = 8;
  LinkSpec default_intra_node;   // NVLink per GPU, per direction
  LinkSpec default_inter_node;   // one NIC, per direction
  int64_t default_nics_per_node = 8;
  const char* source = "";       // where the figures come from (one line)
};

struct ModelPreset {
  std::string name;
  ModelConfig config;      // preset field filled with `name`
  const char* source = ""; // paper or config file the numbers come from
};

const std::vector<GpuPreset>& gpu_presets();
const std::vector<ModelPreset>& model_presets();

// nullptr when no preset has this name (case-insensitive).
const GpuPreset* find_gpu_preset(std::string_view name);
const ModelPreset* find_model_preset(std::string_view name);

// Case-insensitive Levenshtein distance.
int edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `name` when it is close enough to be a likely typo, else "".
std::string closest_name(std::string_view name, const std::vector<std::string>& candidates);

std::vector<std::string> gpu_preset_names();
std::vector<std::string> model_preset_names();

}  // namespace monarch
