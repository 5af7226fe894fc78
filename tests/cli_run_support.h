// Running the built monarch-sim binary from an end-to-end test: the command line shell-quoted,
// stdout and stderr captured through files in the test's folder, stdin closed.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace monarch::test {

struct CliResult {
  int status = -1;  // the exit status, -1 when the process did not exit normally
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs BINARY ARGS... with its output in DIR/stdout and DIR/stderr.
inline CliResult run_binary(const std::string& binary, const std::vector<std::string>& args,
                            const std::filesystem::path& dir) {
  std::string cmd = shell_quote(binary);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " >" + shell_quote((dir / "stdout").string()) + " 2>" + shell_quote((dir / "stderr").string()) + " </dev/null";
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(dir / "stdout");
  r.err = slurp(dir / "stderr");
  return r;
}

}  // namespace monarch::test
