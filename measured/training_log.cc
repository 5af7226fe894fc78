#include "measured/training_log.h"

#include <fstream>
#include <regex>
#include <sstream>

namespace monarch::measured {
namespace {

constexpr double kMsPerS = 1000.0;
constexpr double kPercent = 100.0;

std::optional<double> number_after(const std::string& line, const std::regex& re) {
  std::smatch m;
  if (!std::regex_search(line, m, re)) return std::nullopt;
  std::string digits;
  for (char c : m[1].str())
    if (c != ',') digits += c;
  try {
    return std::stod(digits);
  } catch (...) {
    return std::nullopt;
  }
}

constexpr const char* kNumber = R"(([-+]?[0-9][0-9,]*\.?[0-9]*(?:[eE][-+]?[0-9]+)?|nan|inf))";

std::regex field(const std::string& label) { return std::regex(label + R"(\s*:?\s*)" + kNumber); }

}  // namespace

std::string strip_ansi(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      size_t j = i + 2;
      while (j < text.size() && !std::isalpha(static_cast<unsigned char>(text[j]))) ++j;
      i = j;
      continue;
    }
    out += text[i];
  }
  return out;
}

Expected<TrainingLog> parse_training_log(const std::string& text, const std::string& source) {
  static const std::regex kMegatronIter(R"(iteration\s+([0-9]+)\s*/\s*[0-9]+\s*\|)");
  static const std::regex kMegatronTime = field(R"(elapsed time per iteration \(ms\))");
  static const std::regex kMegatronTflops = field(R"(throughput per GPU \(TFLOP/s/GPU\))");
  static const std::regex kMegatronLoss = field(R"(lm loss)");
  static const std::regex kMegatronGradNorm = field(R"(grad norm)");
  static const std::regex kTitanStep(R"(\bstep:\s*([0-9]+)\b)");
  static const std::regex kTitanLoss = field(R"(\bloss)");
  static const std::regex kTitanGradNorm = field(R"(grad_norm)");
  static const std::regex kTitanMemory(R"(memory:\s*([0-9.]+)\s*GiB)");
  static const std::regex kTitanTps = field(R"(\btps)");
  static const std::regex kTitanTflops = field(R"(\btflops)");
  static const std::regex kTitanMfu(R"(mfu:\s*([0-9.]+)\s*%)");

  TrainingLog log;
  log.source = source;
  int megatron = 0, titan = 0;
  std::istringstream in(text);
  std::string raw;
  while (std::getline(in, raw)) {
    const std::string line = strip_ansi(raw);
    std::smatch m;
    LogStep s;
    if (std::regex_search(line, m, kMegatronIter)) {
      s.step = std::stoll(m[1].str());
      if (auto ms = number_after(line, kMegatronTime)) s.iteration_s = *ms / kMsPerS;
      s.tflops_per_gpu = number_after(line, kMegatronTflops);
      s.loss = number_after(line, kMegatronLoss);
      s.grad_norm = number_after(line, kMegatronGradNorm);
      ++megatron;
    } else if (std::regex_search(line, m, kTitanStep) && line.find("loss") != std::string::npos) {
      s.step = std::stoll(m[1].str());
      s.loss = number_after(line, kTitanLoss);
      s.grad_norm = number_after(line, kTitanGradNorm);
      s.memory_gib = number_after(line, kTitanMemory);
      s.tokens_per_s_per_gpu = number_after(line, kTitanTps);
      s.tflops_per_gpu = number_after(line, kTitanTflops);
      if (auto mfu = number_after(line, kTitanMfu)) s.mfu = *mfu / kPercent;
      ++titan;
    } else {
      continue;
    }
    log.steps.push_back(s);
  }
  if (log.steps.empty())
    return Expected<TrainingLog>::fail(source,
                                       "no iteration line found (expected Megatron-LM's \"iteration N/ M | ... | "
                                       "elapsed time per iteration (ms): ...\" or torchtitan's \"step: N  loss: ...\")");
  log.format = titan > megatron ? LogFormat::kTorchtitan : LogFormat::kMegatron;
  return log;
}

Expected<TrainingLog> read_training_log(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Expected<TrainingLog>::fail(path, "cannot open the log");
  std::ostringstream text;
  text << f.rdbuf();
  return parse_training_log(text.str(), path);
}

}  // namespace monarch::measured
