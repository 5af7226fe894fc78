// The plan in the training frameworks' own configuration names, and back.
//
// Export: a chosen plan (with its scenario's model, batch and precision) as a torchtitan v0.2.2
// TOML job config, a Megatron-LM pretrain_gpt.py argument list, a DeepSpeed config JSON with the
// Megatron-DeepSpeed flags, or Megatron-Bridge run_recipe.py overrides. A plan the target cannot
// express is refused with the reason.
// Import: the settings read from such a config (core/framework_io.h reads the files) as scenario
// assignments ("parallelism.tensor_parallel_degree=8"), plus the settings left out, each with
// its place and why.
// The keys of each format were checked against the framework's source; the lists are in
// tests/data/framework_keys/ (tools/framework_keys.py regenerates them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/problem.h"
#include "core/scenario.h"

namespace monarch {

enum class ConfigFormat { kTorchtitan, kMegatron, kDeepspeed, kMegatronBridge };

const char* to_string(ConfigFormat);  // "torchtitan", "megatron", "deepspeed", "megatron-bridge"
bool parse_config_format(std::string_view name, ConfigFormat* out);
inline constexpr const char* kConfigFormatNames = "torchtitan, megatron, deepspeed, megatron-bridge";

struct ExportedConfig {
  std::string text;                   // the file to write
  std::vector<std::string> warnings;  // valid but worth knowing (a model flavor to register, ...)
};

// The plan in `format`'s names. Problems (where = "--to FORMAT") when the target cannot express
// the plan, each naming what and why.
Expected<ExportedConfig> export_plan(const Scenario& scenario, const Plan& plan, ConfigFormat format);

// One setting of a framework config as read: the key in the framework's spelling (torchtitan
// "parallelism.tensor_parallel_degree", Megatron "--tensor-model-parallel-size", DeepSpeed
// "zero_optimization.stage", Megatron-Bridge "model.tensor_model_parallel_size"), its value as
// text ("" for a bare flag; TOML/JSON values in their JSON spelling) and its place ("FILE:LINE"
// or "FILE:/json/path").
struct Setting {
  std::string key;
  std::string value;
  std::string where;
};

// What a config fixes, as scenario assignments for scenario_from_json's overrides ("PATH=VALUE",
// the value in JSON), and what it left out.
struct ImportedConfig {
  std::vector<std::string> assignments;
  std::vector<std::string> assignment_places;  // per assignment: the setting it came from, or ""
  std::vector<std::string> left_out;  // "PLACE: KEY: why", one per setting not carried over
  Problems problems;                  // settings whose value is wrong (where = the place)
};

// num_gpus: the cluster's size (degrees written as -1, "the rest", are derived from it).
// num_layers: the model's layers when known from elsewhere (--model), else 0; torchtitan
// places layers on pipeline stages by a rule that needs it.
ImportedConfig import_settings(ConfigFormat format, const std::vector<Setting>& settings, int64_t num_gpus,
                               int64_t num_layers = 0);

}  // namespace monarch
