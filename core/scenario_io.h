// Scenario files (docs/spec/scenario.md and docs/scenario_extensions.md) <-> Scenario.
// The only place that knows the JSON form of a scenario. Every problem a user can cause is
// returned with the JSON path, the value found and what was expected; all problems are
// collected, not just the first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/problem.h"
#include "core/scenario.h"

namespace monarch {

// Sane upper bounds, checked before anything is sized from a scenario. They are far above any
// machine or model built so far (largest clusters ~1e5 GPUs, largest dense models ~1e5 hidden)
// and far below sizes that would exhaust memory or overflow 64-bit FLOP/byte counts.
inline constexpr int64_t kMaxNumGpus = int64_t{1} << 22;         // 4,194,304 GPUs
inline constexpr int64_t kMaxGpusPerNode = 1024;                 // NVL576 is the largest domain announced
inline constexpr int64_t kMaxNumLayers = 100000;
inline constexpr int64_t kMaxHiddenSize = int64_t{1} << 20;      // 1,048,576
inline constexpr int64_t kMaxAttentionHeads = int64_t{1} << 16;
inline constexpr int64_t kMaxFfnHiddenSize = int64_t{1} << 22;
inline constexpr int64_t kMaxVocabSize = int64_t{1} << 24;       // 16.7 M tokens
inline constexpr int64_t kMaxSeqLength = int64_t{1} << 24;       // 16.7 M tokens per sample
inline constexpr int64_t kMaxExperts = int64_t{1} << 16;
inline constexpr int64_t kMaxGlobalBatchSize = int64_t{1} << 24;  // samples per step
inline constexpr int64_t kMaxSteps = 1000000000;
inline constexpr int64_t kMaxTopK = 100000;
inline constexpr int64_t kMaxEmbeddingTables = 100000;
inline constexpr int64_t kMaxEmbeddingRows = int64_t{1} << 40;
inline constexpr int64_t kMaxEmbeddingDim = int64_t{1} << 16;
inline constexpr int64_t kMaxMlpLayers = 1000;
inline constexpr int64_t kMaxWhatIfEntries = 100000;
inline constexpr double kMaxPeakTflops = 1e6;          // 1 EFLOP/s per GPU
inline constexpr double kMaxMemoryGib = 1e6;
inline constexpr double kMaxBandwidth_GBps = 1e7;
inline constexpr double kMaxPower_W = 1e5;  // one accelerator board
inline constexpr double kMaxLatency_us = 1e7;          // 10 s
inline constexpr double kMaxOversubscription = 1e3;
inline constexpr double kMaxSlowdown = 1e6;
inline constexpr double kMaxCapacityFactor = 1e3;
inline constexpr double kMaxTotalTokens = 1e18;        // ~60x the largest published runs (15.6e12)
inline constexpr double kMaxFailureRate = 1e6;         // interruptions per day per 1k GPUs
inline constexpr double kMaxMtbfHours = 1e9;
inline constexpr double kMaxIntervalS = 1e9;           // checkpoint interval, restart times (~30 years)
inline constexpr int64_t kMaxSpareNodes = 10000000;    // spare nodes beside the job (far beyond any cluster)
inline constexpr int64_t kMaxScenarioFileBytes = int64_t{64} << 20;  // 64 MiB
// Nesting depth of JSON arrays/objects; a scenario needs 4. Deeper text is refused before
// parsing, because building and copying the tree recurses once per level.
inline constexpr int kMaxJsonDepth = 64;

// Parse JSON text; syntax errors become a Problem with line and column
// (where = "SOURCE:LINE:COLUMN").
Expected<nlohmann::json> parse_json_text(std::string_view text, const std::string& source_name);

// Read and parse a JSON file of at most kMaxScenarioFileBytes; problems name the file (and the
// line and column of a syntax error).
Expected<nlohmann::json> read_json_file(const std::string& path);

// Read, apply overrides ("parallelism.tp=4" or "/parallelism/tp=4"; the value is parsed as
// JSON, else taken as a string), validate.
Expected<Scenario> read_scenario_file(const std::string& path,
                                      const std::vector<std::string>& overrides = {});
// base_dir: where relative paths (model.hf_config) are resolved.
Expected<Scenario> scenario_from_json(const nlohmann::json& j, const std::string& base_dir = ".",
                                      const std::vector<std::string>& overrides = {});

// Before a key is set inside the GPU (`cluster.gpu.power_limit_W`): a GPU named by its preset
// ("gpu": "H100-SXM") becomes the object form {"name": "H100-SXM"}, which reads the same. The
// command line's --set and the GUI's editor both call it.
void gpu_as_object(nlohmann::json& scenario);

// Normalized, defaults filled, canonical key names (no aliases, GPU as a full object);
// round-trips through scenario_from_json.
nlohmann::json scenario_to_json(const Scenario&);

// The backends a run uses when the scenario and the command line name none:
// analytical, plus simgrid where it was built. (An empty Scenario::backends means "default".)
std::vector<Backend> default_backends(bool simgrid_built);

// Parse a backend name ("analytical", "simgrid", "real-cpu", "real-gpu"); false when unknown.
bool parse_backend(std::string_view name, Backend* out);

}  // namespace monarch
