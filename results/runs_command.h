// `monarch-sim runs ...`: look into the results store.
//   runs list [--scenario NAME] [--backend B]     one line per run, newest first
//   runs show ID                                   the whole run as JSON, result-file fields
//   runs compare ID ID                             side by side, differences in percent; the
//                                                  prediction error when both share a plan
//   runs export [--format csv|json] [--scenario NAME] [--backend B]
//   runs export --sweep ID [--format csv|json]    one row per point of a sweep
// `--db FILE` may also appear among the arguments and then wins over db_path.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "results/store.h"

namespace monarch {

// args: what follows "runs" on the command line. db_path: the store (--db); empty means
// default_store_path(). Returns the exit status: 0 success, 2 bad ids, options or store
// (the message on `err` names the option or the store and what was expected).
int run_runs_command(const std::vector<std::string>& args, const std::string& db_path, std::ostream& out,
                     std::ostream& err);

// The JSON of `runs show`: the result file's fields for one result, plus a "run" object
// (id, status, times, host, version, hashes, error).
nlohmann::json stored_run_to_json(const StoredRun& run);

}  // namespace monarch
