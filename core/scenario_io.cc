#include "core/scenario_io.h"

// The scenario reader's entry points: JSON text with positions in its errors, a scenario file
// or JSON value read section by section (one file per section: core/scenario_io_*.cc), and the
// backend names.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/scenario_io_detail.h"

namespace monarch {

using namespace scenario_io_detail;

Expected<nlohmann::json> parse_json_text(std::string_view text, const std::string& source_name) {
  // Nesting depth first (outside strings), so a hostile file cannot exhaust the stack.
  {
    int depth = 0;
    bool in_string = false, escaped = false;
    size_t line = 1, column = 0;
    for (char ch : text) {
      ++column;
      if (ch == '\n') { ++line; column = 0; }
      if (in_string) {
        if (escaped) escaped = false;
        else if (ch == '\\') escaped = true;
        else if (ch == '"') in_string = false;
        continue;
      }
      if (ch == '"') in_string = true;
      else if (ch == '[' || ch == '{') {
        if (++depth > kMaxJsonDepth)
          return Expected<json>::fail(source_name + ":" + std::to_string(line) + ":" + std::to_string(column),
                                      "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels; expected a scenario (4 levels)");
      } else if (ch == ']' || ch == '}') {
        --depth;
      }
    }
  }
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based offset of the character that stopped the parser.
    size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    if (byte > text.size()) byte = text.size();
    size_t line = 1, column = 1;
    for (size_t i = 0; i < byte; ++i) {
      if (text[i] == '\n') { ++line; column = 1; }
      else ++column;
    }
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error while
    // parsing object - unexpected '}'; expected string literal" -> keep what follows ": ".
    auto colon = what.find(": ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) what = "the file is empty, expected a JSON object";
    return Expected<json>::fail(source_name + ":" + std::to_string(line) + ":" + std::to_string(column),
                                "JSON syntax error: " + what);
  } catch (const json::exception& e) {  // out_of_range 406: a number beyond the double range
    std::string what = e.what();
    auto pos = what.find("] ");
    return Expected<json>::fail(source_name, "JSON number out of range: " + (pos == std::string::npos ? what : what.substr(pos + 2)));
  }
}

Expected<nlohmann::json> read_json_file(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return Expected<nlohmann::json>::fail(path, "cannot read: " + ec.message());
  if (size > static_cast<uintmax_t>(kMaxScenarioFileBytes))
    return Expected<nlohmann::json>::fail(path, "larger than " + std::to_string(kMaxScenarioFileBytes) + " bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Expected<nlohmann::json>::fail(path, "cannot open");
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_json_text(buf.str(), path);
}

Expected<Scenario> read_scenario_file(const std::string& path, const std::vector<std::string>& overrides) {
  Ctx ctx;
  // "-": the scenario on standard input (`monarch-sim import cfg.toml --num-gpus 64 | monarch-sim -`);
  // its relative paths resolve from the working directory.
  const bool from_stdin = path == "-";
  auto text = read_text_file(ctx, from_stdin ? "/dev/stdin" : path, from_stdin ? "<stdin>" : path, "scenario file");
  if (!text) return ctx.problems();
  auto parsed = parse_json_text(*text, from_stdin ? "<stdin>" : path);
  if (!parsed) return parsed.problems();
  std::filesystem::path p(from_stdin ? "stdin" : path);
  std::string base = p.has_parent_path() ? p.parent_path().string() : ".";
  auto s = scenario_from_json(*parsed, base, overrides);
  if (!s) {
    // Name the file in front of JSON paths, so that messages read "a.json: /model/x: ...".
    Problems probs = s.problems();
    for (auto& pr : probs)
      if (!pr.where.empty() && pr.where[0] == '/') pr.where = path + ": " + pr.where;
    return probs;
  }
  Scenario out = std::move(s).value();
  out.source_path = path;
  if (out.name.empty()) out.name = p.stem().string();
  return out;
}

Expected<Scenario> scenario_from_json(const nlohmann::json& j_in, const std::string& base_dir,
                                      const std::vector<std::string>& overrides) {
  Ctx ctx;
  json j = j_in;
  std::vector<std::pair<std::string, std::string>> overridden;  // pointer, option text
  if (!j.is_object()) {
    ctx.found("/", j, "a JSON object {name, model, cluster, training, parallelism}");
    return ctx.problems();
  }
  for (const auto& ov : overrides) {
    std::string ptr = apply_override(ctx, j, ov);
    if (!ptr.empty()) overridden.emplace_back(ptr, ov);
  }
  if (ctx.count() > 0) return ctx.problems();

  Scenario s;
  Obj top(ctx, &j, "", {"name", "description", "version", "model", "cluster", "training", "parallelism", "search",
                        "backends", "whatif", "reliability"});
  if (auto n = get_str(ctx, top, "name")) s.name = *n;
  (void)get_str(ctx, top, "description");
  if (const json* v = top.get("version")) {
    // Format 1.1 only adds keys: both versions read the same way.
    if (!v->is_number() || (v->get<double>() != 1 && v->get<double>() != 1.1))
      ctx.found("/version", *v, "1 or 1.1 (scenario format version)");
  }
  read_model(ctx, section(ctx, top.get("model"), "/model"), base_dir, s.model);
  bool nodes_ok = false;
  read_cluster(ctx, section(ctx, top.get("cluster"), "/cluster"), base_dir, s.cluster, nodes_ok);
  std::optional<double> training_capacity;
  read_training(ctx, section(ctx, top.get("training"), "/training"), s.training, training_capacity);
  if (training_capacity) {
    const json* mj = top.get("model");
    if (mj && mj->is_object() && mj->contains("moe_capacity_factor") && s.model.moe_capacity_factor != *training_capacity)
      ctx.add("/training/moe_capacity_factor", "found " + fmt_num(*training_capacity) + ", but /model/moe_capacity_factor is " +
                                                   fmt_num(s.model.moe_capacity_factor) + "; expected one of them, or equal values");
    if (s.model.moe_dropless)
      ctx.add("/training/moe_capacity_factor", "found " + fmt_num(*training_capacity) +
                                                   ", but /model/moe_dropless is true (dropless routing has no capacity); expected one of them");
    s.model.moe_capacity_factor = *training_capacity;
  }
  const json* pj = section(ctx, top.get("parallelism"), "/parallelism");
  read_parallelism(ctx, pj, s.parallelism);
  read_search(ctx, section(ctx, top.get("search"), "/search"), s.search);
  read_backends(ctx, top.get("backends"), s.backends);
  read_whatif(ctx, section(ctx, top.get("whatif"), "/whatif"), s.cluster, nodes_ok, s.whatif);
  read_reliability(ctx, section(ctx, top.get("reliability"), "/reliability"), s);
  if (s.search.objective == Objective::kTimeToTrain) {
    if (!s.reliability)
      ctx.add("/search/objective", "\"time_to_train\" needs a reliability block (failure rates, checkpoint storage, restart times)");
    if (s.training.total_tokens <= 0)
      ctx.add("/search/objective", "\"time_to_train\" needs /training/total_tokens (the tokens the run trains on)");
  }
  top.finish();
  cross_check(ctx, pj, s);

  if (ctx.count() > 0) {
    Problems probs = std::move(ctx.problems());
    for (auto& pr : probs)
      for (const auto& [ptr, text] : overridden)
        if (pr.where == ptr || pr.where.rfind(ptr + "/", 0) == 0 ||
            (pr.where == "/parallelism" && ptr.rfind("/parallelism/", 0) == 0)) {
          pr.message += " (set by --set " + text + ")";
          break;
        }
    return probs;
  }
  return s;
}

std::vector<Backend> default_backends(bool simgrid_built) {
  std::vector<Backend> v = {Backend::kAnalytical};
  if (simgrid_built) v.push_back(Backend::kSimgrid);
  return v;
}

bool parse_backend(std::string_view name, Backend* out) {
  for (Backend b : kBackends)
    if (name == to_string(b)) {
      *out = b;
      return true;
    }
  return false;
}

}  // namespace monarch
