// Shared by the results tests: sample runs and a temporary directory.
#pragma once

#include <string>

#include "results/store.h"

namespace monarch::testing {

// One integer from a read-only SQL query on the store file (-1 when no row; throws when the
// query cannot run), to look at what the Store wrote.
int64_t sql_int(const std::string& path, const std::string& sql);

// A complete simulated (or measured) result with memory stages, communication and timeline.
BackendResult sample_result(const std::string& backend, bool measured, int timeline_spans = 4);

// A run of sample_result with a small scenario JSON, fixed times and host.
RunRecord sample_record(const std::string& scenario_name, const std::string& backend, bool measured = false);

// mkdtemp under $TMPDIR (or /tmp); removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Bytes of a file ("" when missing), to check that a refused store was left unchanged.
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

}  // namespace monarch::testing
