// The scenario's `reliability` section (failure rates, checkpoints, storage, restart), read and
// written back.
#include "core/scenario_io_detail.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "core/dlrm_model.h"
#include "core/model_math.h"
#include "core/presets.h"
#include "core/units.h"

namespace monarch::scenario_io_detail {

void read_failure_rates(Ctx& ctx, Obj& o, int64_t gpus_per_node, ReliabilityConfig& r) {
  const json* v = o.get("failure_rates");
  if (!v) return;
  const std::string at = o.at("failure_rates");
  if (!v->is_array() || static_cast<int64_t>(v->size()) > kMaxWhatIfEntries) {
    ctx.found(at, *v, "an array of {name, component, per_day_per_1k_gpus | mtbf_hours with per}");
    return;
  }
  static const std::vector<std::string> kComponents = {"gpu", "hbm", "host", "nic", "switch", "software", "storage", "other"};
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string ip = at + "/" + std::to_string(i);
    const json* e = section(ctx, &(*v)[i], ip);
    if (!e) continue;
    Obj co(ctx, e, ip, {"name", "component", "per_day_per_1k_gpus", "mtbf_hours", "per"});
    FailureCause c;
    if (auto n = get_str(ctx, co, "name")) c.name = *n;
    else if (!co.has("name")) ctx.add(co.at("name"), "missing, expected a name for the cause (\"faulty-gpu\")");
    if (auto comp = get_str(ctx, co, "component")) {
      if (std::find(kComponents.begin(), kComponents.end(), *comp) == kComponents.end())
        ctx.add(co.at("component"), "found \"" + *comp + "\", expected one of " + join(kComponents));
      c.component = *comp;
    } else if (!co.has("component")) {
      c.component = "other";
    }
    const bool rate = co.has("per_day_per_1k_gpus"), mtbf = co.has("mtbf_hours");
    if (rate == mtbf) {
      ctx.add(ip, "expected exactly one of \"per_day_per_1k_gpus\" (interruptions per day per 1,000 GPUs) or \"mtbf_hours\" (with \"per\": \"gpu\" or \"node\")");
    } else if (rate) {
      if (auto x = get_num(ctx, co, "per_day_per_1k_gpus", 0, kMaxFailureRate, false)) c.per_day_per_1k_gpus = *x;
      if (co.has("per")) ctx.add(co.at("per"), "\"per\" goes with \"mtbf_hours\", not with \"per_day_per_1k_gpus\"");
    } else {
      const std::optional<double> hours = get_num(ctx, co, "mtbf_hours", 0, kMaxMtbfHours, true);
      const std::optional<std::string> per = get_str(ctx, co, "per");
      if (!co.has("per"))
        ctx.add(co.at("per"), "missing, expected \"gpu\" or \"node\" (the unit whose mean time between failures is mtbf_hours)");
      else if (per && *per != "gpu" && *per != "node")
        ctx.add(co.at("per"), "found \"" + *per + "\", expected \"gpu\" or \"node\"");
      else if (hours && per)
        c.per_day_per_1k_gpus = rate_from_mtbf_per_day_per_1k_gpus(*hours, *per == "gpu" ? 1 : gpus_per_node);
    }
    co.finish();
    r.causes.push_back(std::move(c));
  }
}

// inject_failure {component: "host" | "link", node, at_s}: what the SimGrid backend switches off
// during the simulated iteration, and when.
void read_inject_failure(Ctx& ctx, Obj& o, const ClusterConfig& cluster, ReliabilityConfig& r) {
  const json* fj = section(ctx, o.get("inject_failure"), o.at("inject_failure"));
  if (!fj) return;
  Obj fo(ctx, fj, o.at("inject_failure"), {"component", "node", "at_s"});
  FailureInjection f;
  bool ok = true;
  if (auto c = get_str(ctx, fo, "component")) {
    if (*c != "host" && *c != "link") {
      ctx.add(fo.at("component"), "found \"" + *c + "\", expected \"host\" (the node's GPUs and NICs go down) or \"link\" (its NIC ports)");
      ok = false;
    }
    f.component = *c;
  } else {
    if (!fo.has("component")) ctx.add(fo.at("component"), "missing, expected \"host\" or \"link\"");
    ok = false;
  }
  const int64_t nodes = std::max<int64_t>(cluster.num_nodes(), 1);
  if (auto n = get_int(ctx, fo, "node", 0, nodes - 1, "a node index from 0 to " + std::to_string(nodes - 1))) {
    f.node = *n;
  } else {
    if (!fo.has("node")) ctx.add(fo.at("node"), "missing, expected the index of the node that fails (0 to " + std::to_string(nodes - 1) + ")");
    ok = false;
  }
  if (auto t = get_num(ctx, fo, "at_s", 0, kMaxIntervalS, false)) {
    f.at_s = *t;
  } else {
    if (!fo.has("at_s")) ctx.add(fo.at("at_s"), "missing, expected the seconds after the iteration's start at which it fails");
    ok = false;
  }
  fo.finish();
  if (ok) r.inject_failure = f;
}

void read_reliability(Ctx& ctx, const json* rj, Scenario& s) {
  if (!rj) return;
  Obj o(ctx, rj, "/reliability",
        {"preset", "failure_rates", "checkpoint", "storage", "detection_s", "reschedule_s", "startup_s", "recovery", "spares",
         "monte_carlo", "inject_failure"});
  ReliabilityConfig r;
  if (auto p = get_str(ctx, o, "preset")) {
    if (const FailurePreset* fp = find_failure_preset(*p)) {
      r.preset = fp->name;
      r.causes = fp->causes;
    } else {
      std::vector<std::string> names;
      for (const auto& x : failure_presets()) names.push_back(x.name);
      ctx.add(o.at("preset"), "found \"" + *p + "\", expected one of " + join(names));
    }
  }
  read_failure_rates(ctx, o, std::max<int64_t>(s.cluster.gpus_per_node, 1), r);
  if (!o.has("preset") && !o.has("failure_rates"))
    ctx.add("/reliability", "expected \"preset\" (a published fleet) or \"failure_rates\" (causes with their rates), or both");

  const json* cj = section(ctx, o.get("checkpoint"), o.at("checkpoint"));
  Obj co(ctx, cj, o.at("checkpoint"), {"interval_s", "async", "host_copy_GBps"});
  if (const json* iv = co.get("interval_s")) {
    if (iv->is_string() && iv->get<std::string>() != "optimal")
      ctx.found(co.at("interval_s"), *iv, "useful seconds between checkpoints (a number > 0) or \"optimal\"");
    else if (!iv->is_string())
      if (auto x = to_num(ctx, *iv, co.at("interval_s"), 0, kMaxIntervalS, true)) r.checkpoint_interval_s = *x;
  }
  if (auto a = get_bool(ctx, co, "async")) r.async_checkpoint = *a;
  if (auto h = get_num(ctx, co, "host_copy_GBps", 0, kMaxBandwidth_GBps, true)) r.host_copy_GBps = *h;
  else if (!co.has("host_copy_GBps")) r.host_copy_GBps = host_link_bytes_per_s(s.cluster.gpu) / kGB;
  co.finish();

  const json* sj = section(ctx, o.get("storage"), o.at("storage"));
  Obj so(ctx, sj, o.at("storage"), {"write_GBps", "read_GBps", "node_write_GBps", "node_read_GBps"});
  if (!sj && !o.has("storage")) ctx.add(o.at("storage"), "missing, expected {write_GBps, read_GBps} (aggregate checkpoint storage bandwidth)");
  for (auto [key, out, required] : {std::tuple{"write_GBps", &r.storage_write_GBps, true}, std::tuple{"read_GBps", &r.storage_read_GBps, true},
                                    std::tuple{"node_write_GBps", &r.node_write_GBps, false},
                                    std::tuple{"node_read_GBps", &r.node_read_GBps, false}}) {
    if (auto x = get_num(ctx, so, key, 0, kMaxBandwidth_GBps, true)) *out = *x;
    else if (sj && required && !so.has(key)) ctx.add(so.at(key), "missing, expected GB/s (1e9 bytes/s) over the whole job");
  }
  so.finish();

  if (auto x = get_num(ctx, o, "detection_s", 0, kMaxIntervalS, false)) r.detection_s = *x;
  else if (!o.has("detection_s")) r.detection_s = kDefaultDetection_s;
  for (auto [key, out, what] : {std::tuple{"reschedule_s", &r.reschedule_s, "seconds from detection to replacement nodes allocated"},
                                std::tuple{"startup_s", &r.startup_s, "seconds from program start to the first step"}}) {
    if (auto x = get_num(ctx, o, key, 0, kMaxIntervalS, false)) *out = *x;
    else if (!o.has(key)) ctx.add(o.at(key), std::string("missing, expected ") + what);
  }
  if (const json* v = o.get("recovery")) {
    if (auto m = to_enum(ctx, *v, o.at("recovery"), kRecoveryModes)) r.recovery = *m;
  }
  if (const json* pj = section(ctx, o.get("spares"), o.at("spares"))) {
    Obj po(ctx, pj, o.at("spares"), {"nodes", "repair_s"});
    if (auto n = get_int(ctx, po, "nodes", 0, kMaxSpareNodes)) r.spare_nodes = *n;
    else if (!po.has("nodes")) ctx.add(po.at("nodes"), "missing, expected the number of healthy spare nodes beside the job's");
    if (auto x = get_num(ctx, po, "repair_s", 0, kMaxIntervalS, true)) r.repair_s = *x;
    else if (!po.has("repair_s")) ctx.add(po.at("repair_s"), "missing, expected the seconds a failed node is out for repair");
    po.finish();
  }
  read_inject_failure(ctx, o, s.cluster, r);
  const json* mj = section(ctx, o.get("monte_carlo"), o.at("monte_carlo"));
  Obj mo(ctx, mj, o.at("monte_carlo"), {"trials", "seed"});
  r.trials = kDefaultMonteCarloTrials;
  r.seed = static_cast<uint64_t>(s.training.seed);
  if (auto t = get_int(ctx, mo, "trials", 1, kMaxMonteCarloTrials)) r.trials = *t;
  if (auto sd = get_int(ctx, mo, "seed", 0, std::numeric_limits<int64_t>::max(), "an integer >= 0")) r.seed = static_cast<uint64_t>(*sd);
  mo.finish();
  o.finish();
  if (s.model.architecture == Architecture::kDlrm)
    ctx.add("/reliability", "not modelled for dlrm models yet (checkpoint state of sharded embedding tables); expected no reliability block");
  s.reliability = std::move(r);
}

// The causes written one by one (the preset's with their source names), so that the block
// reads back the same whatever the preset list of a later version holds.
json reliability_to_json(const ReliabilityConfig& r) {
  json causes = json::array();
  for (const auto& c : r.causes)
    causes.push_back({{"name", c.name}, {"component", c.component}, {"per_day_per_1k_gpus", c.per_day_per_1k_gpus}});
  json ck = {{"async", r.async_checkpoint}, {"host_copy_GBps", r.host_copy_GBps}};
  ck["interval_s"] = r.checkpoint_interval_s ? json(*r.checkpoint_interval_s) : json("optimal");
  json st = {{"write_GBps", r.storage_write_GBps}, {"read_GBps", r.storage_read_GBps}};
  if (r.node_write_GBps > 0) st["node_write_GBps"] = r.node_write_GBps;
  if (r.node_read_GBps > 0) st["node_read_GBps"] = r.node_read_GBps;
  json out = {{"failure_rates", causes},
          {"checkpoint", ck},
          {"storage", st},
          {"detection_s", r.detection_s},
          {"reschedule_s", r.reschedule_s},
          {"startup_s", r.startup_s},
          {"recovery", to_string(r.recovery)},
          {"monte_carlo", {{"trials", r.trials}, {"seed", r.seed}}}};
  if (r.spare_nodes) out["spares"] = {{"nodes", *r.spare_nodes}, {"repair_s", r.repair_s}};
  if (r.inject_failure)
    out["inject_failure"] = {{"component", r.inject_failure->component}, {"node", r.inject_failure->node}, {"at_s", r.inject_failure->at_s}};
  return out;
}

}  // namespace monarch::scenario_io_detail
