// Helpers of the monarch-run tests: launch it under mpirun and read what it wrote.
#pragma once

#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace monarch::realrt::run_test {

inline const std::string kData = std::string(MONARCH_SOURCE_DIR) + "/realrt/testdata/";
inline const std::string kTmp = std::string(MONARCH_BINARY_DIR) + "/realrt/run_test_tmp/";

struct Launch {
  int status = -1;  // exit status of mpirun
  std::string log;  // stdout + stderr
  double seconds = 0;
};

inline Launch mpirun(int np, const std::string& args, const std::string& name) {
  std::filesystem::create_directories(kTmp);
  const std::string log = kTmp + name + ".log";
  const std::string cmd = std::string("timeout 300 ") + MONARCH_MPIEXEC + " --allow-run-as-root --oversubscribe -np " +
                          std::to_string(np) + " " + MONARCH_RUN + " " + args + " > " + log + " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  const int raw = std::system(cmd.c_str());
  Launch r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128;
  std::ifstream f(log);
  std::stringstream ss;
  ss << f.rdbuf();
  r.log = ss.str();
  return r;
}

inline std::vector<double> losses_of(const std::string& path) {
  std::ifstream f(path);
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j.at("format"), "monarch-run-result/1");
  return j.at("result").at("losses").get<std::vector<double>>();
}

}  // namespace monarch::realrt::run_test
