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
// the model reaches now (33.8 % MAPE, worst +74.3 %), so a regression fails.
constexpr double kDlrmMapePct = 34.0;
constexpr double kDlrmWorstPct = 75.0;

std::string write_temp(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "monarch_validate_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

// The acceptance bounds of issue 3: one calibration per GPU kind and precision predicts the
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
  ASSERT_EQ(rep->rows.size(), 3u);  // Mixtral 8x7B (Megatron-Core), Qwen3-30B-A3B x 2 (Megatron-Bridge)
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

// Published DLRM training throughputs (tests/data/validation/dlrm-published.json: MLPerf
// Training v3.0/v3.1 DLRM-DCNv2 on 64 and 128 H100, NVIDIA DeepLearningExamples DLRM on 1 and
// 8 A100; source, locator and conversion in each case). Every case is predicted through the
// planner's best sharding, must fit, and stays within the bounds below; each case's error is
// recorded as a test property.
TEST(Validate, PublishedDlrmRunsWithinBounds) {
  const std::string path = std::string(MONARCH_SOURCE_DIR) + "/tests/data/validation/dlrm-published.json";
  Expected<ValidationReport> rep = validate_cases(path);
  ASSERT_TRUE(rep.ok()) << (rep.ok() ? "" : rep.problems().front().to_string());
  ASSERT_EQ(rep->rows.size(), 8u);
  for (const ValidationRow& r : rep->rows) {
    ::testing::Test::RecordProperty(r.id + "_error_pct", std::to_string(r.error_pct));
    EXPECT_TRUE(r.fits) << r.id << " ran on real hardware, so its plan must fit";
    EXPECT_LE(std::fabs(r.error_pct), kDlrmWorstPct) << r.id << " predicted " << r.predicted << " measured " << r.measured;
  }
  ::testing::Test::RecordProperty("dlrm_mape_pct", std::to_string(rep->mape_pct));
  EXPECT_LE(rep->mape_pct, kDlrmMapePct);
}

TEST(Validate, PrintsOneRowPerCaseAndTheMape) {
  std::ostringstream out, err;
  EXPECT_EQ(run_validate(kCalibration, 5.0, out, err), 0) << err.str();
  const std::string text = out.str();
  EXPECT_NE(text.find("korthikanti-175B-seqpar+selective"), std::string::npos);
  EXPECT_NE(text.find("dgxc-llama31-8b-fp8-128"), std::string::npos);
  EXPECT_NE(text.find("MAPE"), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 18 + 1);  // header, rows, summary
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
