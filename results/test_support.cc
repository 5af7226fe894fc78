#include "results/test_support.h"

#include <sqlite3.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace monarch::testing {

int64_t sql_int(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    throw std::runtime_error("sql_int: " + path + ": cannot run " + sql);
  }
  int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

BackendResult sample_result(const std::string& backend, bool measured, int timeline_spans) {
  BackendResult b;
  b.backend = backend;
  b.plan.tp = 8;
  b.plan.pp = 2;
  b.plan.dp = 4;
  b.plan.vpp = 2;
  b.plan.micro_batch_size = 1;
  b.plan.schedule = Schedule::kInterleaved;
  b.plan.sequence_parallel = true;
  b.plan.recompute = Recompute::kSelective;
  b.plan.layers_per_stage = {16, 16};
  b.iteration_time_s = measured ? 2.5 : 2.25;
  b.tokens_per_s = 1048576.0 / b.iteration_time_s;
  b.model_tflops_per_gpu = 150.5;
  b.hardware_tflops_per_gpu = 160.25;
  b.mfu = 0.4824;
  b.hfu = 0.5136;
  b.model_flops_per_iteration = 3.1e17;
  b.hardware_flops_per_iteration = 3.3e17;
  b.memory.fits = true;
  b.memory.capacity_gib = 76.0;
  b.memory.stages = {{0, 10.5, 5.25, 21.0, 12.125, 1.5, 50.375}, {1, 10.0, 5.0, 20.0, 8.0, 1.0, 44.0}};
  b.memory.peak_gib = 50.375;
  b.time_breakdown_s = {1.5, 0.25, 0.0, 0.05, 0.125, 0.0, 0.2, 0.05, 0.1};
  b.communication = {{CollectiveKind::kAllReduce, GroupKind::kTp, 805306368, 96, 0.25},
                     {CollectiveKind::kReduceScatter, GroupKind::kDp, 402653184, 1, 0.0625},
                     {CollectiveKind::kSendRecv, GroupKind::kPp, 16777216, 32, 0.05}};
  b.measured = measured;
  if (measured) b.losses = {10.75, 9.5, 8.875, 8.25};
  for (int i = 0; i < timeline_spans; ++i)
    b.timeline.push_back({i % 4, i % 2 ? "tp" : "compute", "span " + std::to_string(i),
                          i % 2 ? "collective" : "compute", 0.001 * i, 0.001 * i + 0.0005});
  return b;
}

RunRecord sample_record(const std::string& scenario_name, const std::string& backend, bool measured) {
  RunRecord r;
  r.scenario_name = scenario_name;
  r.scenario_json = R"({"name": ")" + std::string("sample") + R"(", "model": {"preset": "gpt3-1.3b"}, "cluster": {"num_gpus": 64}})";
  r.parameters = 1315758080;
  r.result = sample_result(backend, measured);
  r.started_at = TimePoint(std::chrono::milliseconds(1795000000123LL));
  r.ended_at = r.started_at + std::chrono::milliseconds(4567);
  r.host = "node-7";
  r.software_version = "0.1.0-test";
  return r;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/monarch-store-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
  std::filesystem::remove_all(path_, ec);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace monarch::testing
