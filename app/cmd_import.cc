// monarch-sim import FILE [--format F] [--output scenario.json] [cluster options]: a framework
// config as a scenario with the plan fixed as the config fixes it (core/framework_io.h).
#include <iostream>

#include "app/commands.h"
#include "core/framework_io.h"
#include "core/text_file.h"

namespace monarch::app {

int cmd_import(const ImportCliOptions& opts) {
  ImportOptions o;
  if (!opts.format.empty()) {
    ConfigFormat f;
    if (!parse_config_format(opts.format, &f)) {
      print_error("--format", "found \"" + opts.format + "\", expected one of " + kConfigFormatNames);
      return kExitInvalid;
    }
    o.format = f;
  }
  o.name = opts.name;
  o.model = opts.model;
  o.cluster_path = opts.cluster_path;
  if (!opts.gpu.empty()) o.gpu = opts.gpu;
  o.num_gpus = opts.num_gpus;
  o.gpus_per_node = opts.gpus_per_node;
  auto result = import_framework_config(opts.config_path, o);
  if (!result) {
    for (const auto& p : result.problems()) print_error(p.where, p.message);
    return kExitInvalid;
  }
  for (const auto& l : result->left_out) std::cerr << "monarch-sim: left out: " << l << "\n";
  const std::string text = result->scenario.dump(2) + "\n";
  if (opts.output_path.empty()) {
    std::cout << text;
    return kExitOk;
  }
  if (std::string e = write_text_file_atomically(opts.output_path, text); !e.empty()) {
    print_error(opts.output_path, e);
    return kExitInvalid;
  }
  return kExitOk;
}

}  // namespace monarch::app
