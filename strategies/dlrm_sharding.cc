#include "strategies/dlrm_sharding.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <set>

#include "core/cost_model.h"
#include "core/model_math.h"
#include "core/placement.h"

namespace monarch {

namespace {

constexpr double kBytesPerGib = 1024.0 * 1024.0 * 1024.0;

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / kBytesPerGib);
  return buf;
}

// Per-GPU running totals while tables are placed.
struct State {
  std::vector<double> mem_bytes;      // tables + optimizer + dp grads + comm buffers
  std::vector<double> lookup_s;       // forward + backward TBE seconds
  std::vector<double> send_bytes;     // pooled all-to-all send buffer
  std::vector<double> id_bytes;       // input-dist all-to-all send buffer (ids)
  double rs_bytes = 0;                // row-wise reduce-scatter input
  double dp_grad_bytes = 0;           // data-parallel tables' gradients (all-reduced)
};

struct Planner {
  const Scenario& sc;
  int64_t n;
  GroupSpan world;
  double dense_mem_bytes;  // MLPs' weights, grads, optimizer, activations per GPU (estimate)
  double capacity_bytes;
  double dense_grad_bytes;  // MLP gradients all-reduced every step

  explicit Planner(const Scenario& s) : sc(s) {
    n = std::max<int64_t>(1, s.cluster.num_gpus);
    world = strided_span(0, n, 1, s.cluster.gpus_per_node > 0 ? s.cluster.gpus_per_node : n);
    // Memory of the dense part: the estimate of a plan with no tables.
    Scenario empty = s;
    empty.model.dlrm.tables.clear();
    const BackendResult r = estimate_dlrm(empty, DlrmShardingPlan{});
    dense_mem_bytes = r.memory.peak_gib * kBytesPerGib;
    capacity_bytes = usable_memory_gib(s.cluster.gpu) * kBytesPerGib;
    dense_grad_bytes = static_cast<double>(dlrm_dense_shape(s.model.dlrm).dense_params()) *
                       state_bytes_per_parameter(s.training.precision, s.training.optimizer).gradients;
  }

  // Loads of one table placed as `p`, on every GPU.
  std::vector<DlrmRankLoad> loads_of(size_t table, const TablePlacement& p) const {
    Scenario one = sc;
    one.model.dlrm.tables = {sc.model.dlrm.tables[table]};
    DlrmShardingPlan plan;
    plan.tables = {p};
    return dlrm_rank_loads(one, plan);
  }

  static double mem_of(const DlrmRankLoad& l) {
    return l.table_weight_bytes + l.table_optimizer_bytes + l.table_grad_bytes + 2.0 * l.a2a_send_bytes +
           2.0 * l.rw_reduce_scatter_bytes + 2.0 * l.id_send_bytes;
  }

  State add(const State& s, const std::vector<DlrmRankLoad>& loads) const {
    State t = s;
    for (int64_t r = 0; r < n; ++r) {
      t.mem_bytes[r] += mem_of(loads[r]);
      t.lookup_s[r] += dlrm_lookup_forward_s(sc, loads[r]) + dlrm_lookup_backward_s(sc, loads[r]);
      t.send_bytes[r] += loads[r].a2a_send_bytes;
      t.id_bytes[r] += loads[r].id_send_bytes;
    }
    t.rs_bytes += loads[0].rw_reduce_scatter_bytes;
    t.dp_grad_bytes += loads[0].table_grad_bytes;
    return t;
  }

  // Embedding-side seconds of the state: slowest lookups + ids and pooled all-to-alls
  // (forward and backward) + row-wise collectives + the all-reduce of data-parallel tables,
  // which rides with the MLP gradients (the state starts with those, so a small table's
  // marginal cost is its bandwidth, not another collective's latency).
  double cost_s(const State& s) const {
    const double lookup = *std::max_element(s.lookup_s.begin(), s.lookup_s.end());
    const auto send = static_cast<int64_t>(*std::max_element(s.send_bytes.begin(), s.send_bytes.end()));
    const auto ids = static_cast<int64_t>(*std::max_element(s.id_bytes.begin(), s.id_bytes.end()));
    const auto& c = sc.cluster;
    return lookup + 2.0 * collective_time_s(CollectiveKind::kAllToAll, send, world, c) +
           collective_time_s(CollectiveKind::kAllToAll, ids, world, c) +
           collective_time_s(CollectiveKind::kReduceScatter, static_cast<int64_t>(s.rs_bytes), world, c) +
           collective_time_s(CollectiveKind::kAllGather, static_cast<int64_t>(s.rs_bytes), world, c) +
           collective_time_s(CollectiveKind::kAllReduce, static_cast<int64_t>(s.dp_grad_bytes), world, c);
  }

  double peak_mem(const State& s) const { return *std::max_element(s.mem_bytes.begin(), s.mem_bytes.end()); }
  bool fits(const State& s) const { return peak_mem(s) + dense_mem_bytes <= capacity_bytes; }

  // GPUs sorted by current lookup load, then memory (least loaded first).
  std::vector<int32_t> least_loaded(const State& s) const {
    std::vector<int32_t> r(n);
    std::iota(r.begin(), r.end(), 0);
    std::stable_sort(r.begin(), r.end(), [&](int32_t a, int32_t b) {
      if (s.lookup_s[a] != s.lookup_s[b]) return s.lookup_s[a] < s.lookup_s[b];
      return s.mem_bytes[a] < s.mem_bytes[b];
    });
    return r;
  }

  // Candidate placements of `table` for the policy.
  std::vector<TablePlacement> options(size_t table, const State& s, const std::string& policy) const {
    const EmbeddingTable& t = sc.model.dlrm.tables[table];
    std::vector<TablePlacement> out;
    const bool all = policy == "greedy";
    if (all || policy == "all-data-parallel") out.push_back({TableSharding::kDataParallel, {}});
    if ((all || policy == "all-row-wise") && n > 1) out.push_back({TableSharding::kRowWise, {}});
    const std::vector<int32_t> order = least_loaded(s);
    if (all || policy == "all-table-wise") {
      // The least-loaded GPU, and the one with the most free memory (they may differ).
      out.push_back({TableSharding::kTableWise, {order[0]}});
      const auto most_free = static_cast<int32_t>(std::min_element(s.mem_bytes.begin(), s.mem_bytes.end()) - s.mem_bytes.begin());
      if (most_free != order[0]) out.push_back({TableSharding::kTableWise, {most_free}});
    }
    if (all || policy == "all-column-wise") {
      for (int64_t k = 2; k <= n && t.dim % k == 0 && t.dim / k >= kMinColumnShardDim; k *= 2) {
        if (!all && k * 2 <= n && t.dim % (k * 2) == 0 && t.dim / (k * 2) >= kMinColumnShardDim) continue;  // widest split only
        out.push_back({TableSharding::kColumnWise, std::vector<int32_t>(order.begin(), order.begin() + k)});
      }
    }
    return out;
  }

  // Places every table; on failure returns the reason naming the table.
  std::optional<DlrmShardingPlan> place(const std::string& policy, std::string& why) const {
    const auto& tables = sc.model.dlrm.tables;
    std::vector<size_t> order(tables.size());
    std::iota(order.begin(), order.end(), size_t{0});
    const double e = dlrm_table_bytes_per_element(sc);
    auto size_of = [&](size_t i) {
      return static_cast<double>(tables[i].rows) * (tables[i].dim * e + dlrm_optimizer_bytes_per_row(sc, tables[i].dim));
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return size_of(a) > size_of(b); });

    State s;
    s.mem_bytes.assign(n, 0);
    s.lookup_s.assign(n, 0);
    s.send_bytes.assign(n, 0);
    s.id_bytes.assign(n, 0);
    s.dp_grad_bytes = dense_grad_bytes;
    DlrmShardingPlan plan;
    plan.name = policy;
    plan.tables.resize(tables.size());
    for (size_t i : order) {
      std::optional<State> best;
      TablePlacement best_p;
      double best_cost = 0, best_mem = 0, least_mem = -1;
      // A table that fits in no GPU's HBM goes to host memory with an HBM cache (TorchRec's
      // planner proposes FUSED_UVM_CACHING when the HBM storage constraint fails).
      for (const bool uvm : {false, true}) {
        if (best) break;
        for (TablePlacement p : options(i, s, policy)) {
          if (uvm && p.kind == TableSharding::kDataParallel) continue;
          p.uvm_caching = uvm;
          const State t = add(s, loads_of(i, p));
          const double m = peak_mem(t);
          if (!uvm && (least_mem < 0 || m < least_mem)) least_mem = m;
          if (!fits(t)) continue;
          const double c = cost_s(t);
          if (!best || c < best_cost || (c == best_cost && m < best_mem)) {
            best = t;
            best_p = p;
            best_cost = c;
            best_mem = m;
          }
        }
      }
      if (!best) {
        const EmbeddingTable& t = tables[i];
        why = "table " + t.name + " (" + std::to_string(t.rows) + " rows x " + std::to_string(t.dim) + ", " +
              gib(size_of(i)) + " with optimizer state) ";
        if (least_mem < 0) {
          why += policy == "all-column-wise"
                     ? "cannot be split column-wise (dim " + std::to_string(t.dim) + " over 2+ GPUs into shards of at least " +
                           std::to_string(kMinColumnShardDim) + ")"
                     : "has no " + policy + " placement on " + std::to_string(n) + " GPU(s)";
        } else {
          why += "does not fit: placed " + policy + ", the busiest GPU would need " + gib(least_mem + dense_mem_bytes) +
                 " (dense part " + gib(dense_mem_bytes) + ") of " + gib(capacity_bytes) +
                 " usable, and its HBM cache in host memory (UVM caching) does not fit either";
        }
        return std::nullopt;
      }
      s = *best;
      plan.tables[i] = best_p;
    }
    return plan;
  }
};

}  // namespace

std::vector<BackendResult> DlrmSearchResult::results() const {
  std::vector<BackendResult> r;
  for (const auto& p : ranked) r.push_back(p.result);
  return r;
}

namespace {

// Why a plan that does not fit is rejected: its busiest GPU's need against the usable memory.
std::string busiest_gpu_need(const BackendResult& r) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "busiest GPU needs %.2f GiB of %.2f GiB usable", r.memory.peak_gib, r.memory.capacity_gib);
  return buf;
}

// The sharding the scenario gives (parallelism.embedding_sharding, checked when it was read):
// the one plan, or, when it does not fit, its reason.
DlrmSearchResult given_sharding(const Scenario& sc, const Plan& dense) {
  DlrmSearchResult out;
  Expected<DlrmShardingPlan> plan = parse_dlrm_plan(*sc.parallelism.embedding_sharding);
  const std::string check = plan ? check_dlrm_plan(sc, *plan) : plan.problems().front().message;
  if (!check.empty()) {
    out.no_fit_message = "parallelism.embedding_sharding: " + check;
    out.rejected.push_back({dense, out.no_fit_message});
    return out;
  }
  BackendResult r = estimate_dlrm(sc, *plan);
  if (!r.memory.fits) {
    out.no_fit_message = "the given sharding: " + busiest_gpu_need(r);
    out.rejected.push_back({dense, out.no_fit_message});
    return out;
  }
  out.ranked.push_back({*plan, std::move(r)});
  return out;
}

}  // namespace

DlrmSearchResult search_dlrm_sharding(const Scenario& sc) {
  DlrmSearchResult out;
  Plan dense;
  dense.dp = std::max<int64_t>(1, sc.cluster.num_gpus);
  const auto reject = [&](const std::string& reason) { out.rejected.push_back({dense, reason}); };
  if (sc.model.architecture != Architecture::kDlrm) {
    out.no_fit_message = "not a dlrm model (model.architecture is " + std::string(to_string(sc.model.architecture)) + ")";
    return out;
  }
  if (sc.cluster.num_gpus < 1 || sc.training.global_batch_size % sc.cluster.num_gpus != 0) {
    out.no_fit_message = "training.global_batch_size " + std::to_string(sc.training.global_batch_size) +
                         " is not divisible by cluster.num_gpus " + std::to_string(sc.cluster.num_gpus) +
                         " (the dense part is data-parallel over every GPU)";
    reject(out.no_fit_message);
    return out;
  }
  dense.micro_batch_size = sc.training.global_batch_size / dense.dp;

  const Planner planner(sc);
  if (planner.dense_mem_bytes > planner.capacity_bytes) {
    out.no_fit_message = "the dense part alone (MLPs, activations of " + std::to_string(dense.micro_batch_size) +
                         " samples per GPU) needs " + gib(planner.dense_mem_bytes) + " of " + gib(planner.capacity_bytes) +
                         " usable per GPU";
    reject(out.no_fit_message);
    return out;
  }
  if (sc.parallelism.embedding_sharding) return given_sharding(sc, dense);
  std::set<std::string> seen;
  std::string greedy_why;
  for (const std::string policy : {"greedy", "all-data-parallel", "all-table-wise", "all-column-wise", "all-row-wise"}) {
    std::string why;
    std::optional<DlrmShardingPlan> plan = planner.place(policy, why);
    if (!plan) {
      reject(policy + ": " + why);
      if (policy == "greedy") greedy_why = why;
      continue;
    }
    const std::string key = describe(*plan);
    if (!seen.insert(key).second) continue;  // same placement as an earlier policy
    BackendResult r = estimate_dlrm(sc, *plan);
    if (!r.memory.fits) {
      reject(policy + ": " + busiest_gpu_need(r));
      continue;
    }
    out.ranked.push_back({*plan, std::move(r)});
  }
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [](const DlrmRankedPlan& a, const DlrmRankedPlan& b) {
    return a.result.iteration_time_s < b.result.iteration_time_s;
  });
  if (out.ranked.empty()) out.no_fit_message = "no sharding plan fits: " + greedy_why;
  return out;
}

}  // namespace monarch
