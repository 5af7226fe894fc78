#include "sim/validate_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace monarch {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() {
  const fs::path dir = fs::temp_directory_path() / "monarch_validate_report_test";
  fs::create_directories(dir);
  return dir;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path path = temp_dir() / name;
  std::ofstream(path) << text;
  return path.string();
}

// The first two cases of the project's calibration set (Korthikanti et al. 2022 on A100).
std::string two_calibration_cases() {
  std::ifstream in(std::string(MONARCH_SOURCE_DIR) + "/tests/data/validation/calibration.json");
  const nlohmann::json all = nlohmann::json::parse(in);
  nlohmann::json two = nlohmann::json::array({all[0], all[1]});
  return write_temp("two_cases.json", two.dump());
}

ValidationRow row(const std::string& id, const std::string& group, double error_pct, double compute_s, double comm_s,
                  const std::string& plan = "tp8 pp1") {
  ValidationRow r;
  r.id = id;
  r.group = group;
  r.metric = "iteration_time_s";
  r.gpus = 8;
  r.iteration_time_s = compute_s + comm_s;
  r.measured = 2.0;
  r.predicted = r.iteration_time_s;
  r.error_pct = error_pct;
  r.shares.compute = compute_s / r.iteration_time_s;
  r.shares.exposed_comm = comm_s / r.iteration_time_s;
  r.plan = plan;
  return r;
}

TEST(ValidationReport, ASavedReportReadsBackCaseByCase) {
  Expected<ValidationReport> rep = validate_cases(two_calibration_cases());
  ASSERT_TRUE(rep.ok()) << rep.problems().front().to_string();
  const std::string path = write_temp("saved.json", validation_report_json(*rep, "two_cases.json", "analytical"));
  Expected<SavedValidation> back = read_validation_report(path);
  ASSERT_TRUE(back.ok()) << back.problems().front().to_string();
  EXPECT_EQ(back->cases_file, "two_cases.json");
  EXPECT_EQ(back->backend, "analytical");
  ASSERT_EQ(back->rows.size(), rep->rows.size());
  for (size_t i = 0; i < rep->rows.size(); ++i) {
    const ValidationRow &a = rep->rows[i], &b = back->rows[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.group, b.group);
    EXPECT_EQ(a.plan, b.plan);
    EXPECT_EQ(a.gpus, b.gpus);
    EXPECT_DOUBLE_EQ(a.error_pct, b.error_pct);
    EXPECT_DOUBLE_EQ(a.iteration_time_s, b.iteration_time_s);
    EXPECT_NEAR(a.shares.compute, b.shares.compute, 1e-12);
    EXPECT_NEAR(a.shares.exposed_comm, b.shares.exposed_comm, 1e-12);
  }
  // The file also carries the figures per group and overall, for people and scripts.
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["format"], kValidationReportFormat);
  EXPECT_DOUBLE_EQ(j["overall"]["mape_pct"].get<double>(), rep->mape_pct);
  ASSERT_EQ(j["groups"].size(), rep->groups.size());
}

TEST(ValidationReport, TheChangeNamesTheTermThatMovedEachCase) {
  const std::vector<ValidationRow> before = {row("a", "g1", -10.0, 1.0, 0.2), row("b", "g1", 4.0, 1.0, 0.1),
                                             row("c", "g2", 1.0, 1.0, 0.0), row("gone", "g2", 50.0, 1.0, 0.0)};
  const std::vector<ValidationRow> now = {row("a", "g1", -2.0, 1.0, 0.5), row("b", "g1", 4.0, 1.0, 0.1),
                                          row("c", "g2", -3.0, 0.9, 0.0, "tp4 pp2"), row("new", "g2", 7.0, 1.0, 0.0)};
  const ReportChange ch = compare_reports(before, now);
  ASSERT_EQ(ch.cases.size(), 3u);
  // Largest change of error first: a moved 8 points (its exposed communication grew 0.3 s).
  EXPECT_EQ(ch.cases[0].id, "a");
  EXPECT_STREQ(ch.cases[0].moved_term, "exposed comm");
  EXPECT_NEAR(ch.cases[0].moved_s, 0.3, 1e-12);
  EXPECT_EQ(ch.cases[1].id, "c");
  EXPECT_STREQ(ch.cases[1].moved_term, "compute");
  EXPECT_NEAR(ch.cases[1].moved_s, -0.1, 1e-12);
  EXPECT_EQ(ch.cases[2].id, "b");
  EXPECT_STREQ(ch.cases[2].moved_term, "-") << "nothing moved";
  EXPECT_EQ(ch.added, std::vector<std::string>{"new"});
  EXPECT_EQ(ch.removed, std::vector<std::string>{"gone"});
  // The figures cover the cases in both reports only.
  ASSERT_EQ(ch.groups_now.size(), 2u);
  EXPECT_EQ(ch.groups_now[0].group, "g1");
  EXPECT_DOUBLE_EQ(ch.groups_before[0].mape_pct, 7.0);
  EXPECT_DOUBLE_EQ(ch.groups_now[0].mape_pct, 3.0);
  EXPECT_DOUBLE_EQ(ch.overall_before.mape_pct, 5.0);
  EXPECT_DOUBLE_EQ(ch.overall_now.mape_pct, 3.0);

  std::ostringstream out;
  print_report_change(ch, "before.json", 0.05, 25, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("moved most: exposed comm +0.3 s"), std::string::npos) << text;
  EXPECT_NE(text.find("-> tp4 pp2"), std::string::npos) << "a changed plan is shown\n" << text;
  EXPECT_EQ(text.find("  b "), std::string::npos) << "an unmoved case is not listed\n" << text;
  EXPECT_NE(text.find("cases not in before.json: new"), std::string::npos) << text;
  EXPECT_NE(text.find("cases only in before.json: gone"), std::string::npos) << text;
}

// Cases without a group are one group, "(no group)", however many there are.
TEST(ValidationReport, CasesWithoutAGroupFormOneGroup) {
  const std::vector<ValidationRow> rows = {row("a", "", -2.0, 1.0, 0.0), row("b", "", 4.0, 1.0, 0.0),
                                           row("c", "g", 1.0, 1.0, 0.0)};
  const std::vector<ErrorStats> groups = group_stats(rows);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].group, "(no group)");
  EXPECT_EQ(groups[0].cases, 2u);
  EXPECT_DOUBLE_EQ(groups[0].mape_pct, 3.0);
  EXPECT_EQ(groups[1].group, "g");
}

TEST(ValidationReport, ABadReportIsRefusedNamingTheJsonPath) {
  struct Case {
    std::string text, where;
  } cases[] = {
      {R"({"format": "other"})", "/format"},
      {R"([])", ": /"},
      {R"({"format": "monarch-validation-report/1", "cases_file": "x", "backend": "analytical"})", "/cases"},
      {R"({"format": "monarch-validation-report/1", "cases_file": "x", "backend": "analytical", "cases": [
          {"id": "a", "metric": "iteration_time_s", "gpus": 8, "predicted": 1, "measured": 1, "error_pct": 0,
           "iteration_time_s": 1, "time_s": {"compute": 1, "exposed_comm": 0, "bubble": 0, "optimizer": 0}}]})",
       "/cases/0/time_s/host"},
      {R"({"format": "monarch-validation-report/1", "cases_file": "x", "backend": "analytical", "cases": [
          {"id": "a", "metric": "iteration_time_s", "gpus": 8, "predicted": "fast", "measured": 1, "error_pct": 0,
           "iteration_time_s": 1, "time_s": {}}]})",
       "/cases/0/predicted"},
  };
  for (const Case& c : cases) {
    const std::string path = write_temp("bad.json", c.text);
    Expected<SavedValidation> r = read_validation_report(path);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.problems().front().where.find(path), std::string::npos) << r.problems().front().to_string();
    EXPECT_NE(r.problems().front().where.find(c.where), std::string::npos) << r.problems().front().to_string();
  }
  Expected<SavedValidation> missing = read_validation_report((temp_dir() / "no-such-report.json").string());
  EXPECT_FALSE(missing.ok());
}

TEST(ValidationReport, RunValidateSavesAndComparesAndRefusesABadReportBeforePredicting) {
  const std::string cases = two_calibration_cases();
  const std::string saved = (temp_dir() / "run_saved.json").string();
  fs::remove(saved);
  ValidationSettings settings;
  settings.save_path = saved;
  std::ostringstream out, err;
  ASSERT_EQ(run_validate(cases, settings, out, err), 0) << err.str();
  ASSERT_TRUE(fs::exists(saved));

  ValidationSettings again;
  again.against_path = saved;
  std::ostringstream out2, err2;
  ASSERT_EQ(run_validate(cases, again, out2, err2), 0) << err2.str();
  EXPECT_NE(out2.str().find("MAPE before"), std::string::npos) << out2.str();
  EXPECT_NE(out2.str().find("or whose plan changed: 0"), std::string::npos) << "the same model moves nothing\n" << out2.str();

  ValidationSettings bad;
  bad.against_path = write_temp("not_a_report.json", "{\"format\": 1}");
  std::ostringstream out3, err3;
  EXPECT_EQ(run_validate(cases, bad, out3, err3), 2);
  EXPECT_NE(err3.str().find("--against"), std::string::npos) << err3.str();
  EXPECT_TRUE(out3.str().empty()) << "no case is predicted against a bad report";

  ValidationSettings nowhere;
  nowhere.save_path = (temp_dir() / "no-such-folder" / "r.json").string();
  std::ostringstream out4, err4;
  EXPECT_EQ(run_validate(cases, nowhere, out4, err4), 2);
  EXPECT_NE(err4.str().find("--save"), std::string::npos) << err4.str();
  EXPECT_FALSE(fs::exists(temp_dir() / "no-such-folder"));
}

// Progress after each case, then the end; a cancelled run stops between cases, prints no figures
// and writes no report; the report never replaces the cases file.
TEST(ValidationReport, RunValidateReportsProgressStopsWhenCancelledAndKeepsTheCasesFile) {
  const std::string cases = two_calibration_cases();
  std::vector<std::pair<size_t, size_t>> calls;
  ValidationSettings settings;
  settings.progress = [&](size_t done, size_t total) { calls.emplace_back(done, total); };
  std::ostringstream out, err;
  ASSERT_EQ(run_validate(cases, settings, out, err), 0) << err.str();
  const std::vector<std::pair<size_t, size_t>> expected = {{1, 2}, {0, 0}};
  EXPECT_EQ(calls, expected);

  const std::string saved = (temp_dir() / "cancelled.json").string();
  fs::remove(saved);
  ValidationSettings stop;
  stop.save_path = saved;
  int polls = 0;
  stop.cancelled = [&] { return ++polls > 1; };  // after the first case
  std::ostringstream out2, err2;
  EXPECT_EQ(run_validate(cases, stop, out2, err2), kValidateInterrupted);
  EXPECT_TRUE(out2.str().empty()) << out2.str();
  EXPECT_FALSE(fs::exists(saved));

  const std::string before = [&] {
    std::ifstream in(cases);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }();
  ValidationSettings over;
  over.save_path = cases;
  std::ostringstream out3, err3;
  EXPECT_EQ(run_validate(cases, over, out3, err3), 2);
  EXPECT_NE(err3.str().find("is the cases file"), std::string::npos) << err3.str();
  std::ifstream in(cases);
  std::stringstream after;
  after << in.rdbuf();
  EXPECT_EQ(after.str(), before);
}

}  // namespace
}  // namespace monarch
