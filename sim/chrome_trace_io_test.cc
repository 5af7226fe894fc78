#include "sim/chrome_trace_io.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/chrome_trace_check.h"

namespace monarch {
namespace {

TimelineSpan span(int rank, const std::string& stream, const std::string& name, double a, double b,
                  const std::string& cat = "compute") {
  TimelineSpan s;
  s.rank = rank;
  s.stream = stream;
  s.name = name;
  s.category = cat;
  s.start_s = a;
  s.end_s = b;
  return s;
}

BackendResult sample() {
  BackendResult r;
  r.backend = "simgrid";
  r.plan.tp = 2;
  r.plan.pp = 2;
  r.iteration_time_s = 0.01;
  r.timeline.push_back(span(0, "compute", "fwd L0-3 mb0", 0.0, 0.002));
  r.timeline.push_back(span(0, "tp", "ncclAllReduce tp", 0.002, 0.0025, "collective"));
  r.timeline.push_back(span(0, "compute", "fwd L0-3 mb1", 0.0025, 0.0045));
  // Spans that touch up to floating-point noise must still be siblings, not overlaps.
  r.timeline.push_back(span(0, "compute", "bwd L0-3 mb0", 0.0045 - 1e-13, 0.008));
  auto send = span(0, "pp-send", "ncclSend pp", 0.0025, 0.003, "p2p");
  send.peer = 2;
  send.flow_id = 7;
  auto recv = span(2, "pp-recv", "ncclRecv pp", 0.0026, 0.003, "p2p");
  recv.peer = 0;
  recv.flow_id = 7;
  r.timeline.push_back(send);
  r.timeline.push_back(recv);
  r.timeline.push_back(span(2, "compute", "fwd L4-7 mb0", 0.003, 0.005));
  r.memory_timeline.push_back({0, 0.0, 1024.0 * 1024 * 1024});
  r.memory_timeline.push_back({0, 0.002, 1.5 * 1024 * 1024 * 1024});
  return r;
}

TEST(ChromeTrace, FollowsPerfettoRules) {
  const std::string text = chrome_trace_text(sample(), {"unit", 4});
  EXPECT_EQ(testing::check_chrome_trace_rules(text), "");
  const auto doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["otherData"]["world_size"], 4);
  EXPECT_EQ(doc["otherData"]["plan"]["tp"], 2);
  EXPECT_EQ(doc["otherData"]["backend"], "simgrid");
  int slices = 0, counters = 0, flows = 0;
  bool nccl = false, thread_named = false;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++slices;
      if (e["name"] == "ncclAllReduce tp") {
        nccl = true;
        EXPECT_EQ(e["pid"], 0);
        EXPECT_EQ(e["tid"], 1);  // the tp stream
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 2000.0);  // microseconds
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 500.0);
      }
    }
    if (ph == "C") {
      ++counters;
      EXPECT_EQ(e["name"], "memory");
    }
    if (ph == "s" || ph == "f") {
      ++flows;
      EXPECT_EQ(e["id"], 7);
      EXPECT_EQ(e["pid"], ph == "s" ? 0 : 2);
    }
    if (ph == "M" && e["name"] == "thread_name" && e["pid"] == 2 && e["tid"] == 6) {
      thread_named = e["args"]["name"] == "pp-recv";
    }
  }
  EXPECT_EQ(slices, 7);
  EXPECT_EQ(counters, 2);
  EXPECT_EQ(flows, 2);
  EXPECT_TRUE(nccl);
  EXPECT_TRUE(thread_named);
}

TEST(ChromeTrace, OverlappingSpansOnOneTrackAreMadeToNest) {
  BackendResult r;
  r.timeline.push_back(span(0, "compute", "a", 0.0, 0.002));
  r.timeline.push_back(span(0, "compute", "b", 0.001, 0.003));  // overlaps a: clamped
  r.timeline.push_back(span(0, "compute", "c", 0.0005, 0.001));  // inside a: nested
  EXPECT_EQ(testing::check_chrome_trace_rules(chrome_trace_text(r, {})), "");
}

TEST(ChromeTrace, CheckerCatchesBrokenTraces) {
  EXPECT_NE(testing::check_chrome_trace_rules(
                R"({"traceEvents":[{"ph":"X","name":"a","pid":0,"tid":0,"ts":0,"dur":10},)"
                R"({"ph":"X","name":"b","pid":0,"tid":0,"ts":5,"dur":10}]})"),
            "");
  EXPECT_NE(testing::check_chrome_trace_rules(
                R"({"traceEvents":[{"ph":"X","name":"a","pid":0,"tid":0,"ts":5,"dur":1},)"
                R"({"ph":"X","name":"b","pid":0,"tid":1,"ts":1,"dur":1}]})"),
            "");
}

TEST(ChromeTrace, WritesFileOrNamesTheProblem) {
  const std::string path = ::testing::TempDir() + "/monarch_trace_test.json";
  ASSERT_TRUE(write_chrome_trace(path, sample(), {"unit", 4}).empty());
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(testing::check_chrome_trace_rules(ss.str()), "");
  std::remove(path.c_str());
  const auto bad = write_chrome_trace("/nonexistent-dir/x/trace.json", sample(), {});
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].where, "--trace");
}

}  // namespace
}  // namespace monarch
