#include "sim/validate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace monarch {
namespace {

const std::string kCalibration = std::string(MONARCH_SOURCE_DIR) + "/tests/data/validation/calibration.json";
// Bounds of the DLRM validation set (docs/dlrm.md, "Fidelity against published runs"): what
// the model reaches now (17.2 % MAPE, worst +39.0 %), so a regression fails.
constexpr double kDlrmMapePct = 17.5;
constexpr double kDlrmWorstPct = 41.0;

std::string write_temp(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "monarch_validate_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

// The acceptance bounds: one calibration per GPU kind and precision predicts the
// published A100 (Korthikanti et al. 2022) and H100 (NVIDIA DGXC Llama 3.1 8B) runs.
TEST(Validate, CalibrationFileWithinFivePercentMapeAndTwelvePercentWorst) {
  Expected<ValidationReport> rep = validate_cases(kCalibration);
  ASSERT_TRUE(rep.ok()) << (rep.ok() ? "" : rep.problems().front().to_string());
  ASSERT_EQ(rep->rows.size(), 18u);
  for (const ValidationRow& r : rep->rows) {
    EXPECT_LE(std::fabs(r.error_pct), 12.0) << r.id << " predicted " << r.predicted << " measured " << r.measured;
    EXPECT_TRUE(r.fits) << r.id << " ran on real hardware, so its plan must fit";
  }
  EXPECT_LE(rep->mape_pct, 5.0);
}

// Published MoE training runs on H100 (tests/data/moe_published.json; source, locator and
// conversion of each in the file). Bounds: the dense calibration holds 5% MAPE and 12% worst;
// MoE layers add the dropless load imbalance (kMoeExpertLoadImbalance 1.3, measured in a range
// of ~1.2-1.7, i.e. +-7% of a Mixtral step per +-0.1) and the router / dispatcher overheads, so
// 15% worst and 10% MAPE over the cases the model claims. Cases marked "known_gap" (with the
// reason) are predicted and reported (test properties, like every case's error) but not bounded:
// the model does not claim them yet (docs/analytical_model.md says why).
TEST(Validate, PublishedMoeRunsWithinFifteenPercent) {
  const std::string path = std::string(MONARCH_SOURCE_DIR) + "/tests/data/moe_published.json";
  Expected<ValidationReport> rep = validate_cases(path);
  ASSERT_TRUE(rep.ok()) << (rep.ok() ? "" : rep.problems().front().to_string());
  ASSERT_EQ(rep->rows.size(), 4u);  // Mixtral 8x7B (Megatron-Core), Qwen3-30B-A3B x 3 (Megatron-Bridge)
  std::ifstream in(path);
  const nlohmann::json cases = nlohmann::json::parse(in);
  double abs_sum = 0;
  int claimed = 0;
  for (size_t i = 0; i < rep->rows.size(); ++i) {
    const ValidationRow& r = rep->rows[i];
    ::testing::Test::RecordProperty(r.id + "_error_pct", std::to_string(r.error_pct));
    EXPECT_TRUE(r.fits) << r.id << " ran on real hardware, so its plan must fit";
    if (cases.at(i).contains("known_gap")) continue;
    EXPECT_LE(std::fabs(r.error_pct), 15.0) << r.id << " predicted " << r.predicted << " measured " << r.measured;
    abs_sum += std::fabs(r.error_pct);
    ++claimed;
  }
  ASSERT_GE(claimed, 1);
  ::testing::Test::RecordProperty("moe_mape_pct", std::to_string(abs_sum / claimed));
  EXPECT_LE(abs_sum / claimed, 10.0);
}

// The fidelity bounds on the visible validation sets (docs/analytical_model.md, "Fidelity"):
// every case predicted (none refused, every plan fits), the MAPE and the worst case bounded.
// Where a set's target is not reached yet the bound is the figure reached (a regression guard);
// the table in the doc gives the target and the mechanism behind what remains.
struct VisibleSet {
  const char* file;
  size_t cases;
  double max_mape_pct;
  double max_abs_error_pct;
};

void expect_within(const VisibleSet& v,
                   const std::string& dir = std::string(MONARCH_SOURCE_DIR) + "/tests/data/validation") {
  const std::string path = dir + "/" + v.file;
  Expected<ValidationReport> rep = validate_cases(path);
  ASSERT_TRUE(rep.ok()) << v.file << ": " << (rep.ok() ? "" : rep.problems().front().to_string());
  ASSERT_EQ(rep->rows.size(), v.cases) << v.file << ": every case is predicted";
  // A case marked "known_gap" says why the model does not fit the plan that ran; it is
  // predicted and bounded like the others.
  std::ifstream in(path);
  const nlohmann::json cases = nlohmann::json::parse(in);
  for (size_t i = 0; i < rep->rows.size(); ++i) {
    const ValidationRow& r = rep->rows[i];
    EXPECT_LE(std::fabs(r.error_pct), v.max_abs_error_pct) << v.file << " " << r.id;
    if (!cases.at(i).contains("known_gap"))
      EXPECT_TRUE(r.fits) << v.file << " " << r.id << " ran on real hardware, so its plan must fit";
  }
  ::testing::Test::RecordProperty(std::string(v.file) + "_mape_pct", std::to_string(rep->mape_pct));
  EXPECT_LE(rep->mape_pct, v.max_mape_pct) << v.file;
}

TEST(Validate, CalibrationSetWithinThreePercentMape) {
  expect_within({"calibration.json", 18, 3.0, 5.0});
}

// The targets: 5% MAPE and 15% worst, met: 4.41% and 13.4% (NeMo Launcher GPT-3 5B at 256
// A100), the DGXC runs reducing gradients in bf16 as their configs state; the doc's table says
// what remains (the large fp8 runs' growth with data-parallel size).
TEST(Validate, PublishedRunsSetHoldsTheFidelityReached) {
  expect_within({"published-runs.json", 45, 5.0, 15.0});
}

// Target 8% MAPE (met: 7.69%) and 15% worst (28.2%: TP 8 at micro-batch 1-2 too fast, by the
// ~1.5 ms per layer that TP 8 measures beyond TP 1-4; the cases take the data set's measured
// all-reduce table as their profile).
TEST(Validate, VtrainSetHoldsTheFidelityReached) {
  expect_within({"vtrain-single.json", 240, 8.0, 29.0});
}

// vTrain's multi-node runs (tests/data/validation/vtrain-multi.json): 109 Megatron-DeepSpeed
// runs of GPT 3.6B-175B on 64-512 A100, not fitted. Reached 7.21%; the worst cases (-48% for
// TP 8 at micro-batch 64, -30..-37% for TP 2-8 at micro-batch 2, where the same
// configurations at the next micro-batch are within 10%) are the small-micro-batch TP cost
// the single-node runs show too; a regression guard.
TEST(Validate, VtrainMultiNodeSetHoldsTheFidelityReached) {
  expect_within({"vtrain-multi.json", 109, 7.5, 48.5});
}

// The sets every developer and CI run has beside the project (../shared/validation): the vTrain
// runs meet their target (7.85%, with the NVLink preset's all-reduces where the project's copy
// takes the node's measured table). Calibration (3.87%) and published-runs (6.93%) are held at
// the figures reached: their Korthikanti 2022 and NeMo Launcher GPT-3 5B cases leave the
// attention kernel open, so they are predicted with flash attention (the scenario format's
// default), where those runs materialized the scores (-1..-16% and -23..-32%; the project's
// copies pin it and meet 1.31% and 4.41%). Its MLPerf GPT-3 cases leave the interleaving open
// and the search takes 7 chunks per stage (96 layers in chunks of 1 and 2): the schedule's own
// makespan puts them at +1.5..+6.0% (the earlier closed form, optimistic with uneven chunks,
// at -0.7..+3.4%).
TEST(Validate, SharedSetsHoldTheFidelityReached) {
  const std::string dir = std::string(MONARCH_SOURCE_DIR) + "/../shared/validation";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no " << dir << " beside the project";
  expect_within({"calibration.json", 18, 3.9, 16.5}, dir);
  expect_within({"published-runs.json", 45, 7.0, 32.5}, dir);
  expect_within({"vtrain-single.json", 240, 8.0, 29.0}, dir);
}

// torchtitan's published runs (tests/data/validation/torchtitan-published.json, from its
// docs/performance.md and its benchmarks/ folder): FSDP2 on 64 A100 eager; on 8-256 Grand Teton
// H100 at their 500 W power limit, eager, compiled and with Float8, with and without async TP,
// Llama 3.1 405B on 512 with 1F1B and Interleaved 1F1B pipelines and with context parallelism
// 1-8 at 32k-256k tokens; on 32-64 H200. Reached 7.22% and 25.8% (405B at CP 8: the CP 4-8 runs
// are 12-26% too fast, with no mechanism found; async TP gains about 10 points more in the model
// than in the runs); a regression guard.
TEST(Validate, TorchtitanRunsHoldTheFidelityReached) {
  expect_within({"torchtitan-published.json", 34, 7.5, 26.0});
}

// Megatron-Bridge's published dense Llama 3 runs in FP8 (tests/data/validation/
// megatron-bridge-published.json, from its docs/performance-summary-archive.md, releases 25.09,
// 25.11 and 26.02) on DGX H100, DGX B200 and DGX GB200, 8-1024 GPUs, reducing gradients in bf16
// as the performance recipes do, with their per-tensor current scaling (MXFP8 where the table
// says FP8-MX). Reached 5.62% and 16.3%: H100 within -3..+6%; on Blackwell, whose fp8 GEMMs hold
// the clock the H200's held fp8 product keeps (no held Blackwell product measured), the B200
// and GB200 8B runs and the 405B at TP 4 within -1..+3%, the GB200 70B runs +4% (25.11) and
// +11..+12% (25.09, 26.02) whether they offload activations to the Grace CPU as their FSDP
// recipes do (activation_offload_layers 40) or run TP 2 x PP 4 in MXFP8, the 25.09 405B that
// offloads 95 layers under FSDP at TP 2 +16%; a regression guard.
TEST(Validate, MegatronBridgeRunsHoldTheFidelityReached) {
  expect_within({"megatron-bridge-published.json", 16, 6.0, 17.0});
}

// Megatron-Bridge's published Qwen3 MoE runs (tests/data/validation/mbridge-moe-published.json):
// its 25.09 table with token drop, Qwen3-30B-A3B and Qwen3-235B-A22B in fp8 on DGX H100, DGX
// B200 and GB200 NVL72, expert parallel 8-64 (drop-and-pad at capacity factor 1 gives every
// expert its even share), and its 25.11, 26.02 and 26.04 tables' Qwen3-235B-A22B on 256 H100,
// dropless with the router's forced load balancing and the recipes' EP communication overlap.
// Reached 19.37% and 31.2% with the plans the recipes ran, their per-tensor current scaling,
// Transformer Engine's per-expert GEMMs and casts, its norms' fused amax and Qwen3's query and
// key norms: every run too fast, the H100 ones by 6-18% with or without the overlap, the
// Blackwell ones by 24-31% (unmeasured per-expert launch costs, and a 25.09 software stack that
// later releases ran up to 1.8x faster on the same GB200 recipe); a regression guard.
TEST(Validate, MegatronBridgeMoeRunsHoldTheFidelityReached) {
  expect_within({"mbridge-moe-published.json", 9, 19.75, 31.75});
}

// LLM Foundry's MPT training benchmarks (tests/data/validation/llmfoundry-published.json: MPT
// 125M-70B with PyTorch FSDP, ZeRO-2 and -3, on 8-512 A100 40GB / 80GB and H100, 512 to 65536
// tokens, as torchtitan, the spec's PyTorch-native stack, with llm-foundry's Triton flash
// attention as attention_kernel "flash1-triton", FlashAttention-2's rate over 1.4 forward and
// over 2 backward). Reached 9.08% and 33.4%: the long sequences still too slow (16k-65k tokens
// -12..-17% on average), and the 2023 H100 software runs below the H100 profile set on 2025
// releases (+1..+20% at 2048 tokens on 128-512 GPUs, growing with the GPU count as the FSDP
// traffic does). The runs' FSDP1 gathers in place, so FSDP2's copies (charged to torchtitan)
// overstate their time a little; a regression guard.
TEST(Validate, LlmFoundryRunsHoldTheFidelityReached) {
  expect_within({"llmfoundry-published.json", 209, 9.5, 34.0});
}

// NeMo's published FP8 pretraining throughputs (tests/data/validation/nemo-24.07-published.json,
// from docs/source/performance/performance_summary.md, container 24.07) on 8-512 DGX H100:
// GPT-3, Llama 2 / 3 and Nemotron. The 24.07 launcher switched cuDNN's attention off, so the
// cases say attention_kernel "flash2", and the GPT-3, Llama 2 and Nemotron-340B ones the unfused
// cross entropy their launcher configs leave on. Reached 4.30% and 12.1% (Nemotron-8B +12.1%, no
// mechanism found; Nemotron-340B fits without recompute only with the bf16 gradients its launcher
// config states, at 73.9 of 74 GiB; GPT-3 20B fits the distributed optimizer without recompute
// only by offloading 3 layers' activations, which the search takes, +7.2%, -2.6% with ZeRO-2);
// a regression guard.
TEST(Validate, NemoPerformanceSummaryRunsHoldTheFidelityReached) {
  expect_within({"nemo-24.07-published.json", 12, 4.5, 12.5});
}

// NeMo's long-sequence tables (tests/data/validation/nemo-long-sequence-published.json, from
// docs/source/performance/performance_long_sequence.md): Llama 2 7B in fp8 on 4-1024 DGX H100
// (container 24.03.01) and Llama 3 8B in fp8 on 2-256 DGX B200 (25.04.rc2), 4K-1M tokens,
// context parallel 1-32 with TP 1-8, the batch shrinking as the sequence grows, attention
// 17-99% of the step. The H100 runs' launcher ran the flash-attn package (attention_kernel
// "flash2") and the unfused cross entropy; with cuDNN's rates they came out 11-51% too fast.
// Reached 2.93% and 5.6%: H100 2.06% (within -5.2..+2.6%), B200 3.90% (+1.9..+5.6%, its fp8
// GEMMs at the clock the H200's held fp8 product keeps); a regression guard.
TEST(Validate, NemoLongSequenceRunsHoldTheFidelityReached) {
  expect_within({"nemo-long-sequence-published.json", 17, 3.25, 6.0});
}

// Megatron-LM's README weak-scaling table (tests/data/validation/megatron-core-scaling-
// published.json; Megatron-Core r0.8.0 on H100, 2024): GPT 1.7B-462B on 48-6144 GPUs in bf16,
// TP 1-8 x PP 1-16 x DP 48 with DP and TP communication overlap, micro-batch, recompute and
// interleaving searched, Megatron-LM's unfused cross entropy. Reached 13.91% and 22.8%, every
// case too fast (+4% at 462B to +23% at 70B): no mechanism found; the TP 8 cases come within
// -4..+6% without the TP overlap the README states (docs/analytical_model.md, "Fidelity per
// family"). A regression guard.
TEST(Validate, MegatronCoreScalingRunsHoldTheFidelityReached) {
  expect_within({"megatron-core-scaling-published.json", 9, 14.25, 23.5});
}

// BigScience's BLOOM-176B on Jean Zay (tests/data/validation/bloom-published.json: the
// production run on 48 and 24 nodes and the reshaping runs on 24 and 36 nodes, TP 1-4 and PP
// 12-72, from the training logs): Megatron-DeepSpeed's pipeline engine, bf16 at ZeRO stage 0
// (DeepSpeed's BF16_Optimizer: sharded optimizer states, fp32 gradient accumulation after every
// micro-batch), full recompute, materialized attention and CUDA_LAUNCH_BLOCKING=1; the 72-stage
// run puts the embedding and the output layer on stages of their own. Reached 6.32% and 14.2%
// (the TP 4 runs 6-14% too fast; docs/analytical_model.md, "Fidelity per family"); a regression
// guard.
TEST(Validate, BloomRunsHoldTheFidelityReached) {
  expect_within({"bloom-published.json", 7, 6.5, 14.5});
}

// Predicts every case of `file` (under tests/data), records each error as a test property and
// checks each plan fits (the runs ran on real hardware); the report, or an empty one when the
// file does not validate or holds another number of cases.
ValidationReport report_that_fits(const std::string& file, size_t cases) {
  Expected<ValidationReport> rep = validate_cases(std::string(MONARCH_SOURCE_DIR) + "/tests/data/" + file);
  if (!rep.ok()) {
    ADD_FAILURE() << file << ": " << rep.problems().front().to_string();
    return {};
  }
  if (rep->rows.size() != cases) {
    ADD_FAILURE() << file << ": " << rep->rows.size() << " cases predicted, " << cases << " expected";
    return {};
  }
  for (const ValidationRow& r : rep->rows) {
    ::testing::Test::RecordProperty(r.id + "_error_pct", std::to_string(r.error_pct));
    EXPECT_TRUE(r.fits) << r.id << " ran on real hardware, so its plan must fit";
    EXPECT_GT(r.predicted, 0.0) << r.id;
  }
  return *rep;
}

// Published DLRM training throughputs (tests/data/validation/dlrm-published.json: MLPerf
// Training v3.0/v3.1 DLRM-DCNv2 on 64 and 128 H100, NVIDIA DeepLearningExamples DLRM on 1 and
// 8 A100; source, locator and conversion in each case). Every case is predicted through the
// planner's best sharding, or the sharding the run used where the case gives it, must fit, and stays within the bounds below; each case's error is
// recorded as a test property.
TEST(Validate, PublishedDlrmRunsWithinBounds) {
  const ValidationReport rep = report_that_fits("validation/dlrm-published.json", 8);
  ASSERT_EQ(rep.rows.size(), 8u);
  for (const ValidationRow& r : rep.rows)
    EXPECT_LE(std::fabs(r.error_pct), kDlrmWorstPct) << r.id << " predicted " << r.predicted << " measured " << r.measured;
  ::testing::Test::RecordProperty("dlrm_mape_pct", std::to_string(rep.mape_pct));
  EXPECT_LE(rep.mape_pct, kDlrmMapePct);
}

// TorchRec's own DLRM example on 8, 16 and 80 A100-40GB (AWS p4d, EFA;
// tests/data/torchrec_example_dlrm.json): a known gap, not bounded by error (docs/dlrm.md,
// "TorchRec's DLRM example"). What the model must still do: predict every run, 97-421 GiB of
// fp32 tables on 40 GB GPUs, with a sharding that fits.
TEST(Validate, TorchrecExampleRunsArePredictedWithAShardingThatFits) {
  EXPECT_EQ(report_that_fits("torchrec_example_dlrm.json", 3).rows.size(), 3u);
}

TEST(Validate, PrintsOneRowPerCaseAndTheMape) {
  std::ostringstream out, err;
  EXPECT_EQ(run_validate(kCalibration, 5.0, out, err), 0) << err.str();
  const std::string text = out.str();
  EXPECT_NE(text.find("korthikanti-175B-seqpar+selective"), std::string::npos);
  EXPECT_NE(text.find("dgxc-llama31-8b-fp8-128"), std::string::npos);
  EXPECT_NE(text.find("MAPE"), std::string::npos);
  // header, rows; blank, group header, 2 groups, overall; blank, worst header, 5 worst; summary
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 18 + 1 + 1 + 2 + 1 + 1 + 1 + 5 + 1);
  EXPECT_NE(text.find("Korthikanti et al. 2022"), std::string::npos);  // a group row
  EXPECT_NE(text.find("\noverall "), std::string::npos);
  EXPECT_NE(text.find("worst cases"), std::string::npos);
}

// --plans names the plan behind each prediction: what the case pins and what the search chose
// for what it leaves open (Korthikanti's 22B full-recompute row pins tp8 and full recompute).
TEST(Validate, PlansListsThePlanEachCaseWasPredictedWith) {
  ValidationSettings settings;
  settings.show_plans = true;
  std::ostringstream out, err;
  ASSERT_EQ(run_validate(kCalibration, settings, out, err), 0) << err.str();
  const std::string text = out.str();
  const size_t section = text.find("plans predicted:");
  ASSERT_NE(section, std::string::npos);
  const size_t row = text.find("korthikanti-22B-full-recompute ", section);
  ASSERT_NE(row, std::string::npos);
  const std::string line = text.substr(row, text.find('\n', row) - row);
  EXPECT_NE(line.find("tp8 pp1 dp1"), std::string::npos) << line;
  EXPECT_NE(line.find("recompute=full"), std::string::npos) << line;
  Expected<ValidationReport> rep = validate_cases(kCalibration);
  ASSERT_TRUE(rep);
  for (const ValidationRow& r : rep->rows) EXPECT_EQ(r.plan.rfind("tp", 0), 0u) << r.id << ": " << r.plan;
  std::ostringstream plain, err2;
  ASSERT_EQ(run_validate(kCalibration, ValidationSettings{}, plain, err2), 0);
  EXPECT_EQ(plain.str().find("plans predicted:"), std::string::npos);  // only when asked
}

// Per-group figures: MAPE, median and mean signed error over the group's rows; overall over all.
TEST(Validate, GroupFiguresAreTheMeanAndMedianOfTheirRows) {
  std::vector<ValidationRow> rows(4);
  const double errors[] = {-10, 2, 4, 30};
  const char* groups[] = {"a", "a", "a", "b"};
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].id = "c" + std::to_string(i);
    rows[i].group = groups[i];
    rows[i].error_pct = errors[i];
  }
  const ErrorStats a = error_stats(rows, std::string("a"));
  EXPECT_EQ(a.cases, 3u);
  EXPECT_NEAR(a.mape_pct, 16.0 / 3.0, 1e-12);
  EXPECT_NEAR(a.mean_signed_error_pct, -4.0 / 3.0, 1e-12);
  EXPECT_NEAR(a.median_error_pct, 2.0, 1e-12);
  EXPECT_EQ(a.worst_id, "c0");
  const ErrorStats all = error_stats(rows, std::nullopt);
  EXPECT_EQ(all.cases, 4u);
  EXPECT_NEAR(all.median_error_pct, 3.0, 1e-12);  // even count: mean of the middle two
  EXPECT_NEAR(all.max_abs_error_pct, 30.0, 1e-12);
  EXPECT_EQ(all.worst_id, "c3");
}

// The analytical shares of the predicted time add up to the whole iteration.
TEST(Validate, TimeSharesOfEachCaseSumToOne) {
  Expected<ValidationReport> rep = validate_cases(kCalibration);
  ASSERT_TRUE(rep.ok());
  for (const ValidationRow& r : rep->rows) {
    const TimeShares& s = r.shares;
    EXPECT_NEAR(s.compute + s.exposed_comm + s.bubble + s.optimizer + s.host, 1.0, 1e-9) << r.id;
    EXPECT_GT(s.compute, 0.5) << r.id;
  }
}

// --max-gpus skips the cases whose plan is larger and says how many; a predictor replaces the
// analytical backend (here: one that reports a problem, which names the case).
TEST(Validate, MaxGpusSkipsLargerCasesAndPredictorProblemsNameTheCase) {
  ValidationSettings settings;
  settings.max_gpus = 64;
  Expected<ValidationReport> rep = validate_cases(kCalibration, settings);
  ASSERT_TRUE(rep.ok());
  EXPECT_FALSE(rep->skipped.empty());
  for (const ValidationRow& r : rep->rows) EXPECT_LE(r.gpus, 64) << r.id;
  EXPECT_EQ(rep->rows.size() + rep->skipped.size(), 18u);
  std::ostringstream out, err;
  EXPECT_EQ(run_validate(kCalibration, settings, out, err), 0);
  EXPECT_NE(out.str().find("above --max-gpus 64"), std::string::npos);

  settings.max_gpus = 1;
  EXPECT_EQ(run_validate(kCalibration, settings, out, err), 2);  // nothing left to compare
  settings.max_gpus.reset();
  settings.predictor = [](const Scenario&, const Plan&) -> Expected<BackendResult> {
    return Expected<BackendResult>::fail("/parallelism", "cannot simulate");
  };
  std::ostringstream out2, err2;
  EXPECT_EQ(run_validate(kCalibration, settings, out2, err2), 2);
  EXPECT_NE(err2.str().find("calibration.json: /0/scenario/parallelism"), std::string::npos) << err2.str();
}

TEST(Validate, ExceedingMaxMapeReturnsOne) {
  std::ostringstream out, err;
  EXPECT_EQ(run_validate(kCalibration, 0.01, out, err), 1);
  EXPECT_NE(err.str().find("exceeds --max-mape"), std::string::npos);
}

TEST(Validate, BadInputReturnsTwoAndNamesWhere) {
  std::ostringstream out, err;
  EXPECT_EQ(run_validate("/nonexistent/cases.json", std::nullopt, out, err), 2);
  EXPECT_NE(err.str().find("/nonexistent/cases.json"), std::string::npos);

  err.str("");
  const std::string broken = write_temp("broken.json", "[ {\"id\": ");
  EXPECT_EQ(run_validate(broken, std::nullopt, out, err), 2);
  EXPECT_NE(err.str().find("broken.json"), std::string::npos);

  err.str("");
  const std::string not_array = write_temp("object.json", "{\"id\": \"x\"}");
  EXPECT_EQ(run_validate(not_array, std::nullopt, out, err), 2);
  EXPECT_NE(err.str().find("expected an array"), std::string::npos);

  // A valid case, then one with an unknown metric and one with a bad scenario value.
  std::ifstream in(kCalibration);
  nlohmann::json cases = nlohmann::json::parse(in);
  nlohmann::json bad = nlohmann::json::array({cases[0], cases[1], cases[2]});
  bad[1]["target"]["metric"] = "furlongs";
  bad[2]["scenario"]["model"]["hidden_size"] = -5;
  const std::string bad_path = write_temp("bad_cases.json", bad.dump(1));
  err.str("");
  EXPECT_EQ(run_validate(bad_path, std::nullopt, out, err), 2);
  EXPECT_NE(err.str().find("/1/target/metric"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("/2/scenario/model/hidden_size"), std::string::npos) << err.str();

  err.str("");
  EXPECT_EQ(run_validate(kCalibration, -3.0, out, err), 2);
  EXPECT_NE(err.str().find("--max-mape"), std::string::npos);
}

TEST(Validate, OtherMetricsArePredictedToo) {
  std::ifstream in(kCalibration);
  nlohmann::json cases = nlohmann::json::parse(in);
  // Korthikanti et al. 2022 / Megatron-LM README: 175B with sequence parallelism and
  // selective recompute reaches MFU 51.4%.
  nlohmann::json c = cases[3];
  ASSERT_EQ(c["id"], "korthikanti-175B-seqpar+selective");
  c["target"] = {{"metric", "mfu"}, {"value", 0.514}};
  const std::string path = write_temp("mfu.json", nlohmann::json::array({c}).dump());
  Expected<ValidationReport> rep = validate_cases(path);
  ASSERT_TRUE(rep.ok());
  EXPECT_NEAR(rep->rows[0].predicted, 0.514, 0.514 * 0.12);
}

}  // namespace
}  // namespace monarch
