#include "core/plan_io.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/scenario_io.h"

namespace monarch {
namespace {

// Two ranks of a 2-stage pipeline, one micro-batch: every kind of task once.
PlanGraph tiny() {
  PlanGraph g;
  g.plan.pp = 2;
  g.world_size = 2;
  g.num_micro_batches = 1;
  g.groups.push_back({GroupKind::kPp, {0, 1}});
  for (int32_t r = 0; r < 2; ++r) {
    RankProgram p;
    p.rank = r;
    p.stage = r;
    Task a;
    a.kind = TaskKind::kAlloc;
    a.category = MemCategory::kActivations;
    a.buffer = 0;
    a.bytes = 4096;
    a.micro_batch = 0;
    p.tasks.push_back(a);
    Task c;
    c.kind = TaskKind::kCompute;
    c.phase = Phase::kForward;
    c.op = OpKind::kLayer;
    c.layer = r * 2;
    c.num_layers = 2;
    c.micro_batch = 0;
    c.flops = 1.5e12;
    c.mem_bytes = 3.25e9;
    c.duration_s = 0.0123456789012345;
    c.deps = {0};
    p.tasks.push_back(c);
    Task x;
    x.kind = r == 0 ? TaskKind::kSend : TaskKind::kRecv;
    x.stream = r == 0 ? Stream::kPpSend : Stream::kPpRecv;
    x.peer = 1 - r;
    x.tag = 7;
    x.bytes = 1 << 20;
    x.duration_s = 1e-4;
    x.deps = {1};
    p.tasks.push_back(x);
    Task k;
    k.kind = TaskKind::kCollective;
    k.stream = Stream::kDpComm;
    k.collective = CollectiveKind::kAllReduce;
    k.group = 0;
    k.seq = 0;
    k.dtype = DType::kFp32;
    k.bytes = 123456789012;
    k.count = 3;
    k.duration_s = 0.5;
    p.tasks.push_back(k);
    Task f = a;
    f.kind = TaskKind::kFree;
    f.deps = {1, 3};
    p.tasks.push_back(f);
    g.ranks.push_back(p);
  }
  return g;
}

bool same_task(const Task& a, const Task& b) {
  return a.kind == b.kind && a.stream == b.stream && a.phase == b.phase && a.op == b.op && a.layer == b.layer &&
         a.num_layers == b.num_layers && a.chunk == b.chunk && a.micro_batch == b.micro_batch && a.flops == b.flops &&
         a.mem_bytes == b.mem_bytes && a.duration_s == b.duration_s && a.collective == b.collective && a.group == b.group &&
         a.seq == b.seq && a.dtype == b.dtype && a.bytes == b.bytes && a.count == b.count && a.peer == b.peer && a.tag == b.tag &&
         a.category == b.category && a.buffer == b.buffer && a.deps == b.deps;
}

TEST(PlanIo, RoundTripsEveryField) {
  const PlanGraph g = tiny();
  const nlohmann::json j = plan_graph_to_json(g);
  EXPECT_EQ(j["format"], "monarch-plan/1");
  auto back = plan_graph_from_json(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
  EXPECT_EQ(back->plan, g.plan);
  EXPECT_EQ(back->world_size, 2);
  EXPECT_EQ(back->num_micro_batches, 1);
  ASSERT_EQ(back->groups.size(), 1u);
  EXPECT_EQ(back->groups[0].ranks, (std::vector<int32_t>{0, 1}));
  ASSERT_EQ(back->ranks.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(back->ranks[r].tasks.size(), g.ranks[r].tasks.size());
    EXPECT_EQ(back->ranks[r].stage, g.ranks[r].stage);
    for (size_t i = 0; i < g.ranks[r].tasks.size(); ++i)
      EXPECT_TRUE(same_task(back->ranks[r].tasks[i], g.ranks[r].tasks[i])) << "rank " << r << " task " << i;
  }
}

Problems problems_of(const nlohmann::json& j) {
  auto g = plan_graph_from_json(j);
  return g.ok() ? Problems{} : g.problems();
}

TEST(PlanIo, RejectsOtherVersionsAndNamesTheKey) {
  nlohmann::json j = plan_graph_to_json(tiny());
  j["format"] = "monarch-plan/4";
  Problems p = problems_of(j);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].where, "/format");
  EXPECT_NE(p[0].message.find("\"monarch-plan/1\""), std::string::npos) << p[0].message;
  EXPECT_NE(p[0].message.find("\"monarch-plan/2\""), std::string::npos) << p[0].message;
  j["format"] = 1;
  EXPECT_EQ(problems_of(j)[0].where, "/format");
  j.erase("format");
  EXPECT_EQ(problems_of(j)[0].where, "/format");
}

TEST(PlanIo, NamesTheJsonPathOfMalformedTasks) {
  nlohmann::json j = plan_graph_to_json(tiny());
  j["ranks"][1]["tasks"][2]["peer"] = 5;
  Problems p = problems_of(j);
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p[0].where, "/ranks/1/tasks/2/peer");

  j = plan_graph_to_json(tiny());
  j["ranks"][0]["tasks"][1]["deps"] = {1};  // itself
  EXPECT_EQ(problems_of(j)[0].where, "/ranks/0/tasks/1/deps/0");

  j = plan_graph_to_json(tiny());
  j["ranks"][0]["tasks"][3]["collective"] = "all-reduse";
  p = problems_of(j);
  EXPECT_EQ(p[0].where, "/ranks/0/tasks/3/collective");
  EXPECT_NE(p[0].message.find("\"all-reduce\""), std::string::npos);

  j = plan_graph_to_json(tiny());
  j["ranks"][0]["tasks"][1]["colour"] = "red";
  EXPECT_EQ(problems_of(j)[0].where, "/ranks/0/tasks/1/colour");

  j = plan_graph_to_json(tiny());
  j["ranks"][0]["tasks"][3]["group"] = 1;
  EXPECT_EQ(problems_of(j)[0].where, "/ranks/0/tasks/3/group");

  j = plan_graph_to_json(tiny());
  j["ranks"].erase(1);
  EXPECT_EQ(problems_of(j)[0].where, "/ranks");

  j = plan_graph_to_json(tiny());
  j["world_size"] = 4;
  EXPECT_EQ(problems_of(j)[0].where, "/world_size");
}

TEST(PlanIo, FileRoundTripAndUnreadableFiles) {
  const std::string path = std::string(MONARCH_BINARY_DIR) + "/plan_io_test_plan.json";
  ASSERT_TRUE(write_plan_file(path, tiny()).empty());
  auto back = read_plan_file(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ranks[1].tasks.size(), 5u);
  {
    std::ofstream out(path);
    out << "{\"format\": \"monarch-plan/1\", ";
  }
  auto bad = read_plan_file(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.problems()[0].message.find("not valid JSON"), std::string::npos);
  std::remove(path.c_str());
  EXPECT_FALSE(read_plan_file(path).ok());
  EXPECT_FALSE(write_plan_file("/nonexistent-dir/x.json", tiny()).empty());
}

// The scenario tiny() could have been planned for (2 GPUs, pp 2).
Scenario tiny_scenario() {
  auto s = scenario_from_json(nlohmann::json::parse(R"({
    "name": "tiny", "model": {"architecture": "gpt", "num_layers": 2, "hidden_size": 64,
      "num_attention_heads": 4, "vocab_size": 128, "seq_length": 32},
    "cluster": {"gpu": "H100-SXM", "num_gpus": 2},
    "training": {"global_batch_size": 1, "micro_batch_size": 1}})"));
  EXPECT_TRUE(s.ok()) << s.problems()[0].to_string();
  return *s;
}

// tiny() with its collective turned into an uneven all-to-all (rank r sends send_bytes).
PlanGraph tiny_uneven() {
  PlanGraph g = tiny();
  for (RankProgram& rp : g.ranks)
    for (Task& t : rp.tasks)
      if (t.kind == TaskKind::kCollective) {
        t.collective = CollectiveKind::kAllToAll;
        t.count = 1;
        t.bytes = 2000;
        t.send_bytes = rp.rank == 0 ? std::vector<int64_t>{0, 1000} : std::vector<int64_t>{10, 0};
      }
  return g;
}

TEST(PlanIo, Version3CarriesPerPeerAllToAllSizes) {
  const Scenario sc = tiny_scenario();
  const nlohmann::json j = plan_graph_to_json(tiny_uneven(), &sc);
  EXPECT_EQ(j["format"], "monarch-plan/3");
  auto back = plan_file_from_json(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
  EXPECT_EQ(back->format, "monarch-plan/3");
  for (int r = 0; r < 2; ++r)
    for (const Task& t : back->graph.ranks[static_cast<size_t>(r)].tasks)
      if (t.kind == TaskKind::kCollective) EXPECT_EQ(t.send_bytes, tiny_uneven().ranks[static_cast<size_t>(r)].tasks[3].send_bytes);
  // Plans without them stay version 2 (readable by older builds).
  EXPECT_EQ(plan_graph_to_json(tiny(), &sc)["format"], "monarch-plan/2");
  // Version 2 does not know the key; a bad entry is named by its path.
  nlohmann::json bad = j;
  bad["format"] = "monarch-plan/2";
  Problems p = problems_of(bad);
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p[0].where, "/ranks/0/tasks/3/send_bytes") << p[0].to_string();
  bad = j;
  bad["ranks"][1]["tasks"][3]["send_bytes"][1] = -5;
  p = problems_of(bad);
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p[0].where, "/ranks/1/tasks/3/send_bytes/1") << p[0].to_string();
  bad = j;
  bad["ranks"][1]["tasks"][3]["send_bytes"] = nlohmann::json::array({1, 2, 3});
  p = problems_of(bad);
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p[0].where, "/ranks/1/tasks/3/send_bytes") << p[0].to_string();
  // Version 1 (no scenario) has no per-peer sizes: left out, the padded size stays.
  const nlohmann::json v1 = plan_graph_to_json(tiny_uneven());
  EXPECT_EQ(v1["format"], "monarch-plan/1");
  EXPECT_FALSE(v1["ranks"][0]["tasks"][3].contains("send_bytes"));
}

TEST(PlanIo, Version2CarriesTheScenarioItWasPlannedFor) {
  const Scenario sc = tiny_scenario();
  const nlohmann::json j = plan_graph_to_json(tiny(), &sc);
  EXPECT_EQ(j["format"], "monarch-plan/2");
  auto back = plan_file_from_json(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
  EXPECT_EQ(back->format, "monarch-plan/2");
  ASSERT_TRUE(back->scenario.has_value());
  EXPECT_EQ(scenario_to_json(*back->scenario), scenario_to_json(sc));
  EXPECT_EQ(back->graph.ranks.size(), 2u);

  // Version 1 (no scenario) is still read, and has none.
  auto v1 = plan_file_from_json(plan_graph_to_json(tiny()));
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(v1->format, "monarch-plan/1");
  EXPECT_FALSE(v1->scenario.has_value());

  // Version 2 without its scenario, with a broken one, or version 1 with one: the JSON path.
  nlohmann::json bad = j;
  bad.erase("scenario");
  Problems p = problems_of(bad);
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p[0].where, "/scenario");
  bad = j;
  bad["scenario"]["model"]["hidden_size"] = -3;
  p = problems_of(bad);
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p[0].where, "/scenario/model/hidden_size") << p[0].to_string();
  bad = j;
  bad["format"] = "monarch-plan/1";
  p = problems_of(bad);
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p[0].where, "/scenario");
  EXPECT_EQ(p[0].message, "unknown key");
}

TEST(PlanIo, Version2FileRoundTrip) {
  const std::string path = std::string(MONARCH_BINARY_DIR) + "/plan_io_test_plan_v2.json";
  const Scenario sc = tiny_scenario();
  ASSERT_TRUE(write_plan_file(path, tiny(), &sc).empty());
  auto back = read_plan_file_full(path);
  ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
  ASSERT_TRUE(back->scenario.has_value());
  EXPECT_EQ(back->scenario->model.hidden_size, 64);
  EXPECT_TRUE(read_plan_file(path).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace monarch
