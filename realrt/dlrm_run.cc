#include "realrt/dlrm_run.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/cost_model.h"
#include "realrt/dlrm_mpi_comm.h"
#include "realrt/run_io.h"
#include "strategies/dlrm_sharding.h"

namespace monarch::realrt {

bool cpu_runs_plan(const DlrmShardingPlan& plan) {
  return std::none_of(plan.tables.begin(), plan.tables.end(),
                      [](const TablePlacement& p) { return p.kind == TableSharding::kColumnWise; });
}

Expected<DlrmCpuSetup> dlrm_cpu_setup(const Scenario& sc, const DlrmShardingPlan& plan, int64_t steps) {
  Problems pr;
  auto bad = [&](std::string where, std::string what) { pr.push_back({std::move(where), std::move(what)}); };
  const DlrmConfig& d = sc.model.dlrm;
  const int64_t n = sc.cluster.num_gpus;
  if (sc.model.architecture != Architecture::kDlrm) bad("/model/architecture", "the CPU DLRM needs a dlrm model");
  if (sc.training.precision != Precision::kFp32)
    bad("/training/precision", "the CPU DLRM trains in fp32; found " + std::string(to_string(sc.training.precision)));
  if (sc.training.optimizer != Optimizer::kSgd)
    bad("/training/optimizer", "the CPU DLRM trains the MLPs with sgd; found " + std::string(to_string(sc.training.optimizer)));
  if (d.interaction != "dot") bad("/model/interaction", "the CPU DLRM has the dot interaction only; found \"" + d.interaction + "\"");
  if (d.embedding_optimizer != "rowwise-adagrad")
    bad("/model/embedding_optimizer", "the CPU DLRM has rowwise-adagrad only; found \"" + d.embedding_optimizer + "\"");
  if (d.tables.empty()) bad("/model/embedding_tables", "no tables");
  const int64_t dim = d.bottom_mlp.empty() ? 0 : d.bottom_mlp.back();
  if (dim < 1) bad("/model/bottom_mlp", "the CPU DLRM needs a bottom MLP (its last width is the embedding dim)");
  if (d.top_mlp.empty() || d.top_mlp.back() != 1) bad("/model/top_mlp", "the last top-MLP width must be 1 (the logit)");
  int64_t elements = 0;
  DlrmCpuSetup out;
  for (size_t t = 0; t < d.tables.size(); ++t) {
    const EmbeddingTable& e = d.tables[t];
    const std::string at = "/model/embedding_tables/" + std::to_string(t);
    if (e.dim != dim)
      bad(at + "/dim", "the CPU DLRM (dot interaction) needs every dim equal to the bottom MLP's last width " +
                           std::to_string(dim) + "; found " + std::to_string(e.dim));
    if (e.pooling_factor < 1 || e.pooling_factor != std::floor(e.pooling_factor) || e.pooling_factor > 1000)
      bad(at + "/pooling_factor", "the CPU DLRM looks up a whole number of ids per sample (1..1000)");
    elements += e.rows * std::max<int64_t>(e.dim, 0);
    out.config.table_rows.push_back(e.rows);
    out.config.table_pooling.push_back(static_cast<int64_t>(e.pooling_factor));
  }
  if (elements > kMaxCpuEmbeddingElements)
    bad("/model/embedding_tables", std::to_string(elements) + " embedding elements; the CPU runtime holds at most " +
                                       std::to_string(kMaxCpuEmbeddingElements) + " (a CPU-sized scenario is in scenarios/)");
  const int64_t B = sc.training.global_batch_size;
  if (B * static_cast<int64_t>(d.tables.size()) * std::max<int64_t>(dim, 1) > kMaxCpuExchangeElements)
    bad("/training/global_batch_size", "global batch x tables x dim is over the CPU runtime's " +
                                           std::to_string(kMaxCpuExchangeElements) + " exchange elements");
  if (!pr.empty()) return pr;
  if (const std::string why = check_dlrm_plan(sc, plan); !why.empty()) return Expected<DlrmCpuSetup>::fail("--sharding", why);
  for (size_t t = 0; t < plan.tables.size(); ++t) {
    const TablePlacement& p = plan.tables[t];
    switch (p.kind) {
      case TableSharding::kDataParallel: out.placements.push_back({CpuTableSharding::kDataParallel, 0}); break;
      case TableSharding::kTableWise: out.placements.push_back({CpuTableSharding::kTableWise, p.ranks.at(0)}); break;
      case TableSharding::kRowWise: out.placements.push_back({CpuTableSharding::kRowWise, 0}); break;
      case TableSharding::kColumnWise:
        return Expected<DlrmCpuSetup>::fail("--sharding", "table " + d.tables[t].name +
                                                              ": the CPU runtime places tables data-parallel, table-wise or "
                                                              "row-wise, not column-wise");
    }
  }
  out.config.dim = dim;
  out.config.dense_features = d.dense_features;
  out.config.bottom_mlp = d.bottom_mlp;
  out.config.top_mlp = d.top_mlp;
  out.config.global_batch = B;
  out.config.steps = steps > 0 ? steps : sc.training.steps;
  out.config.seed = static_cast<uint64_t>(sc.training.seed);
  if (const std::string why = check_dlrm_cpu_placements(out.config, out.placements, static_cast<int>(n)); !why.empty())
    return Expected<DlrmCpuSetup>::fail(sc.source_path.empty() ? "scenario" : sc.source_path, why);
  return out;
}

int run_dlrm_scenario(const Scenario& sc_in, const std::string& sharding, int64_t steps, const std::string& output) {
  int r = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  auto report = [&](const std::string& where, const std::string& what) {
    if (r == 0) std::fprintf(stderr, "monarch-run: error: %s: %s\n", where.c_str(), what.c_str());
  };
  Scenario sc = sc_in;
  if (sc.cluster.num_gpus != n) {
    report(sc.source_path.empty() ? "scenario" : sc.source_path,
           "the scenario has " + std::to_string(sc.cluster.num_gpus) + " GPUs (cluster.num_gpus), mpirun started " +
               std::to_string(n) + " ranks");
    return 2;
  }
  DlrmShardingPlan plan;
  if (!sharding.empty()) {
    Expected<DlrmShardingPlan> given = parse_dlrm_plan(sharding);
    if (!given) {
      report("--sharding", given.problems().front().message);
      return 2;
    }
    plan = std::move(given).value();
  } else {
    const DlrmSearchResult found = search_dlrm_sharding(sc);
    const DlrmRankedPlan* best = nullptr;
    for (const auto& rp : found.ranked)
      if (!best && cpu_runs_plan(rp.sharding)) best = &rp;
    if (!best) {
      report(sc.source_path, found.any_fits() ? "no fitting sharding plan without column-wise tables"
                                              : found.no_fit_message);
      return 2;
    }
    plan = best->sharding;
  }
  auto setup = dlrm_cpu_setup(sc, plan, steps);
  if (!setup) {
    for (const auto& p : setup.problems()) report(p.where, p.message);
    return 2;
  }
  MpiDlrmComm comm;
  const DlrmCpuRun run = train_dlrm_cpu(setup->config, setup->placements, comm);

  // ---- the result: losses, step time (slowest rank), measured all-to-all sizes.
  const int64_t S = static_cast<int64_t>(run.step_time_s.size());
  std::vector<double> step_s = run.step_time_s;
  MPI_Allreduce(MPI_IN_PLACE, step_s.data(), static_cast<int>(S), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  // Send buffers of this rank: forward pooled a2a, backward pooled a2a, rw forward, rw backward,
  // dp all-reduce; the largest over the ranks paces each collective.
  // Then the bytes it sent to other ranks in each (the all-reduce's: MPI does not say).
  std::vector<int64_t> mine = {run.pooled_forward_send_bytes, run.pooled_backward_send_bytes, run.rw_forward_send_bytes,
                               run.rw_backward_send_bytes, run.dp_allreduce_bytes, run.pooled_forward_wire_bytes,
                               run.pooled_backward_wire_bytes, run.rw_forward_wire_bytes, run.rw_backward_wire_bytes, 0};
  std::vector<int64_t> all(mine.size() * static_cast<size_t>(n));
  MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_INT64_T, all.data(), static_cast<int>(mine.size()),
                MPI_INT64_T, MPI_COMM_WORLD);
  int status = 0;
  if (r == 0) {
    BackendResult res;
    res.backend = "real-cpu";
    res.measured = true;
    res.plan = dlrm_plan(sc, plan);
    res.losses = run.losses;
    // Mean step time, the first step left out when there are more (warm-up: first touches).
    double sum = 0;
    const int64_t first = S > 1 ? 1 : 0;
    for (int64_t i = first; i < S; ++i) sum += step_s[static_cast<size_t>(i)];
    res.iteration_time_s = S > first ? sum / static_cast<double>(S - first) : 0;
    res.tokens_per_s = res.iteration_time_s > 0 ? static_cast<double>(setup->config.global_batch) / res.iteration_time_s : 0;
    auto max_of = [&](size_t k) {
      int64_t m = 0;
      for (int q = 0; q < n; ++q) m = std::max(m, all[static_cast<size_t>(q) * mine.size() + k]);
      return m;
    };
    // bytes: nccl-tests algorithm bytes of the largest measured send buffer (the convention of
    // the analytical and SimGrid entries: (n-1)/n x size for all-to-all, reduce-scatter and
    // all-gather, 2(n-1)/n x size for all-reduce).
    auto wire = [&](CollectiveKind k, int64_t size) { return static_cast<int64_t>(collective_wire_bytes(k, size, n)); };
    if (n > 1) {
      if (max_of(0) > 0)
        res.communication.push_back({CollectiveKind::kAllToAll, GroupKind::kWorld,
                                     wire(CollectiveKind::kAllToAll, max_of(0)) + wire(CollectiveKind::kAllToAll, max_of(1)), 2, 0, n});
      if (max_of(2) > 0) {
        res.communication.push_back(
            {CollectiveKind::kReduceScatter, GroupKind::kWorld, wire(CollectiveKind::kReduceScatter, max_of(2)), 1, 0, n});
        res.communication.push_back({CollectiveKind::kAllGather, GroupKind::kWorld, wire(CollectiveKind::kAllGather, max_of(3)), 1, 0, n});
      }
      res.communication.push_back({CollectiveKind::kAllReduce, GroupKind::kDp, wire(CollectiveKind::kAllReduce, max_of(4)), 1, 0, n});
    }
    std::vector<RankSummary> ranks;
    constexpr CollectiveKind kinds[] = {CollectiveKind::kAllToAll, CollectiveKind::kAllToAll, CollectiveKind::kReduceScatter,
                                        CollectiveKind::kAllGather, CollectiveKind::kAllReduce};
    for (int q = 0; q < n; ++q) {
      RankSummary rs;
      rs.rank = q;
      rs.step_time_s = res.iteration_time_s;
      for (size_t k = 0; k < 5; ++k) {
        const int64_t size = all[static_cast<size_t>(q) * mine.size() + k];
        if (size <= 0) continue;
        const int64_t sent = k == 4 ? wire(CollectiveKind::kAllReduce, size) : all[static_cast<size_t>(q) * mine.size() + 5 + k];
        rs.communication.push_back({kinds[k], k == 4 ? GroupKind::kDp : GroupKind::kWorld, sent, 1, 0, n});
        rs.size_bytes.push_back(size);
      }
      ranks.push_back(std::move(rs));
    }
    for (size_t i = 0; i < res.losses.size(); ++i) std::printf("step %zu loss %.6f\n", i, res.losses[i]);
    std::printf("sharding %s: iteration %.4f s, %.0f samples/s\n", describe(plan).c_str(), res.iteration_time_s,
                res.tokens_per_s);
    if (!output.empty()) {
      nlohmann::json j = run_output_json(res, 0, ranks);
      j["sharding"] = describe(plan);
      // Every rank's measured send buffers (bytes, first step), by collective.
      const char* names[] = {"pooled_forward_send_bytes", "pooled_backward_send_bytes", "rw_forward_send_bytes",
                             "rw_backward_send_bytes", "dp_allreduce_bytes"};
      nlohmann::json per_rank = nlohmann::json::array();
      for (int q = 0; q < n; ++q) {
        nlohmann::json e;
        e["rank"] = q;
        for (size_t k = 0; k < 5; ++k) e[names[k]] = all[static_cast<size_t>(q) * mine.size() + k];
        per_rank.push_back(e);
      }
      j["dlrm_send_bytes"] = per_rank;
      if (!write_output_file(output, j)) status = 1;
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return status;
}

}  // namespace monarch::realrt
