#include "core/result_io.h"

#include <cmath>

#include <gtest/gtest.h>

namespace monarch {
namespace {

using nlohmann::json;

Plan sample_plan() {
  Plan p;
  p.tp = 8;
  p.pp = 4;
  p.dp = 2;
  p.cp = 1;
  p.ep = 1;
  p.vpp = 3;
  p.micro_batch_size = 2;
  p.schedule = Schedule::kInterleaved;
  p.sequence_parallel = true;
  p.recompute = Recompute::kSelective;
  p.zero_stage = 1;
  p.overlap_grad_reduce = false;
  p.overlap_param_gather = true;
  p.tp_comm_overlap = true;
  p.layers_per_stage = {25, 24, 24, 23};
  return p;
}

BackendResult sample_result(bool measured) {
  BackendResult b;
  b.backend = measured ? "real-gpu" : "simgrid";
  b.plan = sample_plan();
  b.iteration_time_s = 13.8;
  b.tokens_per_s = 9500.5;
  b.model_tflops_per_gpu = 160.1;
  b.hardware_tflops_per_gpu = 164.5;
  b.mfu = 0.513;
  b.hfu = 0.527;
  b.model_flops_per_iteration = 7.05e17;
  b.hardware_flops_per_iteration = 7.24e17;
  b.memory.fits = true;
  b.memory.peak_gib = 58.25;
  b.memory.capacity_gib = 76.5;
  for (int s = 0; s < 4; ++s)
    b.memory.stages.push_back({s, 10.0 + s, 5.0, 20.0, 1.0 / 3.0, 0.75, 58.25 - s});
  b.time_breakdown_s = {10.1, 1.2, 0.0, 0.3, 0.4, 0.0, 1.5, 0.2, 0.9};
  b.communication.push_back({CollectiveKind::kAllReduce, GroupKind::kTp, 123456789012LL, 192, 1.25, 8});
  b.communication.push_back({CollectiveKind::kSendRecv, GroupKind::kPp, 4096, 24, 0.1, 4});
  // A measured group that is none of the plan's keeps the trace's name.
  b.communication.push_back({CollectiveKind::kBroadcast, std::nullopt, 512, 1, 0.001, 0, "[0, 5]"});
  b.measured = measured;
  if (measured) b.losses = {10.5, 9.25, 8.125};
  b.timeline.push_back({0, "compute", "fwd L3 mb2", "compute", 0.0, 0.125});
  b.timeline.push_back({3, "tp", "ncclAllReduce tp", "collective", 0.125, 0.25});
  b.timeline.push_back({1, "pp-send", "ncclSend pp", "p2p", 0.25, 0.25, 2, 7});
  return b;
}

void expect_same(const BackendResult& a, const BackendResult& b) {
  EXPECT_EQ(a.backend, b.backend);
  EXPECT_EQ(a.plan, b.plan);
  EXPECT_EQ(a.iteration_time_s, b.iteration_time_s);
  EXPECT_EQ(a.tokens_per_s, b.tokens_per_s);
  EXPECT_EQ(a.model_tflops_per_gpu, b.model_tflops_per_gpu);
  EXPECT_EQ(a.hardware_tflops_per_gpu, b.hardware_tflops_per_gpu);
  EXPECT_EQ(a.mfu, b.mfu);
  EXPECT_EQ(a.hfu, b.hfu);
  EXPECT_EQ(a.model_flops_per_iteration, b.model_flops_per_iteration);
  EXPECT_EQ(a.hardware_flops_per_iteration, b.hardware_flops_per_iteration);
  EXPECT_EQ(a.memory.fits, b.memory.fits);
  EXPECT_EQ(a.memory.peak_gib, b.memory.peak_gib);
  EXPECT_EQ(a.memory.capacity_gib, b.memory.capacity_gib);
  ASSERT_EQ(a.memory.stages.size(), b.memory.stages.size());
  for (size_t i = 0; i < a.memory.stages.size(); ++i) {
    const StageMemory &x = a.memory.stages[i], &y = b.memory.stages[i];
    EXPECT_EQ(x.stage, y.stage);
    EXPECT_EQ(x.weights_gib, y.weights_gib);
    EXPECT_EQ(x.gradients_gib, y.gradients_gib);
    EXPECT_EQ(x.optimizer_gib, y.optimizer_gib);
    EXPECT_EQ(x.activations_gib, y.activations_gib);
    EXPECT_EQ(x.buffers_gib, y.buffers_gib);
    EXPECT_EQ(x.total_gib, y.total_gib);
  }
  const TimeBreakdown &t = a.time_breakdown_s, &u = b.time_breakdown_s;
  EXPECT_EQ(t.compute, u.compute);
  EXPECT_EQ(t.tp_comm, u.tp_comm);
  EXPECT_EQ(t.cp_comm, u.cp_comm);
  EXPECT_EQ(t.pp_comm, u.pp_comm);
  EXPECT_EQ(t.dp_comm, u.dp_comm);
  EXPECT_EQ(t.ep_comm, u.ep_comm);
  EXPECT_EQ(t.bubble, u.bubble);
  EXPECT_EQ(t.optimizer, u.optimizer);
  EXPECT_EQ(t.exposed_comm, u.exposed_comm);
  ASSERT_EQ(a.communication.size(), b.communication.size());
  for (size_t i = 0; i < a.communication.size(); ++i) {
    EXPECT_EQ(a.communication[i].kind, b.communication[i].kind);
    EXPECT_EQ(a.communication[i].group, b.communication[i].group);
    EXPECT_EQ(a.communication[i].group_label, b.communication[i].group_label);
    EXPECT_EQ(a.communication[i].group_size, b.communication[i].group_size);
    EXPECT_EQ(a.communication[i].bytes, b.communication[i].bytes);
    EXPECT_EQ(a.communication[i].count, b.communication[i].count);
    EXPECT_EQ(a.communication[i].time_s, b.communication[i].time_s);
  }
  EXPECT_EQ(a.measured, b.measured);
  EXPECT_EQ(a.losses, b.losses);
  ASSERT_EQ(a.timeline.size(), b.timeline.size());
  for (size_t i = 0; i < a.timeline.size(); ++i) {
    EXPECT_EQ(a.timeline[i].rank, b.timeline[i].rank);
    EXPECT_EQ(a.timeline[i].stream, b.timeline[i].stream);
    EXPECT_EQ(a.timeline[i].name, b.timeline[i].name);
    EXPECT_EQ(a.timeline[i].category, b.timeline[i].category);
    EXPECT_EQ(a.timeline[i].start_s, b.timeline[i].start_s);
    EXPECT_EQ(a.timeline[i].end_s, b.timeline[i].end_s);
    EXPECT_EQ(a.timeline[i].peer, b.timeline[i].peer);
    EXPECT_EQ(a.timeline[i].flow_id, b.timeline[i].flow_id);
  }
}

TEST(PlanJson, SpecKeysAndValues) {
  Plan p = sample_plan();
  json j = plan_to_json(p);
  EXPECT_EQ(j["tensor_parallel_degree"], 8);
  EXPECT_EQ(j["pipeline_parallel_degree"], 4);
  EXPECT_EQ(j["data_parallel_degree"], 2);
  EXPECT_EQ(j["context_parallel_degree"], 1);
  EXPECT_EQ(j["expert_parallel_degree"], 1);
  EXPECT_EQ(j["virtual_pipeline_degree"], 3);
  EXPECT_EQ(j["micro_batch_size"], 2);
  EXPECT_EQ(j["pipeline_schedule"], "interleaved-1f1b");
  EXPECT_EQ(j["sequence_parallel"], true);
  EXPECT_EQ(j["activation_recompute"], "selective");
  EXPECT_EQ(j["zero_stage"], 1);
  EXPECT_EQ(j["overlap_grad_reduce"], false);
  EXPECT_EQ(j["tp_comm_overlap"], true);
  EXPECT_EQ(j["layers_per_stage"], json({25, 24, 24, 23}));
  p.layers_per_stage.clear();
  EXPECT_FALSE(plan_to_json(p).contains("layers_per_stage"));
}

TEST(PlanJson, RoundTrips) {
  for (Plan p : {Plan{}, sample_plan()}) {
    Expected<Plan> back = plan_from_json(json::parse(plan_to_json(p).dump()), "/plan");
    ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
    EXPECT_EQ(*back, p);
  }
}

bool has_problem(const Problems& ps, const std::string& where, const std::string& part);

// EP communication overlap is written only when on: older files stay byte-identical and read
// it as off.
TEST(PlanJson, EpOverlapIsWrittenOnlyWhenOn) {
  Plan p = sample_plan();
  EXPECT_FALSE(plan_to_json(p).contains("ep_comm_overlap"));
  p.ep = 2;
  p.ep_comm_overlap = true;
  EXPECT_EQ(plan_to_json(p)["ep_comm_overlap"], true);
  Expected<Plan> back = plan_from_json(json::parse(plan_to_json(p).dump()), "/plan");
  ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
  EXPECT_EQ(*back, p);
  json j = plan_to_json(p);
  j["ep_comm_overlap"] = "yes";
  EXPECT_FALSE(plan_from_json(j, "/plan").ok());
}

// The offloaded layer count likewise: written only above 0, read back, refused when negative.
TEST(PlanJson, ActivationOffloadIsWrittenOnlyWhenOn) {
  Plan p = sample_plan();
  EXPECT_FALSE(plan_to_json(p).contains("activation_offload_layers"));
  p.activation_offload_layers = 40;
  EXPECT_EQ(plan_to_json(p)["activation_offload_layers"], 40);
  Expected<Plan> back = plan_from_json(json::parse(plan_to_json(p).dump()), "/plan");
  ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
  EXPECT_EQ(*back, p);
  json j = plan_to_json(p);
  j["activation_offload_layers"] = -1;
  Expected<Plan> bad = plan_from_json(j, "/plan");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.problems()[0].where, "/plan/activation_offload_layers");
}

TEST(PlanJson, ExpertTpIsWrittenOnlyWhenItDiffersFromTp) {
  Plan p = sample_plan();  // tp 8
  EXPECT_FALSE(plan_to_json(p).contains("expert_tensor_parallel_degree"));  // etp 0 = tp
  p.etp = 8;
  EXPECT_FALSE(plan_to_json(p).contains("expert_tensor_parallel_degree"));  // explicitly equal
  EXPECT_EQ(plan_to_json(p).dump(), plan_to_json(sample_plan()).dump());  // older files stay byte-identical
  for (int64_t etp : {1, 2, 16}) {
    p.etp = etp;
    json j = plan_to_json(p);
    EXPECT_EQ(j["expert_tensor_parallel_degree"], etp);
    Expected<Plan> back = plan_from_json(json::parse(j.dump()), "/plan");
    ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
    EXPECT_EQ(*back, p);
    EXPECT_EQ(back->expert_tp(), etp);
  }
  // The short key reads the same; a value equal to tp reads as "same as tp".
  json j = plan_to_json(sample_plan());
  j["etp"] = 2;
  EXPECT_EQ(plan_from_json(j, "/plan")->etp, 2);
  j["etp"] = 8;
  EXPECT_EQ(plan_from_json(j, "/plan")->etp, 0);
  j["expert_tensor_parallel_degree"] = 8;
  Expected<Plan> twice = plan_from_json(j, "/plan");
  ASSERT_FALSE(twice.ok());
  EXPECT_TRUE(has_problem(twice.problems(), "/plan/etp", "second time"));
  j.erase("etp");
  j["expert_tensor_parallel_degree"] = 0;
  Expected<Plan> zero = plan_from_json(j, "/plan");
  ASSERT_FALSE(zero.ok());
  EXPECT_TRUE(has_problem(zero.problems(), "/plan/expert_tensor_parallel_degree", "positive integer"));
}

TEST(PlanJson, EmbeddingShardingIsPartOfARecommendationPlan) {
  Plan p;
  p.dp = 8;
  EXPECT_FALSE(plan_to_json(p).contains("embedding_sharding"));  // transformer plans: absent
  p.embedding_sharding = "t0:tw@3 t1:rw";
  const json j = plan_to_json(p);
  EXPECT_EQ(j["embedding_sharding"], "t0:tw@3 t1:rw");
  Expected<Plan> back = plan_from_json(json::parse(j.dump()), "/plan");
  ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
  EXPECT_EQ(*back, p);
  Plan other = p;
  other.embedding_sharding = "t0:rw t1:rw";
  EXPECT_NE(content_hash(plan_to_json(p)), content_hash(plan_to_json(other)));  // two plans in the store
}

TEST(ResultFile, WritesTheFieldsItIsGiven) {
  BackendResult r;
  r.backend = "analytical";
  ResultFile f;
  f.scenario = {{"name", "s"}};
  f.results.push_back({&r, 1, ""});
  f.results.push_back({&r, std::nullopt, "greedy: t0:rw"});
  json j = result_file_to_json(f);
  EXPECT_EQ(j["format"], "monarch-sim-result/1");
  EXPECT_EQ(j["scenario"]["name"], "s");
  EXPECT_FALSE(j.contains("parameters"));  // 0: unknown
  EXPECT_FALSE(j.contains("run"));
  EXPECT_FALSE(j.contains("rejected"));
  EXPECT_FALSE(j.contains("baseline"));
  EXPECT_FALSE(j.contains("search"));
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["rank"], 1);
  EXPECT_FALSE(j["results"][0].contains("sharding"));
  EXPECT_FALSE(j["results"][1].contains("rank"));
  EXPECT_EQ(j["results"][1]["sharding"], "greedy: t0:rw");

  f.parameters = 7;
  f.rejected = std::vector<RejectedPlan>{};
  f.baseline = &r;
  f.baseline_note = "FSDP";
  f.search = ResultFileSearch{10, 8, 5, 3};
  j = result_file_to_json(f);
  EXPECT_EQ(j["parameters"], 7);
  EXPECT_TRUE(j["rejected"].is_array());
  EXPECT_EQ(j["baseline"]["note"], "FSDP");
  EXPECT_EQ(j["search"]["plans_rejected"], 3);
}

TEST(PlanJson, ReadsTheSpecExampleWithOverlapDefaults) {
  json j = json::parse(R"({ "tensor_parallel_degree": 8, "pipeline_parallel_degree": 8,
                "data_parallel_degree": 1, "context_parallel_degree": 1,
                "expert_parallel_degree": 1, "virtual_pipeline_degree": 3,
                "micro_batch_size": 1, "pipeline_schedule": "interleaved-1f1b",
                "sequence_parallel": true, "activation_recompute": "selective",
                "zero_stage": 0 })");
  Expected<Plan> p = plan_from_json(j, "/results/0/plan");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tp, 8);
  EXPECT_EQ(p->pp, 8);
  EXPECT_EQ(p->vpp, 3);
  EXPECT_EQ(p->schedule, Schedule::kInterleaved);
  EXPECT_EQ(p->recompute, Recompute::kSelective);
  EXPECT_TRUE(p->sequence_parallel);
  EXPECT_EQ(p->overlap_grad_reduce, Plan{}.overlap_grad_reduce);
  EXPECT_TRUE(p->layers_per_stage.empty());
}

bool has_problem(const Problems& ps, const std::string& where, const std::string& part) {
  for (const Problem& p : ps)
    if (p.where == where && p.message.find(part) != std::string::npos) return true;
  return false;
}

TEST(PlanJson, ErrorsNameThePath) {
  json j = plan_to_json(sample_plan());
  j["tensor_parallel_degree"] = 0;
  j["pipeline_schedule"] = "zero-bubble";
  j["zero_stage"] = 4;
  j["sequence_parallel"] = "yes";
  j.erase("micro_batch_size");
  j["tensor_parallel"] = 2;  // a typo of a real key
  j["layers_per_stage"] = {10, 10};
  Expected<Plan> p = plan_from_json(j, "/results/3/plan");
  ASSERT_FALSE(p.ok());
  const Problems& ps = p.problems();
  EXPECT_TRUE(has_problem(ps, "/results/3/plan/tensor_parallel_degree", "positive integer"));
  EXPECT_TRUE(has_problem(ps, "/results/3/plan/pipeline_schedule", "\"interleaved-1f1b\""));
  EXPECT_TRUE(has_problem(ps, "/results/3/plan/zero_stage", "from 0 to 3"));
  EXPECT_TRUE(has_problem(ps, "/results/3/plan/sequence_parallel", "true or false"));
  EXPECT_TRUE(has_problem(ps, "/results/3/plan/micro_batch_size", "missing"));
  EXPECT_TRUE(has_problem(ps, "/results/3/plan/tensor_parallel", "unknown plan key"));
  EXPECT_TRUE(has_problem(ps, "/results/3/plan/layers_per_stage", "one per pipeline stage"));
  EXPECT_EQ(ps.size(), 7u);

  Expected<Plan> not_object = plan_from_json(json::array(), "/plan");
  ASSERT_FALSE(not_object.ok());
  EXPECT_TRUE(has_problem(not_object.problems(), "/plan", "expected an object"));
}

TEST(ResultJson, SpecShapeForSimulatedResults) {
  BackendResult b = sample_result(false);
  json j = result_to_json(b);
  for (const char* key : {"backend", "plan", "iteration_time_s", "tokens_per_s", "model_tflops_per_gpu",
                          "hardware_tflops_per_gpu", "mfu", "hfu", "model_flops_per_iteration",
                          "hardware_flops_per_iteration", "memory", "time_breakdown_s", "communication"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_FALSE(j.contains("measured"));
  EXPECT_FALSE(j.contains("losses"));
  EXPECT_EQ(j["memory"]["stages"].size(), 4u);
  EXPECT_EQ(j["memory"]["stages"][0]["total_gib"], 58.25);
  EXPECT_EQ(j["communication"][0]["kind"], "all-reduce");
  EXPECT_EQ(j["communication"][0]["group"], "tp");
  EXPECT_EQ(j["communication"][0]["bytes"], 123456789012LL);
  EXPECT_EQ(j["communication"][0]["group_size"], 8);
  EXPECT_EQ(j["communication"][2]["group"], "[0, 5]");
  EXPECT_FALSE(j["communication"][2].contains("group_size")) << "written only when known";
  EXPECT_EQ(j["time_breakdown_s"]["exposed_comm"], 0.9);
  EXPECT_EQ(j["timeline"].size(), 3u);
  EXPECT_FALSE(j["timeline"][0].contains("peer")) << "peer and flow_id only for point-to-point spans";
  EXPECT_EQ(j["timeline"][2]["peer"], 2);
  EXPECT_EQ(j["timeline"][2]["flow_id"], 7);

  b.timeline.clear();
  EXPECT_FALSE(result_to_json(b).contains("timeline"));
}

TEST(ResultJson, WarningsAndStageLayersRoundTrip) {
  BackendResult b = sample_result(false);
  EXPECT_FALSE(result_to_json(b).contains("warnings"));  // absent when the plan is not unwise
  b.warnings = {"TP 16 spans 2 nodes of 8 GPUs: its per-layer collectives run over the inter-node network"};
  b.memory.stages[0].layers = 15;
  const json j = result_to_json(b);
  EXPECT_EQ(j["warnings"][0], b.warnings[0]);
  EXPECT_EQ(j["memory"]["stages"][0]["layers"], 15);
  auto back = result_from_json(j, "/results/0");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->warnings, b.warnings);
  EXPECT_EQ(back->memory.stages[0].layers, 15);
  // A plan split per model chunk (pp 2 x vpp 2) reads back.
  json plan = plan_to_json(b.plan);
  plan["pipeline_parallel_degree"] = 2;
  plan["virtual_pipeline_degree"] = 2;
  plan["layers_per_stage"] = {1, 2, 2, 1};
  auto p = plan_from_json(plan, "/plan");
  ASSERT_TRUE(p.ok()) << p.problems()[0].to_string();
  EXPECT_EQ(p->layers_per_stage, (std::vector<int64_t>{1, 2, 2, 1}));
}

TEST(ResultJson, ReliabilitySectionRoundTripsAndIsAbsentWithoutIt) {
  BackendResult b = sample_result(false);
  EXPECT_FALSE(result_to_json(b).contains("reliability"));
  ReliabilityReport r;
  r.goodput = 0.92;
  r.time_to_train_s = 7.4e6;
  r.expected_interruptions = 666;
  r.interval_s = 254.6;
  r.checkpoint_bytes_per_rank = 6.67e9;
  r.checkpoint.blocking_s = 2.96;
  r.badput.checkpoint_save_s = 8e4;
  r.badput.startup_s = 1.2e5;
  r.trials = 200;
  r.mc_goodput = {0.921, 0.918, 0.925};
  r.warnings = {"a warning"};
  b.reliability = r;
  const json j = result_to_json(b);
  EXPECT_EQ(j["reliability"]["goodput"], 0.92);
  EXPECT_EQ(j["reliability"]["badput_s"]["startup"], 1.2e5);
  EXPECT_EQ(j["reliability"]["checkpoint"]["interval_s"], 254.6);
  EXPECT_EQ(j["reliability"]["monte_carlo"]["goodput"]["p95"], 0.925);
  auto back = result_from_json(j, "/results/0");
  ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
  ASSERT_TRUE(back->reliability.has_value());
  EXPECT_EQ(normalized_dump(result_to_json(*back)), normalized_dump(j));
  json bad = j;
  bad["reliability"]["badput_s"]["startup"] = "slow";
  auto refused = result_from_json(bad, "/results/0");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.problems()[0].where, "/results/0/reliability/badput_s/startup");
}

TEST(ResultJson, FailureSectionRoundTripsAndNamesItsBadFields) {
  BackendResult b = sample_result(false);
  EXPECT_FALSE(result_to_json(b).contains("failure"));
  FailureReport f;
  f.component = "host";
  f.node = 1;
  f.at_s = 0.5;
  f.detection_s = 600;
  f.affected = true;
  f.timeout_at_s = 600.5;
  f.lost_s = 600.5;
  f.lost_compute_gpu_s = 3.25;
  f.ranks = {{0, 0, "stalled", 0.52, "ncclRecv pp", 0.1}, {2, 1, "failed", 0.5, "", 0}};
  b.failure = f;
  const json j = result_to_json(b);
  EXPECT_EQ(j["failure"]["timeout_at_s"], 600.5);
  EXPECT_EQ(j["failure"]["ranks"][0]["blocked_in"], "ncclRecv pp");
  EXPECT_FALSE(j["failure"]["ranks"][1].contains("blocked_in"));
  auto back = result_from_json(j, "/results/0");
  ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
  ASSERT_TRUE(back->failure.has_value());
  EXPECT_EQ(back->failure->ranks.size(), 2u);
  EXPECT_EQ(normalized_dump(result_to_json(*back)), normalized_dump(j));
  json bad = j;
  bad["failure"]["ranks"][1]["state"] = 3;
  auto refused = result_from_json(bad, "/results/0");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.problems()[0].where, "/results/0/failure/ranks/1/state");
}

TEST(ResultJson, MeasuredResultsCarryLosses) {
  json j = result_to_json(sample_result(true));
  EXPECT_EQ(j["measured"], true);
  EXPECT_EQ(j["losses"], json({10.5, 9.25, 8.125}));
}

TEST(ResultJson, RoundTripsExactlyThroughText) {
  for (bool measured : {false, true}) {
    BackendResult b = sample_result(measured);
    std::string text = result_to_json(b).dump(2);
    Expected<BackendResult> back = result_from_json(json::parse(text), "/results/0");
    ASSERT_TRUE(back.ok()) << back.problems()[0].to_string();
    expect_same(b, *back);
  }
}

TEST(ResultJson, NonFiniteNumbersBecomeNullAndReadBackAsNaN) {
  BackendResult b = sample_result(false);
  b.mfu = std::numeric_limits<double>::quiet_NaN();
  b.iteration_time_s = std::numeric_limits<double>::infinity();
  json j = result_to_json(b);
  EXPECT_TRUE(j["mfu"].is_null());
  Expected<BackendResult> back = result_from_json(json::parse(j.dump()), "");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(std::isnan(back->mfu));
  EXPECT_TRUE(std::isnan(back->iteration_time_s));
}

TEST(ResultJson, IgnoresRankAndAddedFieldsButChecksKnownOnes) {
  json j = result_to_json(sample_result(false));
  j["rank"] = 1;
  j["some_future_field"] = {1, 2};
  EXPECT_TRUE(result_from_json(j, "/results/0").ok());

  j["iteration_time_s"] = "fast";
  j["communication"][1]["bytes"] = -5;
  j["communication"][0]["kind"] = "all-reduse";
  j["communication"][2]["group_size"] = "eight";
  j["memory"]["stages"][2].erase("total_gib");
  j["timeline"][0]["rank"] = 1.5;
  Expected<BackendResult> bad = result_from_json(j, "/results/0");
  ASSERT_FALSE(bad.ok());
  const Problems& ps = bad.problems();
  EXPECT_TRUE(has_problem(ps, "/results/0/iteration_time_s", "expected a number"));
  EXPECT_TRUE(has_problem(ps, "/results/0/communication/1/bytes", "non-negative integer"));
  EXPECT_TRUE(has_problem(ps, "/results/0/communication/0/kind", "expected one of \"all-reduce\""));
  EXPECT_TRUE(has_problem(ps, "/results/0/communication/2/group_size", "integer"));
  EXPECT_TRUE(has_problem(ps, "/results/0/memory/stages/2/total_gib", "missing"));
  EXPECT_TRUE(has_problem(ps, "/results/0/timeline/0/rank", "integer"));
  EXPECT_EQ(ps.size(), 6u);
}

TEST(RejectedJson, RoundTrips) {
  RejectedPlan r{sample_plan(), "needs 91.2 GiB per GPU, A100-80GB has 80"};
  json j = rejected_to_json(r);
  EXPECT_EQ(j["reason"], r.reason);
  EXPECT_EQ(j["plan"]["tensor_parallel_degree"], 8);
  Expected<RejectedPlan> back = rejected_from_json(j, "/rejected/0");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->plan, r.plan);
  EXPECT_EQ(back->reason, r.reason);
}

TEST(ContentHash, Sha256MatchesFipsTestVectors) {
  // FIPS 180-4 / NIST CSRC example values.
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(ContentHash, IgnoresKeyOrderAndWhitespaceButNotValues) {
  json a = json::parse(R"({"b": 1, "a": [1, 2, {"y": true, "x": "s"}]})");
  json b = json::parse("{\"a\":[1,2,{\"x\":\"s\",\"y\":true}],\n  \"b\":1}");
  EXPECT_EQ(normalized_dump(a), R"({"a":[1,2,{"x":"s","y":true}],"b":1})");
  EXPECT_EQ(content_hash(a), content_hash(b));
  EXPECT_EQ(content_hash(a), sha256_hex(R"({"a":[1,2,{"x":"s","y":true}],"b":1})"));
  b["b"] = 2;
  EXPECT_NE(content_hash(a), content_hash(b));
  Plan p = sample_plan(), q = sample_plan();
  EXPECT_EQ(content_hash(plan_to_json(p)), content_hash(plan_to_json(q)));
  q.micro_batch_size = 4;
  EXPECT_NE(content_hash(plan_to_json(p)), content_hash(plan_to_json(q)));
}

TEST(ContentHash, InvalidUtf8DoesNotThrow) {
  json j = {{"name", std::string("bad \xff byte")}};
  EXPECT_EQ(content_hash(j).size(), 64u);
}

}  // namespace
}  // namespace monarch
