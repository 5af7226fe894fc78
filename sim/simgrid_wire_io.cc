#include "sim/simgrid_wire_io.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/result_io.h"

namespace monarch::simgrid_backend {
namespace {
using nlohmann::json;

// The plan travels in the result file's form (core/result_io.h), read back strictly.
Plan plan_from(const json& j) {
  auto p = plan_from_json(j, "/plan");
  if (!p) throw std::runtime_error(p.problems().front().to_string());
  return std::move(p).value();
}

json result_json(const BackendResult& r) {
  json j;
  j["backend"] = r.backend;
  j["plan"] = plan_to_json(r.plan);
  j["scalars"] = {r.iteration_time_s, r.tokens_per_s, r.model_tflops_per_gpu, r.hardware_tflops_per_gpu,
                  r.mfu, r.hfu, r.model_flops_per_iteration, r.hardware_flops_per_iteration};
  const auto& m = r.memory;
  j["memory"] = {{"fits", m.fits}, {"peak", m.peak_gib}, {"capacity", m.capacity_gib}, {"stages", json::array()}};
  for (const auto& s : m.stages)
    j["memory"]["stages"].push_back({s.stage, s.weights_gib, s.gradients_gib, s.optimizer_gib, s.activations_gib,
                                     s.buffers_gib, s.total_gib, s.layers});
  const auto& b = r.time_breakdown_s;
  j["breakdown"] = {b.compute, b.tp_comm, b.cp_comm, b.pp_comm, b.dp_comm, b.ep_comm, b.bubble, b.optimizer, b.exposed_comm, b.host};
  j["comm"] = json::array();
  for (const auto& c : r.communication)
    j["comm"].push_back({static_cast<int>(c.kind), c.group ? static_cast<int>(*c.group) : -1, c.bytes, c.count, c.time_s,
                         c.group_size, c.group_label});
  // Streams and categories are few: index them.
  std::vector<std::string> strings;
  auto intern = [&](const std::string& s) {
    for (size_t i = 0; i < strings.size(); ++i)
      if (strings[i] == s) return static_cast<int64_t>(i);
    strings.push_back(s);
    return static_cast<int64_t>(strings.size() - 1);
  };
  j["spans"] = json::array();
  for (const auto& s : r.timeline)
    j["spans"].push_back({s.rank, intern(s.stream), s.name, intern(s.category), s.start_s, s.end_s, s.peer, s.flow_id});
  j["strings"] = strings;
  j["mem"] = json::array();
  for (const auto& s : r.memory_timeline) j["mem"].push_back({s.rank, s.time_s, s.allocated_bytes});
  if (r.failure) j["failure"] = failure_to_json(*r.failure);
  return j;
}

BackendResult result_from(const json& j) {
  BackendResult r;
  r.backend = j.at("backend");
  r.plan = plan_from(j.at("plan"));
  const auto& s = j.at("scalars");
  r.iteration_time_s = s.at(0);
  r.tokens_per_s = s.at(1);
  r.model_tflops_per_gpu = s.at(2);
  r.hardware_tflops_per_gpu = s.at(3);
  r.mfu = s.at(4);
  r.hfu = s.at(5);
  r.model_flops_per_iteration = s.at(6);
  r.hardware_flops_per_iteration = s.at(7);
  const auto& m = j.at("memory");
  r.memory.fits = m.at("fits");
  r.memory.peak_gib = m.at("peak");
  r.memory.capacity_gib = m.at("capacity");
  for (const auto& st : m.at("stages"))
    r.memory.stages.push_back({st.at(0), st.at(1), st.at(2), st.at(3), st.at(4), st.at(5), st.at(6), st.at(7)});
  const auto& b = j.at("breakdown");
  r.time_breakdown_s = {b.at(0), b.at(1), b.at(2), b.at(3), b.at(4), b.at(5), b.at(6), b.at(7), b.at(8), b.at(9)};
  for (const auto& c : j.at("comm")) {
    CommEntry e{static_cast<CollectiveKind>(c.at(0).get<int>()), std::nullopt, c.at(2), c.at(3), c.at(4), c.at(5), c.at(6)};
    if (const int g = c.at(1).get<int>(); g >= 0) e.group = static_cast<GroupKind>(g);
    r.communication.push_back(std::move(e));
  }
  const auto strings = j.at("strings").get<std::vector<std::string>>();
  for (const auto& sp : j.at("spans")) {
    TimelineSpan t;
    t.rank = sp.at(0);
    t.stream = strings.at(sp.at(1).get<size_t>());
    t.name = sp.at(2);
    t.category = strings.at(sp.at(3).get<size_t>());
    t.start_s = sp.at(4);
    t.end_s = sp.at(5);
    t.peer = sp.at(6);
    t.flow_id = sp.at(7);
    r.timeline.push_back(std::move(t));
  }
  for (const auto& ms : j.at("mem")) r.memory_timeline.push_back({ms.at(0), ms.at(1), ms.at(2)});
  if (j.contains("failure")) {
    auto f = failure_from_json(j.at("failure"), "failure");
    if (!f) throw std::runtime_error("failure: " + f.problems().front().to_string());
    r.failure = std::move(f).value();
  }
  return r;
}

}  // namespace

std::string encode_results(const Expected<std::vector<BackendResult>>& results, const SimgridStats& stats) {
  json j;
  j["stats"] = {stats.ranks_simulated, stats.tasks_run, stats.collectives_run, stats.flows, stats.solver_steps, stats.per_step_jobs,
                stats.coarse_collectives};
  if (!results) {
    j["problems"] = json::array();
    for (const auto& p : results.problems()) j["problems"].push_back({p.where, p.message});
  } else {
    j["results"] = json::array();
    for (const auto& r : *results) j["results"].push_back(result_json(r));
  }
  return j.dump();
}

Expected<std::vector<BackendResult>> decode_results(const std::string& text, SimgridStats* stats) {
  try {
    const json j = json::parse(text);
    if (stats) {
      const json& c = j.at("stats");
      *stats = SimgridStats{c.at(0), c.at(1), c.at(2), c.at(3), c.at(4), c.at(5), c.at(6)};
    }
    if (j.contains("problems")) {
      Problems ps;
      for (const auto& p : j.at("problems")) ps.push_back({p.at(0), p.at(1)});
      return ps;
    }
    std::vector<BackendResult> out;
    for (const auto& r : j.at("results")) out.push_back(result_from(r));
    return out;
  } catch (const std::exception& e) {  // json::exception, a plan plan_from_json refuses, or an unreadable failure section
    return Expected<std::vector<BackendResult>>::fail("simgrid", std::string("unreadable result from the simulation process: ") + e.what());
  }
}

}  // namespace monarch::simgrid_backend
