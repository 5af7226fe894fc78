// The scenario's `cluster` section: the GPU (preset or spec), nodes, links and topology.
#include "core/scenario_io_detail.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/cost_model.h"
#include "core/presets.h"
#include "core/units.h"

namespace monarch::scenario_io_detail {
namespace {

// `gpu.profile`: a relative path names a file beside the scenario (like model.hf_config). The
// profile is read here, so that a missing or malformed one is an input error at this path
// rather than a prediction silently made without it.
void read_profile_path(Ctx& ctx, const std::string& file, const std::string& where, const std::string& base_dir,
                       GpuSpec& gpu) {
  std::filesystem::path p(file);
  if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(p, ec);
  gpu.profile = (ec ? p : abs).lexically_normal().string();
  Expected<const CalibrationProfile*> prof = calibration_profile(gpu.profile);
  if (prof.ok()) return;
  ctx.add(where, "calibration profile \"" + file + "\": " + prof.problems().front().to_string());
}

// The board's TDP (a preset's, or `tdp_W`) and the power cap the cluster runs it at.
void read_power(Ctx& ctx, Obj& o, GpuSpec& gpu) {
  if (auto v = get_num(ctx, o, "tdp_W", 0, kMaxPower_W, true)) gpu.tdp_W = *v;
  auto limit = get_num(ctx, o, "power_limit_W", 0, kMaxPower_W, true);
  if (!limit) return;
  if (gpu.tdp_W <= 0) {
    ctx.add(o.at("power_limit_W"), "a power limit needs the board's TDP: add tdp_W (W) to a GPU that is not a preset");
    return;
  }
  if (*limit > gpu.tdp_W) {
    ctx.add(o.at("power_limit_W"), "found " + fmt_num(*limit) + ", expected at most the board's TDP of " + fmt_num(gpu.tdp_W) +
                                       " W (a limit caps the power below it)");
    return;
  }
  if (const double static_W = static_power_W(gpu.tdp_W); *limit <= static_W) {
    ctx.add(o.at("power_limit_W"), "found " + fmt_num(*limit) + ", expected more than the board's static draw of " +
                                       fmt_num(std::round(static_W * 10.0) / 10.0) + " W (the share of its " + fmt_num(gpu.tdp_W) +
                                       " W TDP that does not scale with the clock): the GPU cannot run below it");
    return;
  }
  gpu.power_limit_W = *limit;
}

void read_gpu(Ctx& ctx, const json* g, const std::string& where, const std::string& base_dir, GpuSpec& gpu,
              const GpuPreset** preset) {
  *preset = nullptr;
  if (!g) {
    ctx.add(where, "missing, expected a GPU preset (" + join(gpu_preset_names()) + ") or an object");
    return;
  }
  if (g->is_string()) {
    const std::string name = g->get<std::string>();
    if (const GpuPreset* p = find_gpu_preset(name)) {
      gpu = p->spec;
      *preset = p;
    } else {
      std::string near = closest_name(name, gpu_preset_names());
      ctx.add(where, "found \"" + name + "\", expected a GPU preset: " + join(gpu_preset_names()) +
                         (near.empty() ? " or an object {name, peak_tflops, memory_gib, memory_bandwidth_GBps}"
                                       : " (did you mean \"" + near + "\"?)"));
    }
    return;
  }
  if (!g->is_object()) {
    ctx.found(where, *g, "a GPU preset name or an object {name, peak_tflops, memory_gib, memory_bandwidth_GBps}");
    return;
  }
  Obj o(ctx, g, where, {"name", "peak_tflops", "memory_gib", "memory_bandwidth_GBps", "profile", "tdp_W", "power_limit_W"});
  auto name = get_str(ctx, o, "name");
  if (!name) {
    if (!o.has("name")) ctx.add(o.at("name"), "missing, expected a string");
  } else if (const GpuPreset* p = find_gpu_preset(*name)) {
    gpu = p->spec;  // explicit keys below override the preset's figures
    *preset = p;
  } else {
    gpu.name = *name;
  }
  const bool custom = *preset == nullptr;
  if (const json* pt = section(ctx, o.get("peak_tflops"), o.at("peak_tflops"))) {
    Obj po(ctx, pt, o.at("peak_tflops"), {"fp32", "tf32", "bf16", "fp16", "fp8"});
    double* fields[] = {&gpu.peak_tflops.fp32, &gpu.peak_tflops.tf32, &gpu.peak_tflops.bf16, &gpu.peak_tflops.fp16,
                        &gpu.peak_tflops.fp8};
    const char* names[] = {"fp32", "tf32", "bf16", "fp16", "fp8"};
    for (int i = 0; i < 5; ++i)
      if (auto v = get_num(ctx, po, names[i], 0, kMaxPeakTflops, false)) *fields[i] = *v;
    po.finish();
  } else if (custom && !o.has("peak_tflops")) {
    ctx.add(o.at("peak_tflops"), "missing, expected an object {fp32, tf32, bf16, fp16, fp8} in TFLOP/s (dense)");
  }
  if (auto v = get_num(ctx, o, "memory_gib", 0, kMaxMemoryGib, true)) gpu.memory_gib = *v;
  else if (custom && !o.has("memory_gib")) ctx.add(o.at("memory_gib"), "missing, expected a number > 0 (HBM capacity, GiB)");
  if (auto v = get_num(ctx, o, "memory_bandwidth_GBps", 0, kMaxBandwidth_GBps, true)) gpu.memory_bandwidth_GBps = *v;
  else if (custom && !o.has("memory_bandwidth_GBps"))
    ctx.add(o.at("memory_bandwidth_GBps"), "missing, expected a number > 0 (HBM bandwidth, GB/s)");
  if (auto v = get_str(ctx, o, "profile")) read_profile_path(ctx, *v, o.at("profile"), base_dir, gpu);
  read_power(ctx, o, gpu);
  o.finish();
}

}  // namespace

void read_cluster(Ctx& ctx, const json* cj, const std::string& base_dir, ClusterConfig& c, bool& nodes_ok) {
  nodes_ok = false;
  if (!cj) {
    ctx.add("/cluster", "missing, expected an object {gpu, num_gpus, gpus_per_node, intra_node, inter_node}");
    return;
  }
  Obj o(ctx, cj, "/cluster", {"gpu", "num_gpus", "gpus_per_node", "intra_node", "inter_node"});
  const GpuPreset* preset = nullptr;
  read_gpu(ctx, o.get("gpu"), o.at("gpu"), base_dir, c.gpu, &preset);
  const bool gpu_ok = preset != nullptr || (o.get("gpu") && o.get("gpu")->is_object());
  auto n = get_int(ctx, o, "num_gpus", 1, kMaxNumGpus);
  if (n) c.num_gpus = *n;
  else if (!o.has("num_gpus")) ctx.add(o.at("num_gpus"), "missing, expected a positive integer <= " + fmt_int(kMaxNumGpus));
  auto per = get_int(ctx, o, "gpus_per_node", 1, kMaxGpusPerNode);
  if (per) c.gpus_per_node = *per;
  else if (!o.has("gpus_per_node")) {
    if (preset) c.gpus_per_node = preset->default_gpus_per_node;
    else if (gpu_ok) ctx.add(o.at("gpus_per_node"), "missing, expected a positive integer (no default for a custom GPU)");
  }
  // num_gpus need not fill the last node (a 128-GPU job on GB200 NVL72 takes one 72-GPU
  // NVLink domain and 56 GPUs of a second).
  if (c.num_gpus > 0 && c.gpus_per_node > 0) nodes_ok = true;
  // Links: presets give defaults; a custom GPU needs them written out.
  const bool multi_node = c.num_gpus > c.gpus_per_node && c.gpus_per_node > 0;
  if (preset) {
    c.intra_node = preset->default_intra_node;
    c.inter_node = preset->default_inter_node;
    c.nics_per_node = std::min(preset->default_nics_per_node, std::max<int64_t>(c.gpus_per_node, 1));
  } else {
    c.nics_per_node = std::max<int64_t>(c.gpus_per_node, 0);
  }
  if (const json* ij = section(ctx, o.get("intra_node"), o.at("intra_node"))) {
    Obj io(ctx, ij, o.at("intra_node"), {"bandwidth_GBps", "latency_us"});
    if (auto v = get_num(ctx, io, "bandwidth_GBps", 0, kMaxBandwidth_GBps, true)) c.intra_node.bandwidth_GBps = *v;
    else if (!io.has("bandwidth_GBps") && !preset && gpu_ok)
      ctx.add(io.at("bandwidth_GBps"), "missing, expected a number > 0 (per GPU, per direction; no default for a custom GPU)");
    if (auto v = get_num(ctx, io, "latency_us", 0, kMaxLatency_us, false)) c.intra_node.latency_us = *v;
    io.finish();
  } else if (!o.has("intra_node") && !preset && gpu_ok && c.gpus_per_node > 1) {
    ctx.add(o.at("intra_node"), "missing, expected {bandwidth_GBps, latency_us} (no default for a custom GPU)");
  }
  if (const json* ej = section(ctx, o.get("inter_node"), o.at("inter_node"))) {
    Obj eo(ctx, ej, o.at("inter_node"), {"bandwidth_GBps", "nics_per_node", "latency_us", "topology", "oversubscription"});
    if (auto v = get_num(ctx, eo, "bandwidth_GBps", 0, kMaxBandwidth_GBps, true)) c.inter_node.bandwidth_GBps = *v;
    else if (!eo.has("bandwidth_GBps") && !preset && gpu_ok && multi_node)
      ctx.add(eo.at("bandwidth_GBps"), "missing, expected a number > 0 (per NIC, per direction; no default for a custom GPU)");
    if (auto v = get_int(ctx, eo, "nics_per_node", 1, kMaxGpusPerNode)) c.nics_per_node = *v;
    if (auto v = get_num(ctx, eo, "latency_us", 0, kMaxLatency_us, false)) c.inter_node.latency_us = *v;
    if (auto v = get_enum(ctx, eo, "topology", kTopologies)) c.topology = *v;
    if (auto v = get_num(ctx, eo, "oversubscription", 1, kMaxOversubscription, false)) c.oversubscription = *v;
    eo.finish();
  } else if (!o.has("inter_node") && !preset && gpu_ok && multi_node) {
    ctx.add(o.at("inter_node"), "missing, expected {bandwidth_GBps, nics_per_node, latency_us, topology} (no default for a custom GPU)");
  }
  o.finish();
}

}  // namespace monarch::scenario_io_detail
