// Sweep files (run/sweep.h): grid expansion order, explicit points, the point key, refusals,
// and the outcome a worker process sends back.
#include "run/sweep.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "results/test_support.h"

namespace monarch::run {
namespace {

using monarch::testing::TempDir;

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.file(name)) << text;
  return dir.file(name);
}

constexpr const char* kBase = R"({"name": "b", "model": {"preset": "llama3-8b"},
  "cluster": {"gpu": "H100-SXM", "num_gpus": 8}, "training": {"global_batch_size": 64}})";

std::string problems_text(const Problems& ps) {
  std::string s;
  for (const auto& p : ps) s += p.to_string() + "\n";
  return s;
}

TEST(SweepFile, GridIsTheCartesianProductLastPathFastest) {
  TempDir dir;
  write(dir, "base.json", kBase);
  auto spec = read_sweep_file(write(dir, "s.json", R"({"base": "base.json",
    "grid": {"training.precision": ["bf16", "fp8"], "cluster.num_gpus": [8, 16, 32]}})"));
  ASSERT_TRUE(spec.ok()) << problems_text(spec.problems());
  EXPECT_EQ(spec->name, "s");
  EXPECT_EQ(spec->base_path, dir.file("base.json"));
  ASSERT_EQ(spec->points.size(), 6u);
  EXPECT_EQ(overrides_json(spec->points[0]), R"({"cluster.num_gpus":8,"training.precision":"bf16"})");
  EXPECT_EQ(overrides_json(spec->points[1]), R"({"cluster.num_gpus":8,"training.precision":"fp8"})");
  EXPECT_EQ(overrides_json(spec->points[5]), R"({"cluster.num_gpus":32,"training.precision":"fp8"})");
  for (size_t i = 1; i < spec->points.size(); ++i) EXPECT_NE(spec->points[i].key, spec->points[0].key);
}

TEST(SweepFile, KeysFollowTheBaseContentAndTheBackendsNotTheFormatting) {
  TempDir dir;
  write(dir, "base.json", kBase);
  const std::string sweep = write(dir, "s.json", R"({"name": "n", "base": "base.json", "points": [{"cluster.num_gpus": 8}]})");
  const std::string key = read_sweep_file(sweep)->points[0].key;
  write(dir, "base.json", std::string("\n\n  ") + kBase + "\n");  // same content, other spacing
  EXPECT_EQ(read_sweep_file(sweep)->points[0].key, key);
  write(dir, "base.json", R"({"name": "b", "model": {"preset": "llama3-8b"},
    "cluster": {"gpu": "H100-SXM", "num_gpus": 8}, "training": {"global_batch_size": 128}})");
  EXPECT_NE(read_sweep_file(sweep)->points[0].key, key);
  write(dir, "base.json", kBase);
  const std::string with_backends = write(dir, "t.json", R"({"name": "n", "base": "base.json",
    "backends": ["analytical"], "points": [{"cluster.num_gpus": 8}]})");
  EXPECT_NE(read_sweep_file(with_backends)->points[0].key, key);
}

TEST(SweepFile, RefusalsNameTheFileAndJsonPath) {
  TempDir dir;
  write(dir, "base.json", kBase);
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {R"({"base": "base.json"})", "s.json: /: has neither \"grid\" nor \"points\""},
      {R"({"base": "base.json", "grid": {"cluster.num_gpus": 8}})", "s.json: /grid/cluster.num_gpus: found a number, expected a non-empty list"},
      {R"({"base": "base.json", "points": [{"a": 1}, {"a": 1}]})", "s.json: /points/1: repeats point 0"},
      {R"({"base": "base.json", "points": [{}]})", "s.json: /points/0: found an object, expected a non-empty object"},
      {R"({"base": "missing.json", "points": [{"a": 1}]})", "s.json: /base: cannot read"},
      {R"({"base": "base.json", "backends": ["simgrd"], "points": [{"a": 1}]})", "s.json: /backends/0: found \"simgrd\""},
      {R"({"base": "base.json", "grid": {"a": [1,2,3,4,5,6,7,8,9,10], "b": [1,2,3,4,5,6,7,8,9,10],
          "c": [1,2,3,4,5,6,7,8,9,10], "d": [1,2,3,4,5,6,7,8,9,10], "e": [1,2,3,4,5,6,7,8,9,10,11]}})",
       "s.json: /grid: the grid has more than 100000 points"},
      {R"({"base": "base.json", "points": [{"a": 1}], "extra": 1})", "s.json: /extra: unknown key"},
      {"{\"base\": ", "s.json:1:10: JSON syntax error"},
  };
  for (const Case& c : cases) {
    auto spec = read_sweep_file(write(dir, "s.json", c.text));
    ASSERT_FALSE(spec.ok()) << c.text;
    EXPECT_NE(problems_text(spec.problems()).find(c.message), std::string::npos) << c.text << "\n" << problems_text(spec.problems());
  }
}

TEST(SweepOutcome, RoundTripsThroughItsJson) {
  PointOutcome o;
  o.key = "abc";
  o.status = PointStatus::kOk;
  o.best_run = 1;
  o.runs = {testing::sample_record("s", "analytical"), testing::sample_record("s", "simgrid")};
  auto back = point_outcome_from_json(point_outcome_to_json(o), "point 0");
  ASSERT_TRUE(back.ok()) << problems_text(back.problems());
  EXPECT_EQ(back->key, "abc");
  EXPECT_EQ(back->best_run, 1);
  ASSERT_EQ(back->runs.size(), 2u);
  EXPECT_EQ(back->runs[1].result.backend, "simgrid");
  EXPECT_EQ(back->runs[1].result.iteration_time_s, o.runs[1].result.iteration_time_s);
  EXPECT_EQ(back->runs[1].result.memory.peak_gib, o.runs[1].result.memory.peak_gib);
  EXPECT_EQ(back->runs[0].scenario_json, o.runs[0].scenario_json);
  EXPECT_EQ(format_utc(back->runs[0].started_at), format_utc(o.runs[0].started_at));
  EXPECT_FALSE(point_outcome_from_json("{\"format\": \"other\"}", "point 0").ok());
  EXPECT_FALSE(point_outcome_from_json("not json", "point 0").ok());
}

}  // namespace
}  // namespace monarch::run
