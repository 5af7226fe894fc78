#include "core/framework_io.h"

#include <toml++/toml.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "core/presets.h"
#include "core/scenario_io.h"

namespace monarch {
namespace {

using nlohmann::json;

// A config file is at most this big; launch scripts and job configs are a few KiB.
constexpr int64_t kMaxConfigFileBytes = int64_t{4} << 20;  // 4 MiB

std::string place(const std::string& path, int64_t line) { return path + ":" + std::to_string(line); }

// ----------------------------------------------------------------------------- TOML

json toml_to_json(const toml::node& n) {
  if (auto t = n.as_table()) {
    json o = json::object();
    for (auto&& [k, v] : *t) o[std::string(k.str())] = toml_to_json(v);
    return o;
  }
  if (auto a = n.as_array()) {
    json o = json::array();
    for (auto&& v : *a) o.push_back(toml_to_json(v));
    return o;
  }
  if (auto v = n.value<int64_t>(); v && n.is_integer()) return *v;
  if (n.is_floating_point()) return *n.value<double>();
  if (n.is_boolean()) return *n.value<bool>();
  if (n.is_string()) return *n.value<std::string>();
  std::ostringstream o;  // dates and times: their TOML text
  n.visit([&](auto&& x) { o << x; });
  return o.str();
}

void toml_settings(const toml::table& t, const std::string& prefix, const std::string& path, std::vector<Setting>& out) {
  for (auto&& [k, v] : t) {
    const std::string key = prefix + std::string(k.str());
    if (auto sub = v.as_table()) {
      toml_settings(*sub, key + ".", path, out);
      continue;
    }
    const json value = toml_to_json(v);
    out.push_back({key, value.is_string() ? value.get<std::string>() : value.dump(), place(path, v.source().begin.line)});
  }
}

Expected<std::vector<Setting>> read_toml(const std::string& path, const std::string& text) {
  try {
    toml::table t = toml::parse(text, path);
    std::vector<Setting> out;
    toml_settings(t, "", path, out);
    return out;
  } catch (const toml::parse_error& e) {
    return Expected<std::vector<Setting>>::fail(
        path + ":" + std::to_string(e.source().begin.line) + ":" + std::to_string(e.source().begin.column),
        "not valid TOML: " + std::string(e.description()));
  }
}

// ----------------------------------------------------------------------------- shell words

struct Word {
  std::string text;
  int64_t line = 0;
};

// The words of a shell script as a POSIX shell splits them: blanks and newlines separate,
// quotes group, backslash-newline joins lines, "#" at the start of a word comments to the end
// of the line. Each word keeps the line it starts on.
Expected<std::vector<Word>> shell_words(const std::string& path, const std::string& text) {
  std::vector<Word> out;
  std::string cur;
  bool in_word = false;
  int64_t line = 1, word_line = 1;
  auto flush = [&] {
    if (in_word) out.push_back({cur, word_line});
    cur.clear();
    in_word = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      flush();
      ++line;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == ';' || c == '(' || c == ')') {
      flush();
    } else if (c == '#' && !in_word) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      ++i;
      ++line;
    } else if (c == '\'' || c == '"') {
      if (!in_word) word_line = line;
      in_word = true;
      const int64_t start = line;
      size_t j = i + 1;
      for (; j < text.size() && text[j] != c; ++j) {
        if (c == '"' && text[j] == '\\' && j + 1 < text.size()) ++j;
        if (text[j] == '\n') ++line;
        cur += text[j];
      }
      if (j >= text.size())
        return Expected<std::vector<Word>>::fail(place(path, start), std::string("the quote ") + c + " is never closed");
      i = j;
    } else {
      if (!in_word) word_line = line;
      in_word = true;
      cur += c;
    }
  }
  flush();
  return out;
}

bool is_flag(const std::string& w) { return w.size() > 2 && w[0] == '-' && w[1] == '-'; }

// "--flag value", "--flag=value" and bare "--flag" words; a value is the next word on the same
// line that is not itself a flag.
std::vector<Setting> flag_settings(const std::string& path, const std::vector<Word>& words) {
  std::vector<Setting> out;
  for (size_t i = 0; i < words.size(); ++i) {
    const Word& w = words[i];
    if (!is_flag(w.text)) continue;
    const auto eq = w.text.find('=');
    if (eq != std::string::npos) {
      out.push_back({w.text.substr(0, eq), w.text.substr(eq + 1), place(path, w.line)});
    } else if (i + 1 < words.size() && words[i + 1].line == w.line && !is_flag(words[i + 1].text) &&
               words[i + 1].text.find('=') == std::string::npos) {
      out.push_back({w.text, words[i + 1].text, place(path, w.line)});
      ++i;
    } else {
      out.push_back({w.text, "", place(path, w.line)});
    }
  }
  return out;
}

const std::regex& override_pattern() {
  static const std::regex re(R"(^([a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*)=(.*)$)");
  return re;
}

// ConfigContainer sections a run_recipe.py override may name (megatron/bridge/training/config.py).
bool is_bridge_section(const std::string& key) {
  static const char* kSections[] = {"model", "train", "ddp", "comm_overlap", "mixed_precision", "dataset", "optimizer",
                                    "scheduler", "checkpoint", "logger", "tokenizer", "rng", "dist", "profiling",
                                    "validation", "peft", "ft", "straggler"};
  const std::string head = key.substr(0, key.find('.'));
  for (const char* s : kSections)
    if (head == s) return true;
  return false;
}

std::vector<Setting> override_settings(const std::string& path, const std::vector<Word>& words) {
  std::vector<Setting> out;
  std::vector<Word> flags;
  for (const Word& w : words) {
    std::smatch m;
    if (std::regex_match(w.text, m, override_pattern()) && is_bridge_section(m[1].str()))
      out.push_back({m[1].str(), m[3].str(), place(path, w.line)});
    else if (is_flag(w.text))
      flags.push_back(w);
  }
  for (auto& s : flag_settings(path, flags)) out.push_back(std::move(s));  // run_recipe.py's own options
  return out;
}

// ----------------------------------------------------------------------------- DeepSpeed

void json_settings(const json& j, const std::string& key, const std::string& pointer, const std::string& path,
                   std::vector<Setting>& out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      json_settings(it.value(), key.empty() ? it.key() : key + "." + it.key(), pointer + "/" + it.key(), path, out);
    return;
  }
  out.push_back({key, j.is_string() ? j.get<std::string>() : j.dump(), path + ":" + pointer});
}

// A here-document holding a JSON object (cat > ds_config.json <<'EOF' ... EOF): its text and
// the line it starts on, and the script with those lines blanked.
struct HereDoc {
  std::string json_text;
  int64_t first_line = 0;
  std::string rest;
};

std::optional<HereDoc> json_here_document(const std::string& text) {
  static const std::regex start(R"(<<-?\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?)");
  std::istringstream in(text);
  std::string line, delimiter;
  HereDoc doc;
  int64_t n = 0;
  bool inside = false, found = false;
  while (std::getline(in, line)) {
    ++n;
    if (inside) {
      if (line == delimiter) {
        inside = false;
      } else {
        doc.json_text += line + "\n";
      }
      doc.rest += "\n";
      continue;
    }
    std::smatch m;
    if (!found && std::regex_search(line, m, start)) {
      delimiter = m[1].str();
      inside = found = true;
      doc.first_line = n + 1;
    }
    doc.rest += line + "\n";
  }
  if (!found) return std::nullopt;
  return doc;
}

Expected<std::vector<Setting>> read_deepspeed(const std::string& path, const std::string& text) {
  std::vector<Setting> out;
  std::string json_text = text, json_name = path, script;
  const size_t first = text.find_first_not_of(" \t\r\n");
  const bool plain_json = first != std::string::npos && text[first] == '{';
  if (!plain_json) {
    auto doc = json_here_document(text);
    script = doc ? doc->rest : text;
    json_text = doc ? doc->json_text : "";
    if (doc) json_name = path + ":" + std::to_string(doc->first_line) + " (here-document)";
  }
  if (!json_text.empty()) {
    auto j = parse_json_text(json_text, json_name);
    if (!j) return j.problems();
    if (!j->is_object()) return Expected<std::vector<Setting>>::fail(json_name, "expected a DeepSpeed config object {...}");
    std::vector<Setting> js;
    json_settings(*j, "", "", plain_json ? path : json_name, js);
    if (!script.empty()) {
      auto words = shell_words(path, script);
      if (!words) return words.problems();
      out = flag_settings(path, *words);
    }
    out.insert(out.end(), js.begin(), js.end());  // the JSON last: its values win
    return out;
  }
  auto words = shell_words(path, script);
  if (!words) return words.problems();
  return flag_settings(path, *words);
}

Expected<std::string> read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Expected<std::string>::fail(path, "cannot be read (no such file, or no permission)");
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  if (size > kMaxConfigFileBytes)
    return Expected<std::string>::fail(path, "is " + std::to_string(size) + " bytes, expected a config of at most " +
                                                 std::to_string(kMaxConfigFileBytes));
  f.seekg(0);
  std::ostringstream o;
  o << f.rdbuf();
  return o.str();
}

std::string stem(const std::string& path) {
  std::string s = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  return s.substr(0, s.find('.'));
}

// The cluster object from --cluster or from --gpu / --num-gpus / --gpus-per-node.
Expected<json> cluster_json(const ImportOptions& o) {
  if (!o.cluster_path.empty()) {
    auto text = read_text(o.cluster_path);
    if (!text) return text.problems();
    auto j = parse_json_text(*text, o.cluster_path);
    if (!j) return j.problems();
    json c = j->is_object() && j->contains("cluster") ? (*j)["cluster"] : *j;
    if (!c.is_object()) return Expected<json>::fail(o.cluster_path, "expected a scenario or a cluster object");
    if (o.num_gpus > 0) c["num_gpus"] = o.num_gpus;
    return c;
  }
  if (o.num_gpus <= 0)
    return Expected<json>::fail("--num-gpus", "missing: the config does not say how many GPUs run it; give --num-gpus N "
                                              "(with --gpu NAME, default H100-SXM) or --cluster FILE");
  json c = {{"gpu", o.gpu}, {"num_gpus", o.num_gpus}};
  if (o.gpus_per_node > 0) c["gpus_per_node"] = o.gpus_per_node;
  return c;
}

// scenario_from_json names the override an error came from ("(set by --set PATH=VALUE)"):
// name the config's place instead.
void name_places(Problems& problems, const ImportedConfig& imported) {
  for (auto& p : problems)
    for (size_t i = 0; i < imported.assignments.size(); ++i) {
      const std::string tag = " (set by --set " + imported.assignments[i] + ")";
      const auto at = p.message.find(tag);
      if (at == std::string::npos) continue;
      const std::string& from = imported.assignment_places[i];
      p.message.replace(at, tag.size(), from.empty() ? " (implied by the config)" : " (from " + from + ")");
    }
}

// torchrun's --nnodes and --nproc-per-node (either spelling) in a launch script size the cluster
// when no option does: nnodes x nproc-per-node GPUs, nproc-per-node of them per node. They are
// the launcher's, not the framework's, so they leave the settings either way; a different
// --num-gpus wins and is reported, as is a size that is not a number (an elastic "1:4", "$N").
void take_launcher_sizes(std::vector<Setting>& settings, ImportOptions& options, std::vector<std::string>& left_out) {
  const Setting* nnodes = nullptr;
  const Setting* nproc = nullptr;
  for (const Setting& s : settings) {
    if (s.key == "--nnodes") nnodes = &s;
    if (s.key == "--nproc-per-node" || s.key == "--nproc_per_node") nproc = &s;
  }
  auto count = [](const Setting* s) -> int64_t {
    if (!s || s->value.empty() || s->value.size() > 9 ||
        s->value.find_first_not_of("0123456789") != std::string::npos)
      return 0;
    return std::stoll(s->value);
  };
  const int64_t nodes = nnodes ? count(nnodes) : 1, per_node = count(nproc);
  std::vector<Setting> kept;
  for (const Setting& s : settings) {
    if (&s != nnodes && &s != nproc) continue;
    if (per_node <= 0 || nodes <= 0)
      left_out.push_back(s.where + ": " + s.key + ": not a fixed GPU count (" + s.value + "); give --num-gpus");
    else if (options.num_gpus > 0 && options.num_gpus != nodes * per_node)
      left_out.push_back(s.where + ": " + s.key + ": torchrun starts " + std::to_string(nodes * per_node) +
                         " GPUs; --num-gpus " + std::to_string(options.num_gpus) + " is used");
  }
  if (per_node > 0 && nodes > 0 && options.num_gpus <= 0 && options.cluster_path.empty()) {
    options.num_gpus = nodes * per_node;
    if (options.gpus_per_node <= 0) options.gpus_per_node = per_node;
  }
  for (const Setting& s : settings)
    if (&s != nnodes && &s != nproc) kept.push_back(s);
  settings = std::move(kept);
}

}  // namespace

ConfigFormat guess_config_format(const std::string& path, const std::string& text) {
  auto ends = [&](const char* ext) {
    const std::string e = ext;
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".toml")) return ConfigFormat::kTorchtitan;
  if (ends(".json") || text.find("--deepspeed_config") != std::string::npos ||
      text.find("--deepspeed ") != std::string::npos)
    return ConfigFormat::kDeepspeed;
  std::istringstream in(text);
  std::string line;
  static const std::regex bridge(R"((^|\s)(model|train|ddp|comm_overlap)\.[a-z_]+=)");
  while (std::getline(in, line))
    if (std::regex_search(line, bridge)) return ConfigFormat::kMegatronBridge;
  return ConfigFormat::kMegatron;
}

Expected<std::vector<Setting>> read_framework_settings(const std::string& path, const std::string& text,
                                                       ConfigFormat format) {
  switch (format) {
    case ConfigFormat::kTorchtitan: return read_toml(path, text);
    case ConfigFormat::kDeepspeed: return read_deepspeed(path, text);
    case ConfigFormat::kMegatron:
    case ConfigFormat::kMegatronBridge: {
      auto words = shell_words(path, text);
      if (!words) return words.problems();
      return format == ConfigFormat::kMegatron ? flag_settings(path, *words) : override_settings(path, *words);
    }
  }
  return std::vector<Setting>{};
}

Expected<ImportResult> import_framework_config(const std::string& path, const ImportOptions& options) {
  auto text = read_text(path);
  if (!text) return text.problems();
  ImportResult result;
  result.format = options.format.value_or(guess_config_format(path, *text));
  auto settings = read_framework_settings(path, *text, result.format);
  if (!settings) return settings.problems();
  ImportOptions sized = options;
  std::vector<std::string> launcher_left_out;
  take_launcher_sizes(*settings, sized, launcher_left_out);
  auto cluster = cluster_json(sized);
  if (!cluster) return cluster.problems();

  int64_t num_layers = 0;
  std::vector<std::string> model_assignments;
  if (!options.model.empty()) {
    if (const ModelPreset* p = find_model_preset(options.model)) {
      model_assignments.push_back("model.preset=" + json(p->name).dump());
      num_layers = p->config.num_layers;
    } else if (options.model.find(".json") != std::string::npos) {
      model_assignments.push_back("model.hf_config=" + json(options.model).dump());
      // The layer count torchtitan's stage split needs (the full config is read and checked by
      // scenario_from_json below).
      if (auto text = read_text(options.model)) {
        auto hf = parse_json_text(*text, options.model);
        if (hf && hf->is_object()) {
          const json& n = hf->contains("num_hidden_layers") ? (*hf)["num_hidden_layers"] : (*hf)["n_layer"];
          if (n.is_number_integer()) num_layers = n.get<int64_t>();
        }
      }
    } else {
      return Expected<ImportResult>::fail("--model", "found \"" + options.model + "\", expected a model preset (" +
                                                         [] {
                                                           std::string s;
                                                           for (const auto& n : model_preset_names()) s += (s.empty() ? "" : ", ") + n;
                                                           return s;
                                                         }() + ") or a Hugging Face config.json");
    }
  }
  const int64_t num_gpus = cluster->value("num_gpus", int64_t{0});
  ImportedConfig imported = import_settings(result.format, *settings, num_gpus, num_layers);
  if (!imported.problems.empty()) return imported.problems;
  imported.left_out.insert(imported.left_out.begin(), launcher_left_out.begin(), launcher_left_out.end());
  // --model comes after the config's own model settings, so it names the model; the config's
  // sequence length and shape flags still apply on top of a preset.
  std::vector<std::string> assignments = model_assignments;
  std::vector<std::string> places(model_assignments.size(), "--model");
  for (size_t i = 0; i < imported.assignments.size(); ++i) {
    const std::string& a = imported.assignments[i];
    if (!model_assignments.empty() && a.rfind("model.preset=", 0) == 0) continue;  // --model wins
    assignments.push_back(a);
    places.push_back(imported.assignment_places[i]);
  }
  imported.assignments = assignments;
  imported.assignment_places = places;

  std::string description = "Imported by monarch-sim from " + path + " (" + to_string(result.format) + ").";
  if (!imported.left_out.empty()) {
    description += " Left out:";
    for (const auto& l : imported.left_out) description += " " + l + ";";
    description.back() = '.';
  }
  json doc = {{"name", options.name.empty() ? stem(path) : options.name},
              {"description", description},
              {"model", json::object()},
              {"cluster", *cluster},
              {"training", json::object()},
              {"parallelism", json::object()}};
  auto scenario = scenario_from_json(doc, ".",
                                     imported.assignments);
  if (!scenario) {
    Problems problems = scenario.problems();
    name_places(problems, imported);
    return problems;
  }
  // torchtitan's MoE routes every token (token choice with no capacity factor:
  // torchtitan/models/moe/moe.py), whatever model config named the experts.
  if (result.format == ConfigFormat::kTorchtitan && scenario->model.is_moe()) scenario->model.moe_dropless = true;
  result.scenario = scenario_to_json(*scenario);
  result.scenario["description"] = description;
  result.left_out = std::move(imported.left_out);
  return result;
}

}  // namespace monarch
