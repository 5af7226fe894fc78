// JSON form of plans and backend results, exactly the shapes of the result file
// (docs/spec/cli.md, "Result file"), plus a content hash used to deduplicate them.
//
// Writers emit every field of the structs in result.h. Readers:
//  - plan_from_json is strict: every degree, the schedule, the recompute mode, sequence
//    parallelism and the ZeRO stage must be present; the three overlap switches and
//    layers_per_stage are optional (Plan defaults); an unknown key is an error, because a plan
//    we do not fully understand must not be run or compared as if we did.
//  - result_from_json checks the type of every known field and the presence of the headline
//    figures; unknown keys are ignored (the spec lets later versions add fields), and "rank"
//    (the position in the ranked list, not a property of the result) is ignored too.
// Problems name the JSON path below `json_path` ("/results/0/plan/pipeline_schedule").
// Numbers that are not finite are written as null (JSON has no NaN) and read back as NaN.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/problem.h"
#include "core/result.h"
#include "core/scenario.h"

namespace monarch {

// Plan object of the result file: tensor_parallel_degree ... zero_stage, the overlap switches
// (overlap_grad_reduce, overlap_param_gather, tp_comm_overlap; ep_comm_overlap when on),
// activation_offload_layers when above 0 and,
// when set, layers_per_stage and (recommendation models) embedding_sharding.
nlohmann::json plan_to_json(const Plan& plan);
Expected<Plan> plan_from_json(const nlohmann::json& j, const std::string& json_path);

// One entry of the result file's "results" array, without "rank" (the caller knows the
// ranking). "measured" and "losses" appear only for measured (real-backend) results;
// "timeline" only when the result has spans.
nlohmann::json result_to_json(const BackendResult& result);
Expected<BackendResult> result_from_json(const nlohmann::json& j, const std::string& json_path);

// One entry of a result's "communication" array: {"kind", "group", "bytes", "count", "time_s"}
// and, when known, "group_size".
nlohmann::json comm_entry_to_json(const CommEntry& entry);

// The result's "failure" section (an injected failure, core/result.h FailureReport).
nlohmann::json failure_to_json(const FailureReport& failure);
Expected<FailureReport> failure_from_json(const nlohmann::json& j, const std::string& json_path);

// One entry of the result file's "rejected" array: {"plan": {...}, "reason": "..."}.
nlohmann::json rejected_to_json(const RejectedPlan& rejected);
Expected<RejectedPlan> rejected_from_json(const nlohmann::json& j, const std::string& json_path);

// A result file (format "monarch-sim-result/1", docs/spec/cli.md "Result file"): what
// `monarch-sim --output` writes for a run and `monarch-sim runs show` prints for a stored one.
struct ResultFileEntry {
  const BackendResult* result = nullptr;  // must outlive the ResultFile
  std::optional<int64_t> rank;            // the plan's position in the ranking; absent: no "rank"
  std::string sharding;                   // recommendation models: "name: description"; empty: none
};
struct ResultFileSearch {
  int64_t plans_in_space = 0;
  int64_t plans_evaluated = 0;
  int64_t plans_fitting = 0;
  int64_t plans_rejected = 0;
};
struct ResultFile {
  nlohmann::json scenario;                 // the scenario object (or its text when it is not JSON)
  nlohmann::json run;                      // runs show: the store's record of the run; null: absent
  int64_t parameters = 0;                  // the model's parameter count; written when > 0
  std::vector<ResultFileEntry> results;
  std::optional<std::vector<RejectedPlan>> rejected;  // absent: no "rejected" array
  const BackendResult* baseline = nullptr;  // the FSDP / ZeRO-3 baseline; null: absent
  std::string baseline_note;                // written with the baseline
  std::optional<ResultFileSearch> search;   // the search's counts; absent: no "search"
};
nlohmann::json result_file_to_json(const ResultFile& file);

// The normalized text of a JSON value: compact, object keys sorted (nlohmann's default object
// is a sorted map), numbers in their shortest round-trip form, invalid UTF-8 replaced by U+FFFD.
// Two documents that differ only in whitespace or key order normalize to the same text.
std::string normalized_dump(const nlohmann::json& j);

// SHA-256 (FIPS 180-4) of normalized_dump(j), as 64 lowercase hex digits. SHA-256 rather than
// a 64-bit hash such as FNV-1a: the hash is the identity of a stored scenario or plan, so an
// accidental collision would silently merge two different plans; 256 bits make that
// negligible, and the value can be checked with `sha256sum` by anyone. Implemented here
// (about 80 lines, tested against the FIPS test vectors) because core/ depends on the
// standard library only.
std::string content_hash(const nlohmann::json& j);

// SHA-256 of arbitrary bytes, 64 lowercase hex digits.
std::string sha256_hex(const std::string& bytes);

}  // namespace monarch
