// --set PATH=VALUE overrides, applied to the JSON before it is read.
#include "core/scenario_io_detail.h"


namespace monarch::scenario_io_detail {
namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::string cur;
  const char sep = !path.empty() && path[0] == '/' ? '/' : '.';
  for (size_t i = (sep == '/' ? 1 : 0); i <= path.size(); ++i) {
    if (i == path.size() || path[i] == sep) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += path[i];
    }
  }
  return parts;
}

}  // namespace

// Applies one override; returns the JSON pointer it set, or "" (problem recorded).
std::string apply_override(Ctx& ctx, json& root, const std::string& ov) {
  const std::string where = "--set " + ov;
  const auto eq = ov.find('=');
  if (eq == std::string::npos || eq == 0) {
    ctx.add(where, "expected PATH=VALUE, e.g. parallelism.tp=4");
    return "";
  }
  const std::string path = ov.substr(0, eq), text = ov.substr(eq + 1);
  json value;
  try {
    value = json::parse(text);
  } catch (const json::parse_error&) {
    value = text;  // not JSON: a plain string (e.g. --set cluster.gpu=H100-SXM)
    try {
      (void)value.dump();
    } catch (const json::type_error&) {
      ctx.add(where, "the value is not valid UTF-8, expected JSON or a UTF-8 string");
      return "";
    }
  } catch (const json::exception& e) {  // e.g. out_of_range 406: number overflow parsing '1e400'
    std::string what = e.what();
    auto pos = what.find("] ");
    ctx.add(where, "found \"" + text + "\": " + (pos == std::string::npos ? what : what.substr(pos + 2)) +
                       ", expected a number within the double range");
    return "";
  }
  std::vector<std::string> parts = split_path(path);
  for (const auto& p : parts)
    if (p.empty()) {
      ctx.add(where, "found an empty key in \"" + path + "\", expected a path like parallelism.tp");
      return "";
    }
  if (!root.is_object()) {
    ctx.add(where, "the scenario is not a JSON object");
    return "";
  }
  json* node = &root;
  std::string pointer;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& k = parts[i];
    const bool last = i + 1 == parts.size();
    if (node->is_array()) {
      char* end = nullptr;
      long idx = std::strtol(k.c_str(), &end, 10);
      if (*end != 0 || idx < 0 || static_cast<size_t>(idx) >= node->size()) {
        ctx.add(where, pointer + " is an array of " + std::to_string(node->size()) + ", expected an index below that, found \"" + k + "\"");
        return "";
      }
      pointer += "/" + k;
      if (last) { (*node)[idx] = value; return pointer; }
      node = &(*node)[idx];
      continue;
    }
    if (pointer == "/cluster/gpu") gpu_as_object(root);  // --set cluster.gpu.power_limit_W=500
    if (!node->is_object()) {
      ctx.add(where, (pointer.empty() ? std::string("/") : pointer) + " is " + type_name(*node) + ", cannot set \"" + k + "\" inside it");
      return "";
    }
    pointer += "/" + k;
    if (last) {
      if (parts.size() == 2 && parts[0] == "parallelism")
        for (const auto& sib : alias_siblings(k)) node->erase(sib);  // --set tp=4 replaces tensor_parallel_degree
      (*node)[k] = value;
      return pointer;
    }
    if (!node->contains(k)) (*node)[k] = json::object();
    node = &(*node)[k];
  }
  return "";
}

}  // namespace monarch::scenario_io_detail

namespace monarch {

void gpu_as_object(nlohmann::json& scenario) {
  if (!scenario.is_object() || !scenario.contains("cluster") || !scenario["cluster"].is_object()) return;
  nlohmann::json& cluster = scenario["cluster"];
  if (cluster.contains("gpu") && cluster["gpu"].is_string())
    cluster["gpu"] = nlohmann::json{{"name", cluster["gpu"].get<std::string>()}};
}

}  // namespace monarch
